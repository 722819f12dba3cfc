package learners

import (
	"math"
	"testing"
)

// TestIKPCADeferredFold checks that folding the scatter's rank-one terms in
// blocks of r gives the learner that folds every row at once (r = 1), up to
// rounding: the same dictionary, the same counters and a published basis
// with subspace similarity ≥ 1 − 1e-9, on synth64 and with forgetting and
// each eviction policy on a stream that keeps admitting.
func TestIKPCADeferredFold(t *testing.T) {
	const d = 64
	x := synth64(5, 3000)
	for _, cfg := range []Config{
		{Dim: d, Components: 8, Budget: 128, Kernel: Kernel{Name: KernelRBF, Gamma: 1.0 / d}},
		{Dim: d, Components: 4, Budget: 24, Kernel: Kernel{Name: KernelRBF, Gamma: 4.0 / d}, Forget: 0.995},
		{Dim: d, Components: 4, Budget: 24, Kernel: Kernel{Name: KernelRBF, Gamma: 4.0 / d}, Eviction: "fifo"},
		{Dim: d, Components: 4, Budget: 24, Kernel: Kernel{Name: KernelRBF, Gamma: 4.0 / d}, Eviction: "contribution"},
	} {
		block, err := NewIKPCA(cfg)
		if err != nil {
			t.Fatal(err)
		}
		single, _ := NewIKPCA(cfg)
		single.r = 1 // fold each row as it comes
		if block.r < 2 {
			t.Fatalf("block size %d: nothing is deferred", block.r)
		}
		deferred := 0
		for i := range 3000 {
			xi := x[i*d : (i+1)*d]
			if err := block.Learn(xi); err != nil {
				t.Fatal(err)
			}
			if err := single.Learn(xi); err != nil {
				t.Fatal(err)
			}
			if single.np != 0 {
				t.Fatalf("r = 1 learner has %d pending rows", single.np)
			}
			if block.np > 0 {
				deferred++
			}
		}
		if deferred == 0 {
			t.Fatalf("%+v: no row was ever pending", cfg)
		}
		m, k, p := block.rows.Len(), block.k, block.p
		if m != single.rows.Len() || block.ver != single.ver || block.clock != single.clock || block.ready != single.ready {
			t.Fatalf("%+v: m %d/%d version %d/%d admissions %d/%d ready %v/%v", cfg, m, single.rows.Len(),
				block.ver, single.ver, block.clock, single.clock, block.ready, single.ready)
		}
		for i, v := range block.rows.Data() {
			if v != single.rows.Data()[i] {
				t.Fatalf("%+v: dictionaries differ at %d", cfg, i)
			}
		}
		// U_k is orthonormal at a refresh only (evictions drop a row of
		// it): compare the spans of orthonormalised copies.
		q1, q2 := orthoCols(block.U, m, p, k), orthoCols(single.U, m, p, k)
		var sim float64
		for a := range k {
			for c := range k {
				var s float64
				for i := range m {
					s += q1[i*k+a] * q2[i*k+c]
				}
				sim += s * s
			}
		}
		sim /= float64(k)
		var dth float64
		for c := range k {
			dth = math.Max(dth, math.Abs(block.th[c]-single.th[c])/single.th[0])
		}
		t.Logf("%s B=%d forget=%v: m=%d pending at %d of 3000 rows, similarity 1−%.1e, max rel Ritz diff %.1e",
			block.cfg.Eviction, cfg.Budget, cfg.Forget, m, deferred, 1-sim, dth)
		if !(sim >= 1-1e-9) || !(dth <= 1e-9) {
			t.Errorf("%+v: similarity %v, Ritz values differ by %v", cfg, sim, dth)
		}
	}
}

// orthoCols returns the first k columns of the m×p matrix u (stride p),
// orthonormalised by modified Gram–Schmidt, as an m×k matrix.
func orthoCols(u []float64, m, p, k int) []float64 {
	q := make([]float64, m*k)
	for i := range m {
		copy(q[i*k:(i+1)*k], u[i*p:i*p+k])
	}
	for c := range k {
		for o := range c {
			var s float64
			for i := range m {
				s += q[i*k+c] * q[i*k+o]
			}
			for i := range m {
				q[i*k+c] -= s * q[i*k+o]
			}
		}
		var n float64
		for i := range m {
			n += q[i*k+c] * q[i*k+c]
		}
		n = math.Sqrt(n)
		for i := range m {
			q[i*k+c] /= n
		}
	}
	return q
}
