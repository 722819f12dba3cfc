package learners

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestIKPCAFifoWithoutInverse checks that fifo without a kept inverse
// (each eviction solves for column j of P = (K_DD+εI)⁻¹ from L, two
// triangular solves) learns what it learned with P kept and down- and
// up-dated on every eviction and admission (the path before, still taken
// by lli and contribution; forced here by allocating P), on a stream where
// every message evicts, and that a state written with "P" restores into
// fifo without one.
//
// The two paths compute the same column of the same matrix: with P kept it
// is read from an inverse carried through rank-one updates (re-inverted
// every B changes), without it solved from the factor. On this
// well-conditioned dictionary (rbf γ = 1/d on Gaussian points, κ(K_ε) of
// order 10²) both are accurate to about κ·ε per eviction, so after 1,000
// evictions the outputs agree to about 1e-12 relative; the test allows
// 1e-9, far below any difference a change of algorithm would make
// (a different victim or a dropped term moves them by more than 1e-3).
func TestIKPCAFifoWithoutInverse(t *testing.T) {
	const b, d, k, n = 48, 6, 4, 1200
	cfg := Config{Dim: d, Components: k, Budget: b, Eviction: "fifo", Kernel: Kernel{Name: KernelRBF, Gamma: 1.0 / d}, Seed: 2}
	now, err := NewIKPCA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if now.P != nil {
		t.Fatal("fifo keeps P")
	}
	before, err := NewIKPCA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before.P = make([]float64, b*b) // the path with P kept
	rng := rand.New(rand.NewPCG(7, 1))
	x := make([]float64, d)
	for i := range n {
		for j := range x {
			x[j] = 3 * rng.NormFloat64()
		}
		if err := now.Learn(x); err != nil {
			t.Fatal(err)
		}
		if err := before.Learn(x); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			// A state with "P" (written by the path that keeps it)
			// restores into fifo without one and continues.
			s := before.State()
			if _, ok := s.Matrices["P"]; !ok {
				t.Fatal("the state of the learner with P has no P")
			}
			if err := now.Restore(s); err != nil {
				t.Fatalf("restore of a fifo state with P: %v", err)
			}
		}
	}
	if c := now.State().Ints["clock"]; c < n-b {
		t.Fatalf("%d admissions in %d messages: the stream does not evict on every message", c, n)
	}
	cmp := func(what string, got, want []float64) {
		var diff, scale float64
		for i := range got {
			diff = math.Max(diff, math.Abs(got[i]-want[i]))
			scale = math.Max(scale, math.Abs(want[i]))
		}
		t.Logf("%s: max difference %.2g of scale %.2g", what, diff, scale)
		if !(diff <= 1e-9*scale) {
			t.Errorf("%s differ by %.3g (scale %.3g), want ≤ 1e-9 relative", what, diff, scale)
		}
	}
	ga, gb := now.Summary(nil), before.Summary(nil)
	cmp("eigenvalues", ga.Eigenvalues, gb.Eigenvalues)
	var ya, yb []float64
	for range 50 {
		for j := range x {
			x[j] = 3 * rng.NormFloat64()
		}
		a, err := now.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		bb, err := before.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		ya, yb = append(ya, a...), append(yb, bb...)
	}
	cmp("projections", ya, yb)
}
