package learners

import (
	"math"
	"testing"
)

// TestKHAInternals checks MemoryBytes against the arrays actually held, that
// they do not grow over 10·B observations, that M tracks K_ε A and that the
// directions are orthonormal in the RKHS right after a refresh.
func TestKHAInternals(t *testing.T) {
	cfg := Config{Learner: KindKHA, Dim: 2, Components: 3, Budget: 25, Refresh: 4, Kernel: Kernel{Name: KernelRBF, Gamma: 2}, Seed: 3}
	l, err := NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	held := func() int {
		n := len(l.rows.pts) + len(l.rows.norms) + len(l.chol) + len(l.g)
		for _, v := range [][]float64{l.invDiag, l.a, l.m, l.a2, l.m2, l.ref, l.c, l.u, l.c2, l.u2, l.kr, l.s, l.v, l.lam, l.lam2, l.y, l.eta, l.sign, l.refSign, l.pubEig} {
			n += cap(v)
		}
		return 8 * (n + cap(l.perm) + cap(l.refPerm))
	}
	if got, want := held(), l.MemoryBytes(); got != want {
		t.Fatalf("arrays hold %d bytes, MemoryBytes says %d", got, want)
	}
	x := make([]float64, 2)
	for i := 0; i < 10*cfg.Budget || l.sinceRefresh != 0; i++ {
		x[0], x[1] = math.Cos(float64(i)*0.7), 0.5*math.Sin(float64(i)*0.7)+0.01*float64(i%7)
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := held(), l.MemoryBytes(); got != want {
		t.Fatalf("after 10·B observations arrays hold %d bytes, want %d", got, want)
	}
	exact := make([]float64, len(l.m))
	l.exactM(exact, l.a)
	b, k := l.b, l.k
	for i := range exact {
		if math.Abs(exact[i]-l.m[i]) > 1e-9*(1+math.Abs(exact[i])) {
			t.Fatalf("M[%d] = %v, K_ε A = %v", i, l.m[i], exact[i])
		}
	}
	// G = Aᵀ K_DD A from kernel evaluations.
	for i := range k {
		for j := range k {
			var g float64
			for p := range b {
				for q := range b {
					g += l.a[p*k+i] * cfg.Kernel.Eval(l.rows.Point(p), l.rows.Point(q)) * l.a[q*k+j]
				}
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(g-want) > 1e-6 {
				t.Fatalf("G[%d][%d] = %v, want %v", i, j, g, want)
			}
		}
	}
}
