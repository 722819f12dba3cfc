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
func process(rng *rand.Rand, x []float64) {
	t := 0.01 + 1.99*rng.Float64()
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
	const budget = 100
	l := newLearner(t, 3, 2, budget, f)
	m := newMonitor(t, Config{Learn: learn, Standardize: standardize, Freeze: freeze, Dim: 3, Forget: f}, budget)
	rng := rand.New(rand.NewPCG(seed, 7))
	x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
	var nSPE, nT2, judged int
	for i := 0; judged < n; i++ {
		process(rng, x)
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
		}
		if r.Verdict.Alarm&AlarmT2 != 0 {
			nT2++
		}
	}
	return float64(nSPE) / float64(n), float64(nT2) / float64(n)
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

var _ = errors.Is
