package learners_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// benchCells is the (B, d, k) grid of the learner benchmarks.
var benchCells = []struct{ b, d, k int }{{128, 8, 8}, {512, 64, 16}, {2048, 784, 32}}

// benchLearner returns a learner of the given kind warmed up on 2·B
// observations of isotropic Gaussian vectors (rbf, γ = 1/d), and the pool of
// observations the benchmark cycles through.
func benchLearner(b *testing.B, kind string, B, d, k int) (learners.Learner, [][]float64) {
	b.Helper()
	cfg := learners.Config{Learner: kind, Dim: d, Components: k, Budget: B,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(d)}}
	if kind == learners.KindWindow && k >= B {
		cfg.Components = B - 1
	}
	l, err := learners.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// Isotropic Gaussian vectors: with γ = 1/d every point is far from
	// the span of the others, so the dictionary fills and stays full
	// (worst case for the dictionary learners: admissions and evictions).
	rng := rand.New(rand.NewPCG(42, uint64(d)))
	pool := make([][]float64, 4096)
	for i := range pool {
		pool[i] = make([]float64, d)
		for j := range pool[i] {
			pool[i][j] = rng.NormFloat64()
		}
	}
	for i := range 2 * B {
		if err := l.Learn(pool[i%len(pool)]); err != nil {
			b.Fatal(err)
		}
	}
	if f, ok := l.(interface{ Fit() error }); ok {
		if err := f.Fit(); err != nil {
			b.Fatal(err)
		}
	}
	return l, pool
}

// BenchmarkLearn measures one Learn per op for every learner over the
// (B, d, k) grid, after warm-up (dictionary or window full).
//
//	go test ./learners -run '^$' -bench 'Learn/' -benchmem
func BenchmarkLearn(b *testing.B) {
	for _, kind := range []string{learners.KindIKPCA, learners.KindKHA, learners.KindWindow, learners.KindBatch} {
		for _, c := range benchCells {
			b.Run(fmt.Sprintf("%s/B%d_d%d_k%d", kind, c.b, c.d, c.k), func(b *testing.B) {
				l, pool := benchLearner(b, kind, c.b, c.d, c.k)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := l.Learn(pool[i%len(pool)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(l.Summary(nil).Stored), "stored")
			})
		}
	}
}

// BenchmarkTransform measures one Transform per op (projection onto the
// published components) for every learner over the grid.
//
//	go test ./learners -run '^$' -bench 'Transform/' -benchmem
func BenchmarkTransform(b *testing.B) {
	for _, kind := range []string{learners.KindIKPCA, learners.KindKHA, learners.KindWindow, learners.KindBatch} {
		for _, c := range benchCells {
			b.Run(fmt.Sprintf("%s/B%d_d%d_k%d", kind, c.b, c.d, c.k), func(b *testing.B) {
				l, pool := benchLearner(b, kind, c.b, c.d, c.k)
				dst := make([]float64, l.Components())
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.Transform(dst, pool[i%len(pool)]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkIKPCAEviction measures ikpca's Learn under every eviction
// policy on the isotropic stream (every message novel: the budget binds
// on every message), over the grid and at (B, d) = (500, 784), with the
// number of dictionary changes (a swap's newcomer or a moved member) per
// message. The cost of one eviction by itself is BenchmarkIKPCAEvictionCost
// (internal).
//
//	go test ./learners -run '^$' -bench 'IKPCAEviction/' -benchmem
func BenchmarkIKPCAEviction(b *testing.B) {
	cells := append(benchCells[:2:2], struct{ b, d, k int }{500, 784, 16})
	for _, ev := range []string{learners.EvictCentroid, "lli", "contribution", "fifo"} {
		for _, c := range cells {
			b.Run(fmt.Sprintf("%s/B%d_d%d_k%d", ev, c.b, c.d, c.k), func(b *testing.B) {
				l, pool := benchIKPCA(b, ev, c.b, c.d, c.k)
				clock0 := l.State().Ints["clock"]
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := l.Learn(pool[(2*c.b+i)%len(pool)]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				// Admissions (a swap's newcomer or a moved member) per message.
				b.ReportMetric(float64(l.State().Ints["clock"]-clock0)/float64(b.N), "changes/msg")
			})
		}
	}
}

// benchIKPCA is benchLearner for ikpca with the given eviction policy.
func benchIKPCA(b *testing.B, ev string, B, d, k int) (*learners.IKPCA, [][]float64) {
	b.Helper()
	l, err := learners.NewIKPCA(learners.Config{Dim: d, Components: k, Budget: B, Eviction: ev,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(d)}})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(42, uint64(d)))
	pool := make([][]float64, 4096)
	for i := range pool {
		pool[i] = make([]float64, d)
		for j := range pool[i] {
			pool[i][j] = rng.NormFloat64()
		}
	}
	for i := range 2 * B {
		if err := l.Learn(pool[i%len(pool)]); err != nil {
			b.Fatal(err)
		}
	}
	return l, pool
}

// BenchmarkIKPCAPlainLearn measures a Learn that admits nothing (the
// observation is a dictionary member) on a full dictionary: the baseline
// an eviction's cost is compared with.
func BenchmarkIKPCAPlainLearn(b *testing.B) {
	for _, c := range []struct{ b, d, k int }{{128, 8, 8}, {512, 64, 16}, {500, 784, 16}} {
		b.Run(fmt.Sprintf("B%d_d%d_k%d", c.b, c.d, c.k), func(b *testing.B) {
			l, pool := benchIKPCA(b, "fifo", c.b, c.d, c.k)
			// pool[2B−1] was the last admission: a member now.
			x := pool[2*c.b-1]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := l.Learn(x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
