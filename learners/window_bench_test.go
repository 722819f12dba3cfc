package learners_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// BenchmarkWindowRefresh measures one window Learn per op at the grid
// cells of BenchmarkLearn with Refresh at its default (r0) and at 2 and
// 4 times it: the cost of the refreshes against the lag of the published
// components (see Config.Refresh).
//
//	go test ./learners -run '^$' -bench 'WindowRefresh' -benchmem
func BenchmarkWindowRefresh(b *testing.B) {
	for _, c := range benchCells[:2] {
		cfg := learners.Config{Learner: learners.KindWindow, Dim: c.d, Components: c.k, Budget: c.b,
			Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(c.d)}}
		r0 := max(1, 2*c.k, c.b/40) // the default
		for _, mul := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("B%d_d%d_k%d/refresh%d", c.b, c.d, c.k, mul*r0), func(b *testing.B) {
				cfg := cfg
				cfg.Refresh = mul * r0
				l, err := learners.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(42, uint64(c.d)))
				pool := make([][]float64, 4096)
				for i := range pool {
					pool[i] = make([]float64, c.d)
					for j := range pool[i] {
						pool[i][j] = rng.NormFloat64()
					}
				}
				for i := range 2 * c.b {
					if err := l.Learn(pool[i]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := l.Learn(pool[i%len(pool)]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
