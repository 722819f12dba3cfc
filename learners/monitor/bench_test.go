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
