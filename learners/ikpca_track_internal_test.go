package learners

import (
	"math"
	"math/rand/v2"
	"testing"
)

// vecTracker re-expresses one weight vector w over the coordinates as a
// CoordTracker must: f(x) = wᵀz(x).
type vecTracker struct {
	w    []float64
	drop float64
}

func (v *vecTracker) Rotate(i int, c, s float64) { rotate(v.w, i, i+1, c, s) }
func (v *vecTracker) Drop(last int)              { v.drop, v.w[last] = v.w[last], 0 }
func (v *vecTracker) Append(m int, carried float64) {
	v.w[m] = carried * v.drop
	v.drop = 0
}

// Replacing a member by itself (a centroid move that found nothing to
// absorb) rotates every coordinate after it, drops the member's direction
// and appends it again with a carry of ±1: the span is the same, so a
// tracked linear function of the coordinates must be unchanged for every
// x, not only on the span, to 1e-9.
func TestTrackedSwapKeepsFunction(t *testing.T) {
	l, err := NewIKPCA(Config{Dim: 3, Components: 2, Budget: 10, Kernel: Kernel{Name: KernelRBF, Gamma: 0.5}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		if err := l.Learn([]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}); err != nil {
			t.Fatal(err)
		}
	}
	m := l.Stored()
	tr := &vecTracker{w: make([]float64, l.b)}
	for i := range m {
		tr.w[i] = rng.NormFloat64()
	}
	probes := make([][]float64, 50)
	before := make([]float64, len(probes))
	z := make([]float64, l.b)
	f := func(x []float64) float64 {
		zz, err := l.Coords(z, x)
		if err != nil {
			t.Fatal(err)
		}
		return dot(zz, tr.w[:len(zz)])
	}
	for i := range probes {
		probes[i] = []float64{2 * rng.NormFloat64(), 2 * rng.NormFloat64(), 2 * rng.NormFloat64()}
		before[i] = f(probes[i])
	}
	for _, j := range []int{0, m / 2, m - 1} {
		// member j "moves" to where it is: nothing absorbed
		clear(l.acc[j*l.d : (j+1)*l.d])
		l.accN[j] = 0
		l.tr = tr
		moved := l.move(j)
		l.tr = nil
		if !moved {
			t.Fatalf("member %d did not move", j)
		}
		if l.Stored() != m {
			t.Fatalf("dictionary has %d members after the swap, want %d", l.Stored(), m)
		}
		for i, x := range probes {
			if got := f(x); math.Abs(got-before[i]) > 1e-9*max(1, math.Abs(before[i])) {
				t.Fatalf("swap of member %d: f(probe %d) = %v, was %v", j, i, got, before[i])
			}
		}
	}
}
