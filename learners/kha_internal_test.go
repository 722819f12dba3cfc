package learners

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// TestKHAInternals checks MemoryBytes against the arrays actually held, that
// they do not grow over 10·B observations, that the directions are
// orthonormal in the RKHS right after a refresh, and that G and H, tracked
// in k-space, equal AᵀK_εA and RᵀK_εA computed from scratch between
// refreshes.
func TestKHAInternals(t *testing.T) {
	cfg := Config{Learner: KindKHA, Dim: 2, Components: 3, Budget: 25, Refresh: 4, Kernel: Kernel{Name: KernelRBF, Gamma: 2}, Seed: 3}
	l, err := NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	held := func() int {
		n := len(l.rows.pts) + len(l.rows.norms) + len(l.chol)
		for _, v := range [][]float64{l.invDiag, l.a, l.a2, l.ka, l.ref, l.g, l.g2, l.h, l.h2, l.w, l.c, l.u, l.c2, l.u2, l.kr, l.s, l.v, l.lam, l.lam2, l.y, l.eta, l.zr, l.acc, l.sign, l.refSign, l.pubEig} {
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
	b, k := l.b, l.k
	for i := range k {
		for j := range k {
			if want := float64(min(1, max(0, 1-abs(i-j)))); l.g[i*k+j] != want {
				t.Fatalf("after a refresh tracked G[%d][%d] = %v, want %v", i, j, l.g[i*k+j], want)
			}
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
	// Between refreshes (and across a version change) the tracked G and H
	// follow the exact ones.
	gx, hx := make([]float64, k*k), make([]float64, k*k)
	for n := 1; n <= 3*cfg.Refresh; n++ {
		x[0], x[1] = math.Cos(float64(n)*1.3), 0.5*math.Sin(float64(n)*1.3)
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
		l.exactGram(gx, hx, l.a)
		for i := range gx {
			if math.Abs(gx[i]-l.g[i]) > 1e-9 || math.Abs(hx[i]-l.h[i]) > 1e-9 {
				t.Fatalf("%d steps after a refresh (since_refresh %d): tracked G %v H %v, exact G %v H %v", n, l.sinceRefresh, l.g, l.h, gx, hx)
			}
		}
	}
}

func abs(i int) int { return max(i, -i) }

// TestKHASolve checks the blocked solve against gonum's Dtrsv pair on a
// well-conditioned and on a nearly singular kernel matrix (points on a
// curve, K_ε conditioned by the jitter alone, κ ≈ 10¹⁰): the residual
// ‖K_ε s − r‖ of the blocked solve must be as small as Dtrsv's: within a
// factor of 10, plus 10·u·‖K_ε‖·‖s‖ (u the unit roundoff, ‖K_ε‖ ≤ B·mean
// diagonal), the size of the residual of a backward-stable solve.
func TestKHASolve(t *testing.T) {
	for _, c := range []struct {
		name  string
		b, d  int
		gamma float64
		curve bool
	}{
		{"isotropic", 100, 8, 0.125, false},
		{"curve", 100, 2, 1, true},
		{"small", 5, 2, 1, true},
		{"odd", 77, 3, 0.5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Learner: KindKHA, Dim: c.d, Components: 2, Budget: c.b, Kernel: Kernel{Name: KernelRBF, Gamma: c.gamma}}
			l, err := NewKHA(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, uint64(c.b)))
			x := make([]float64, c.d)
			for i := range c.b {
				for j := range x {
					x[j] = rng.NormFloat64()
				}
				if c.curve {
					th := 2 * math.Pi * float64(i) / float64(c.b)
					x[0], x[1] = math.Cos(th), 0.5*math.Sin(th)
				}
				l.rows.Append(x)
			}
			if err := l.factor(); err != nil {
				t.Fatal(err)
			}
			b := c.b
			kk := make([]float64, b*b) // K_ε
			eps := l.cfg.Jitter * l.meanDiag
			for i := range b {
				l.rows.Row(kk[i*b:(i+1)*b], l.rows.Point(i), l.rows.norms[i])
				kk[i*b+i] += eps
			}
			bl := blas64.Implementation()
			residual := func(s, r []float64) float64 {
				res := slices.Clone(r)
				bl.Dgemv(blas.NoTrans, b, b, 1, kk, b, s, 1, -1, res, 1)
				return bl.Dnrm2(b, res, 1)
			}
			for trial := range 5 {
				r := make([]float64, b)
				for j := range x {
					x[j] = rng.NormFloat64()
				}
				l.rows.Row(r, x, norm2(x))
				if trial == 4 {
					for j := range r {
						r[j] = rng.NormFloat64()
					}
				}
				got := slices.Clone(r)
				l.solve(got)
				want := slices.Clone(r)
				bl.Dtrsv(blas.Lower, blas.NoTrans, blas.NonUnit, b, l.chol, b, want, 1)
				bl.Dtrsv(blas.Lower, blas.Trans, blas.NonUnit, b, l.chol, b, want, 1)
				rg, rw := residual(got, r), residual(want, r)
				tol := 10*rw + 10*0x1p-53*float64(b)*l.meanDiag*bl.Dnrm2(b, want, 1)
				t.Logf("trial %d: ‖s‖ = %.3g, residual blocked %.3g, Dtrsv %.3g", trial, bl.Dnrm2(b, want, 1), rg, rw)
				if !(rg <= tol) {
					t.Errorf("trial %d: residual %.3g of the blocked solve, Dtrsv %.3g (tolerance %.3g)", trial, rg, rw, tol)
				}
			}
		})
	}
}

// TestKHARestoreLegacy restores a state in the earlier format (K_εA as
// "gram_coef" instead of "gram" and "ref_gram") and checks that G and H are
// recomputed from it and that the learner then goes on as the original.
func TestKHARestoreLegacy(t *testing.T) {
	cfg := Config{Learner: KindKHA, Dim: 2, Components: 3, Budget: 25, Refresh: 4, Kernel: Kernel{Name: KernelRBF, Gamma: 2}, Seed: 3}
	l, err := NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 2)
	feed := func(l *KHA, from, n int) {
		for i := from; i < from+n; i++ {
			x[0], x[1] = math.Cos(float64(i)*0.7), 0.5*math.Sin(float64(i)*0.7)+0.01*float64(i%7)
			if err := l.Learn(x); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(l, 0, 3*cfg.Budget+2) // between refreshes
	if l.sinceRefresh == 0 || l.version < 2 {
		t.Fatalf("since_refresh %d, version %d: want a state between refreshes after a version change", l.sinceRefresh, l.version)
	}
	st := l.State()
	g, h := make([]float64, 9), make([]float64, 9)
	l.exactGram(g, h, l.a) // leaves K_εA in l.ka
	delete(st.Matrices, "gram")
	delete(st.Matrices, "ref_gram")
	st.Matrices["gram_coef"] = Matrix{Rows: 25, Cols: 3, Data: slices.Clone(l.ka)}
	r, err := NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(st); err != nil {
		t.Fatalf("Restore of a legacy state: %v", err)
	}
	for i := range g {
		if math.Abs(r.g[i]-l.g[i]) > 1e-9 || math.Abs(r.h[i]-l.h[i]) > 1e-9 {
			t.Fatalf("restored G %v H %v, original G %v H %v", r.g, r.h, l.g, l.h)
		}
	}
	feed(l, 1000, 30)
	feed(r, 1000, 30)
	dl, dr := make([]float64, 3), make([]float64, 3)
	if _, err := l.Transform(dl, x); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transform(dr, x); err != nil {
		t.Fatal(err)
	}
	for i := range dl {
		if math.Abs(dl[i]-dr[i]) > 1e-8 {
			t.Fatalf("after 30 more observations: original %v, restored from the legacy state %v", dl, dr)
		}
	}
	// A state without G and without the legacy matrix is rejected, and
	// so is an asymmetric G.
	delete(st.Matrices, "gram_coef")
	if err := r.Restore(st); err == nil {
		t.Fatal("Restore accepted a state without gram")
	}
	st = l.State()
	st.Matrices["gram"].Data[1] += 1e-3
	if err := r.Restore(st); err == nil || !errors.Is(err, ErrState) {
		t.Fatalf("Restore of an asymmetric gram: %v, want ErrState", err)
	}
}
