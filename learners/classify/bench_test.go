package classify_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
)

// BenchmarkStep is one prequential step of the classifier stage beside
// the learner (satellite's shape: d = 36, B = 200, C = 6), against the
// learner's Learn alone: LearnTracked, Predict, Teach.
func BenchmarkStep(b *testing.B) {
	const d, budget, classes = 36, 200, 6
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([][]float64, 4096)
	for i := range xs {
		xs[i] = make([]float64, d)
		for j := range xs[i] {
			xs[i][j] = rng.NormFloat64()
		}
	}
	cfg := learners.Config{Dim: d, Components: 16, Budget: budget, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1.0 / d}}
	b.Run("learner only", func(b *testing.B) {
		l, _ := learners.NewIKPCA(cfg)
		for _, x := range xs[:2*budget] {
			_ = l.Learn(x)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := l.Learn(xs[i%len(xs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("learner+classifier", func(b *testing.B) {
		l, _ := learners.NewIKPCA(cfg)
		ob, _ := classify.NewOnBasis(l, classify.Config{Classes: classes})
		scores := make([]float64, classes)
		step := func(i int) {
			x := xs[i%len(xs)]
			if err := ob.Learn(x); err != nil {
				b.Fatal(err)
			}
			if _, _, err := ob.Predict(scores, x); err != nil {
				b.Fatal(err)
			}
			if err := ob.Teach(i % classes); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 2 * budget {
			step(i)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			step(i)
			i++
		}
	})
}
