package monitor

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// process draws one sample of the nonlinear process of Dong & McAvoy (1996)
// as used by Lee et al. (2004): t ~ U[0.01, 2], x₁ = t + e₁,
// x₂ = t² − 3t + e₂, x₃ = −t³ + 3t² + e₃, eᵢ ~ N(0, 0.01), into x.
func process(rng *rand.Rand, x []float64) { drifting(rng, x, 0) }

// drifting is process with t ~ U[0.01 + shift, 2 + shift].
func drifting(rng *rand.Rand, x []float64, shift float64) {
	t := 0.01 + shift + 1.99*rng.Float64()
	x[0] = t + 0.1*rng.NormFloat64()
	x[1] = t*t - 3*t + 0.1*rng.NormFloat64()
	x[2] = -t*t*t + 3*t*t + 0.1*rng.NormFloat64()
}

func newLearner(t testing.TB, d, k, b int, f float64) learners.Learner {
	t.Helper()
	l, err := learners.New(learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: k, Budget: b,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1.0 / float64(d)}, Forget: f, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newMonitor(t testing.TB, c Config, budget int) *Monitor {
	t.Helper()
	m, err := New(c.WithDefaults(budget))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// faCase is one configuration of a false-alarm run.
type faCase struct {
	name        string
	learn       string
	standardize bool
	freeze      bool
	forget      float64
	trend       string
	drift       float64 // of the process's t per sample
	phi         float64 // autocorrelation of t (AR(1) behind a uniform marginal)
}

// faResult is what faRun measured over the judged samples.
type faResult struct {
	spe, t2, trend, learned float64
	// lastSPE is the SPE false-alarm rate over the last quarter.
	lastSPE float64
}

// faRun replays n normal samples of the process (drifting by c.drift per
// sample, autocorrelated by c.phi) after the warm-up and returns the
// shares with an SPE alarm, a T² alarm, a trend alarm, and learned (or
// accepted for learning).
func faRun(t *testing.T, c faCase, seed uint64, n int) faResult {
	const budget = 100
	l := newLearner(t, 3, 2, budget, c.forget)
	m := newMonitor(t, Config{Learn: c.learn, Standardize: c.standardize, Freeze: c.freeze, Dim: 3, Forget: c.forget, Trend: c.trend}, budget)
	rng := rand.New(rand.NewPCG(seed, 7))
	x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
	var nSPE, nT2, nTrend, nLearned, nLast, judged int
	var a float64
	if c.phi > 0 {
		a = rng.NormFloat64()
	}
	for i := 0; judged < n; i++ {
		if c.phi > 0 {
			a = c.phi*a + math.Sqrt(1-c.phi*c.phi)*rng.NormFloat64()
			u := 0.5 * math.Erfc(-a/math.Sqrt2)
			x0 := 0.01 + c.drift*float64(i) + 1.99*u
			x[0] = x0 + 0.1*rng.NormFloat64()
			x[1] = x0*x0 - 3*x0 + 0.1*rng.NormFloat64()
			x[2] = -x0*x0*x0 + 3*x0*x0 + 0.1*rng.NormFloat64()
		} else {
			drifting(rng, x, c.drift*float64(i))
		}
		r, err := m.Step(l, nil, in, z, x)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Verdict.InForce {
			continue
		}
		judged++
		if r.Verdict.Alarm&AlarmSPE != 0 {
			nSPE++
			if judged > 3*n/4 {
				nLast++
			}
		}
		if r.Verdict.Alarm&AlarmT2 != 0 {
			nT2++
		}
		if r.Verdict.Trend {
			nTrend++
		}
		if r.Learned {
			nLearned++
		}
	}
	f := float64(n)
	return faResult{float64(nSPE) / f, float64(nT2) / f, float64(nTrend) / f, float64(nLearned) / f, float64(nLast) / (f - float64(3*n/4))}
}

// TestFalseAlarmRate checks that the limits' false-alarm rate on normal data
// is within ±0.5 points of 1 − level = 1 % at level 0.99, for both learning
// modes, with and without standardisation, forgetting and the trend gate,
// pooled over seeds; and that the trend gate (on by default with learn
// normal) stops learning on about 1 − level of normal observations.
func TestFalseAlarmRate(t *testing.T) {
	// 4,000 samples after the warm-up (0.5 s in all): over the first
	// ~1,000 the window still holds the warm-up's statistics of a younger
	// model, and the T² limit is conservative (0.3–0.4 % over 1,500).
	n := 4000
	for _, c := range []faCase{
		{name: "normal", learn: LearnNormal, forget: 1},
		{name: "normal-trend-off", learn: LearnNormal, forget: 1, trend: TrendOff},
		{name: "normal-standardize", learn: LearnNormal, standardize: true, forget: 1},
		{name: "normal-standardize-freeze", learn: LearnNormal, standardize: true, freeze: true, forget: 1},
		{name: "normal-forget", learn: LearnNormal, standardize: true, forget: 0.999},
		{name: "always", learn: LearnAlways, forget: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var spe, t2, trend float64
			const seeds = 3
			for s := range uint64(seeds) {
				a := faRun(t, c, s+1, n)
				spe += a.spe / seeds
				t2 += a.t2 / seeds
				trend += a.trend / seeds
			}
			t.Logf("%s: false alarms over %d×%d normal samples: SPE %.2f %%, T² %.2f %%; trend gate %.2f %%", c.name, seeds, n, 100*spe, 100*t2, 100*trend)
			if math.Abs(spe-0.01) > 0.005 {
				t.Errorf("SPE false-alarm rate %.4f, want 0.01 ± 0.005", spe)
			}
			if math.Abs(t2-0.01) > 0.005 {
				t.Errorf("T² false-alarm rate %.4f, want 0.01 ± 0.005", t2)
			}
			if on := c.learn == LearnNormal && c.trend != TrendOff; on && (trend < 0.002 || trend > 0.015) {
				t.Errorf("trend gate on %.4f of normal observations, want about 0.01 (0.002–0.015)", trend)
			} else if !on && trend != 0 {
				t.Errorf("trend gate on %.4f of the observations, want 0 (off)", trend)
			}
		})
	}
}

// TestTrendDrift checks that the trend gate does not cost the tracking of
// slow normal drift: on the process whose range of t moves by 10⁻⁴ per
// sample (0.8 over the run, 40 % of its width), learn normal with the
// trend gate raises about as many SPE alarms as without it. On
// autocorrelated normal data (t behind an AR(1) of coefficient 0.9, a
// warm-up of 200 rows: about ten independent ones) learn normal raised
// 3–30 % SPE false alarms before excursions were learned (issue 31); the
// test wants at most 2 % with and without the gate (the limit's 1 % and
// as much again).
func TestTrendDrift(t *testing.T) {
	for _, drift := range []struct {
		name     string
		drift    float64
		phi      float64
		tolerate float64 // SPE false alarms of the trend gate over those without it, points
	}{
		{"drift 1e-4", 1e-4, 0, 0.01},
		{"AR(1) 0.9", 0, 0.9, 0.01},
	} {
		var off, on faResult
		const seeds = 3
		for s := range uint64(seeds) {
			a := faRun(t, faCase{learn: LearnNormal, forget: 1, trend: TrendOff, drift: drift.drift, phi: drift.phi}, s+1, 8000)
			b := faRun(t, faCase{learn: LearnNormal, forget: 1, trend: TrendEWMA, drift: drift.drift, phi: drift.phi}, s+1, 8000)
			t.Logf("%s, seed %d: SPE false alarms without the trend gate %.2f %% (learned %.1f %%), with it %.2f %% (learned %.1f %%, gated %.2f %%)",
				drift.name, s+1, 100*a.spe, 100*a.learned, 100*b.spe, 100*b.learned, 100*b.trend)
			off.spe += a.spe / seeds
			on.spe += b.spe / seeds
		}
		t.Logf("%s: SPE false alarms without the trend gate %.2f %%, with it %.2f %%", drift.name, 100*off.spe, 100*on.spe)
		if on.spe > off.spe+drift.tolerate {
			t.Errorf("%s: SPE false alarms with the trend gate %.4f, without %.4f: want at most %.3f more", drift.name, on.spe, off.spe, drift.tolerate)
		}
		if drift.phi > 0 && (on.spe > 0.02 || off.spe > 0.02) {
			t.Errorf("%s: SPE false alarms with the trend gate %.4f, without %.4f: want ≤ 0.02", drift.name, on.spe, off.spe)
		}
	}
}

// TestTrendGate checks the gate on a slow ramp of x₃ (+0.002 per sample,
// about a fifth of the noise's standard deviation every ten samples):
// without it learn normal learns most of the ramp and alarms on few of
// its samples; with it it learns few and alarms on many more; with
// AcceptAfter 50 the ramp is not accepted as a new regime: its
// observations held by the trend gate without an alarm do not count
// towards accepting (issue 31), only runs of alarms do (TestGatedLearning
// accepts a step after 50 alarms).
func TestTrendGate(t *testing.T) {
	run := func(trend string, acceptAfter int) (learned, alarms, accepted int) {
		const budget, onset, n = 100, 600, 1400
		l := newLearner(t, 3, 2, budget, 1)
		m := newMonitor(t, Config{Learn: LearnNormal, Dim: 3, Trend: trend, AcceptAfter: acceptAfter}, budget)
		rng := rand.New(rand.NewPCG(5, 5))
		x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
		for i := range n {
			process(rng, x)
			if i >= onset {
				x[2] += 0.002 * float64(i-onset+1)
			}
			r, err := m.Step(l, nil, in, z, x)
			if err != nil {
				t.Fatal(err)
			}
			if i >= onset {
				if r.Learned {
					learned++
				}
				if r.Verdict.Alarm&AlarmSPE != 0 {
					alarms++
				}
				if r.Accepted {
					accepted++
				}
			}
		}
		return
	}
	lOff, aOff, _ := run(TrendOff, 0)
	lOn, aOn, _ := run(TrendEWMA, 0)
	_, _, acc := run(TrendEWMA, 50)
	t.Logf("ramp of 800 samples: without the trend gate %d learned, %d SPE alarms; with it %d learned, %d alarms; accept after 50: %d regime(s) accepted", lOff, aOff, lOn, aOn, acc)
	if lOn >= lOff/2 || aOn <= aOff+aOff/2 {
		t.Errorf("with the trend gate %d learned, %d alarms; without %d, %d: want under half as many learned and half as many alarms again", lOn, aOn, lOff, aOff)
	}
	if acc != 0 {
		t.Errorf("accept after 50: %d regime(s) accepted on a ramp whose alarms come in runs shorter than 50 between held observations, want 0", acc)
	}
}

var _ = errors.Is
