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

// falseAlarms replays n normal samples after the warm-up and returns the
// share with an SPE alarm and with a T² alarm.
func falseAlarms(t *testing.T, learn string, standardize, freeze bool, f float64, seed uint64, n int) (spe, t2 float64) {
	a := faRun(t, faCase{learn: learn, standardize: standardize, freeze: freeze, forget: f, trend: TrendOff}, seed, n)
	return a.spe, a.t2
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
}

// faResult is what faRun measured over the judged samples.
type faResult struct {
	spe, t2, trend, learned float64
	// lastSPE is the SPE false-alarm rate over the last quarter.
	lastSPE float64
}

// faRun replays n normal samples of the process (drifting by c.drift per
// sample) after the warm-up and returns the shares with an SPE alarm, a
// T² alarm, a trend alarm, and learned.
func faRun(t *testing.T, c faCase, seed uint64, n int) faResult {
	const budget = 100
	l := newLearner(t, 3, 2, budget, c.forget)
	m := newMonitor(t, Config{Learn: c.learn, Standardize: c.standardize, Freeze: c.freeze, Dim: 3, Forget: c.forget, Trend: c.trend}, budget)
	rng := rand.New(rand.NewPCG(seed, 7))
	x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
	var nSPE, nT2, nTrend, nLearned, nLast, judged int
	for i := 0; judged < n; i++ {
		drifting(rng, x, c.drift*float64(i))
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
// modes, with and without standardisation and forgetting, pooled over seeds.
func TestFalseAlarmRate(t *testing.T) {
	// 4,000 samples after the warm-up (0.4 s in all): over the first
	// ~1,000 the window still holds the warm-up's statistics of a younger
	// model, and the T² limit is conservative (0.3–0.4 % over 1,500).
	n := 4000
	for _, tc := range []struct {
		name        string
		learn       string
		standardize bool
		freeze      bool
		forget      float64
	}{
		{"normal", LearnNormal, false, false, 1},
		{"normal-standardize", LearnNormal, true, false, 1},
		{"normal-standardize-freeze", LearnNormal, true, true, 1},
		{"normal-forget", LearnNormal, true, false, 0.999},
		{"always", LearnAlways, false, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spe, t2 float64
			const seeds = 3
			for s := range uint64(seeds) {
				a, b := falseAlarms(t, tc.learn, tc.standardize, tc.freeze, tc.forget, s+1, n)
				spe += a / seeds
				t2 += b / seeds
			}
			t.Logf("%s: false alarms over %d×%d normal samples: SPE %.2f %%, T² %.2f %%", tc.name, seeds, n, 100*spe, 100*t2)
			if math.Abs(spe-0.01) > 0.005 {
				t.Errorf("SPE false-alarm rate %.4f, want 0.01 ± 0.005", spe)
			}
			if math.Abs(t2-0.01) > 0.005 {
				t.Errorf("T² false-alarm rate %.4f, want 0.01 ± 0.005", t2)
			}
		})
	}
}

func TestTrendExplore(t *testing.T) {
	for _, c := range []faCase{
		{name: "normal", learn: LearnNormal, forget: 1, trend: TrendOff},
		{name: "trend", learn: LearnNormal, forget: 1, trend: TrendEWMA},
		{name: "trend-std", learn: LearnNormal, forget: 1, trend: TrendEWMA, standardize: true, freeze: true},
		{name: "trend-forget", learn: LearnNormal, forget: 0.999, trend: TrendEWMA, standardize: true},
		{name: "normal-drift", learn: LearnNormal, forget: 1, trend: TrendOff, drift: 1e-4},
		{name: "trend-drift", learn: LearnNormal, forget: 1, trend: TrendEWMA, drift: 1e-4},
		{name: "normal-drift-forget", learn: LearnNormal, forget: 0.999, trend: TrendOff, drift: 1e-4, standardize: true},
		{name: "trend-drift-forget", learn: LearnNormal, forget: 0.999, trend: TrendEWMA, drift: 1e-4, standardize: true},
		{name: "normal-drift3-forget", learn: LearnNormal, forget: 0.999, trend: TrendOff, drift: 3e-4, standardize: true},
		{name: "trend-drift3-forget", learn: LearnNormal, forget: 0.999, trend: TrendEWMA, drift: 3e-4, standardize: true},
	} {
		for s := range uint64(3) {
			a := faRun(t, c, s+1, 8000)
			t.Logf("%-22s seed %d: SPE %.2f %% (last quarter %.2f %%), T² %.2f %%, trend %.2f %%, learned %.1f %%", c.name, s+1, 100*a.spe, 100*a.lastSPE, 100*a.t2, 100*a.trend, 100*a.learned)
		}
	}
}

var _ = errors.Is

func TestTrendTrace(t *testing.T) {
	for _, tr := range []string{TrendOff, TrendEWMA} {
		const budget = 100
		l := newLearner(t, 3, 2, budget, 0.999)
		m := newMonitor(t, Config{Learn: LearnNormal, Standardize: true, Dim: 3, Forget: 0.999, Trend: tr}, budget)
		rng := rand.New(rand.NewPCG(1, 7))
		x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
		var a, tt, ln, mspe int
		var spe float64
		for i := range 8200 {
			drifting(rng, x, 0)
			r, _ := m.Step(l, nil, in, z, x)
			if r.Verdict.Alarm != 0 {
				a++
			}
			if r.Verdict.Trend {
				tt++
			}
			if r.Learned {
				ln++
			}
			spe += r.Novelty.SPE
			mspe++
			if (i+1)%400 == 0 {
				sl, t2l, _ := m.Limits()
				t.Logf("%s %5d: limits %.4f %.4f, alarms %3d trend %3d learned %3d mean SPE %.4f", tr, i+1, sl, t2l, a, tt, ln, spe/float64(mspe))
				a, tt, ln, spe, mspe = 0, 0, 0, 0, 0
			}
		}
	}
}
