package monitor

import (
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// fixed is a Scorer with no cost of its own, so that a benchmark of Step
// measures the monitor: its Score returns the next of a stream of
// chi-square-like statistics.
type fixed struct {
	rng *rand.Rand
}

func (fixed) Learn([]float64) error { return nil }

func (f fixed) Score(dst, x []float64) ([]float64, learners.Novelty, error) {
	a, b := f.rng.NormFloat64(), f.rng.NormFloat64()
	return dst, learners.Novelty{SPE: a*a + b*b, T2: a * a}, nil
}

// BenchmarkStep is the hot-path cost of limits, alarms and gating per
// message (the learner's own Learn and Score excluded), with d = 52 for
// the standardisation.
func BenchmarkStep(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"always", Config{Learn: LearnAlways}},
		{"normal-trend-off", Config{Learn: LearnNormal, Trend: TrendOff}},
		{"normal", Config{Learn: LearnNormal}},
		{"normal-standardize-d52", Config{Learn: LearnNormal, Standardize: true}},
		// The default since issue 31's third round: with the linear
		// residual (its index O(d·k), the per-variable EWMA O(d), an
		// eigendecomposition O(d³) every d learned rows).
		{"normal-standardize-linear-d52", Config{Learn: LearnNormal, Standardize: true, Linear: true, LinearComponents: 20}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.cfg
			c.Dim = 52
			m, err := New(c.WithDefaults(200))
			if err != nil {
				b.Fatal(err)
			}
			s := fixed{rand.New(rand.NewPCG(1, 1))}
			x, in, z := make([]float64, 52), make([]float64, 52), make([]float64, 20)
			for i := range x {
				x[i] = float64(i)
			}
			for range 5000 { // past the warm-up, windows full
				m.Step(s, nil, in, z, x)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := m.Step(s, nil, in, z, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContributions is the hot-path cost of an alarm's contributions
// (issue 31): Step on a normal and on an alarmed observation of 52
// variables with the ikpca learner (budget 200, 20 components, RBF), learn
// normal, standardised; the difference is the contributions' cost (4d + 1
// Scores), paid only by an alarmed observation. With linear the linear
// residual is on as well.
func BenchmarkContributions(b *testing.B) {
	const d, k, budget = 52, 20, 200
	for _, linear := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(2, 2))
		l, err := learners.New(learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: k, Budget: budget,
			Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1.0 / d}, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		c := Config{Learn: LearnNormal, Standardize: true, Freeze: true, Dim: d, Linear: linear, LinearComponents: k}
		m, err := New(c.WithDefaults(budget))
		if err != nil {
			b.Fatal(err)
		}
		// Normal rows: three latent factors, mixed into d variables.
		mix := make([]float64, 3*d)
		for i := range mix {
			mix[i] = rng.NormFloat64()
		}
		row := func(x []float64) {
			f := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			for j := range x {
				x[j] = 0.1*rng.NormFloat64() + f[0]*mix[j] + f[1]*mix[d+j] + f[2]*mix[2*d+j]
			}
		}
		x, in, z := make([]float64, d), make([]float64, d), make([]float64, k)
		for range 1500 {
			row(x)
			if _, err := m.Step(l, nil, in, z, x); err != nil {
				b.Fatal(err)
			}
		}
		normal := make([]float64, d)
		row(normal)
		faulty := append([]float64(nil), normal...)
		faulty[7] += 20
		for _, tc := range []struct {
			name string
			x    []float64
		}{{"normal", normal}, {"alarmed", faulty}} {
			name := tc.name
			if linear {
				name += "-linear"
			}
			b.Run(name, func(b *testing.B) {
				r, err := m.Step(l, nil, in, z, tc.x)
				if err != nil {
					b.Fatal(err)
				}
				if alarmed := r.Verdict.Alarm != AlarmNone; alarmed != (tc.name == "alarmed") || alarmed != (len(r.Contrib) > 0) {
					b.Fatalf("%s: alarm %v with %d contributions", tc.name, r.Verdict.Alarm, len(r.Contrib))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := m.Step(l, nil, in, z, tc.x); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
