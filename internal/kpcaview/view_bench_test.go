package kpcaview

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// fullLive is a live Series at its bounds (2,048 samples of 8 components,
// 600 buckets), as a watched key of the page after ten minutes.
func fullLive() *Series {
	s := NewSeries(Options{Samples: 2048, Buckets: 600, Width: 1000, PerBucket: 64})
	rng := rand.New(rand.NewPCG(1, 1))
	z, eig := make([]float64, 8), make([]float64, 8)
	for i := range 600 * 200 {
		for j := range z {
			z[j], eig[j] = rng.NormFloat64(), rng.Float64()
		}
		s.Add(&Observation{X: int64(i) * 5, Seq: uint64(i), Z: z, SPE: rng.Float64(), T2: 10 * rng.Float64(), Eigenvalues: eig,
			Explained: 0.9, Learn: 1e-5, Age: 1e-3, In: int64(i)})
	}
	return s
}

// BenchmarkView is the cost of one API request for a full record: the
// view (limits, drift markers) and its JSON encoding.
func BenchmarkView(b *testing.B) {
	s := fullLive()
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			s.View(0.99, DefaultDrift)
		}
	})
	b.Run("json", func(b *testing.B) {
		v := s.View(0.99, DefaultDrift)
		for b.Loop() {
			buf, err := json.Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
		}
	})
}
