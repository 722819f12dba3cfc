package learners

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkIKPCAEvictionCost measures one eviction by itself on a full
// dictionary, against a plain Learn (an observation that is a member, so
// nothing is admitted) on the same learner: "move" is a centroid move
// (kernel row of the new position, column j of P by two triangular solves,
// eviction with the dropped coordinate carried, admission); "swap" is a
// fifo replacement (the oldest member evicted, x admitted: a whole Learn).
//
//	go test ./learners -run '^$' -bench IKPCAEvictionCost -benchmem
func BenchmarkIKPCAEvictionCost(b *testing.B) {
	for _, c := range []struct{ b, d, k int }{{128, 8, 8}, {512, 64, 16}, {500, 784, 16}} {
		rng := rand.New(rand.NewPCG(42, uint64(c.d)))
		pool := make([][]float64, 4096)
		for i := range pool {
			pool[i] = make([]float64, c.d)
			for j := range pool[i] {
				pool[i][j] = rng.NormFloat64()
			}
		}
		warm := func(b *testing.B, ev string) *IKPCA {
			l, err := NewIKPCA(Config{Dim: c.d, Components: c.k, Budget: c.b, Eviction: ev,
				Kernel: Kernel{Name: KernelRBF, Gamma: 1 / float64(c.d)}})
			if err != nil {
				b.Fatal(err)
			}
			for i := range c.b + 64 {
				if err := l.Learn(pool[i]); err != nil {
					b.Fatal(err)
				}
			}
			return l
		}
		name := fmt.Sprintf("B%d_d%d_k%d", c.b, c.d, c.k)
		b.Run("plain/"+name, func(b *testing.B) {
			l := warm(b, "fifo")
			x := append([]float64(nil), l.rows.Point(l.rows.Len()-1)...)
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Learn(x); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("swap_fifo/"+name, func(b *testing.B) {
			l := warm(b, "fifo")
			i := c.b + 64
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Learn(pool[i%len(pool)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("move_centroid/"+name, func(b *testing.B) {
			l := warm(b, EvictCentroid)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				j := i % l.rows.Len()
				// Absorb one pool point into member j and move it.
				copy(l.acc[j*l.d:(j+1)*l.d], pool[i%len(pool)])
				l.accN[j] = 1
				l.move(j)
				i++
			}
		})
	}
}
