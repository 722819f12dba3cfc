package learners

import (
	"math"
	"reflect"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// TestIKPCAMemoryBytes checks the documented formula against the slices the
// learner actually holds, after warm-up and after 10·B observations.
func TestIKPCAMemoryBytes(t *testing.T) {
	for _, cfg := range []Config{
		{Dim: 3, Components: 2, Budget: 16, Kernel: Kernel{Name: KernelRBF, Gamma: 1}},
		{Dim: 7, Components: 5, Budget: 40, Kernel: Kernel{Name: KernelRBF, Gamma: 0.3}, Eviction: "fifo"},
		{Dim: 5, Components: 3, Budget: 20, Kernel: Kernel{Name: KernelRBF, Gamma: 0.3}, Eviction: "lli"},
	} {
		l, err := NewIKPCA(cfg)
		if err != nil {
			t.Fatal(err)
		}
		held := func() int {
			n := 8 * (len(l.rows.pts) + len(l.rows.norms))
			v := reflect.ValueOf(l).Elem()
			for i := range v.NumField() {
				if f := v.Field(i); f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Float64 {
					n += 8 * f.Cap()
				}
			}
			return n
		}
		x := make([]float64, cfg.Dim)
		for i := range 10 * cfg.Budget {
			for j := range x {
				x[j] = float64((i*7+j*3)%11) / 5
			}
			if err := l.Learn(x); err != nil {
				t.Fatal(err)
			}
			if i == cfg.Budget || i == 10*cfg.Budget-1 {
				if got, want := held(), l.MemoryBytes(); got != want {
					t.Fatalf("%+v after %d: holds %d bytes, MemoryBytes %d", cfg, i+1, got, want)
				}
			}
		}
	}
}

// TestIKPCACachedProducts checks the quantities ikpca keeps up to date
// incrementally (S·U, A = L⁻ᵀU_k, a = L⁻ᵀμ, P = (LLᵀ)⁻¹) against direct
// recomputation, through admissions, evictions (every policy) and forgetting.
func TestIKPCACachedProducts(t *testing.T) {
	for _, ev := range []string{"lli", "fifo", "contribution", EvictCentroid} {
		cfg := Config{Dim: 4, Components: 3, Budget: 24, Kernel: Kernel{Name: KernelRBF, Gamma: 2}, Eviction: ev, Forget: 0.995}
		l, err := NewIKPCA(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, cfg.Dim)
		rng := uint64(7)
		for i := range 600 {
			for j := range x {
				rng = rng*6364136223846793005 + 1442695040888963407
				x[j] = float64(rng>>11)/(1<<53)*2 - 1
			}
			if err := l.Learn(x); err != nil {
				t.Fatal(err)
			}
			if i%97 != 96 {
				continue
			}
			m, b, p, k := l.rows.Len(), l.b, l.p, l.k
			var worst float64
			cmp := func(what string, got, want, scale float64) {
				if d := math.Abs(got-want) / math.Max(scale, 1e-300); d > worst {
					worst = d
				}
				if d := math.Abs(got - want); d > 1e-8*math.Max(scale, 1) {
					t.Fatalf("%s after %d: %s = %g, recomputed %g", ev, i+1, what, got, want)
				}
			}
			l.flush()
			l.mirror()
			var smax float64
			for _, v := range l.S[:m*b] {
				smax = math.Max(smax, math.Abs(v))
			}
			for r := range m {
				for c := range p {
					var v float64
					for q := range m {
						v += l.S[r*b+q] * l.U[q*p+c]
					}
					cmp("S·U", l.SU[r*p+c], v, smax)
				}
			}
			// Lᵀ·A = U_k and Lᵀ·a = μ_ref hold between refreshes too: A is
			// projected on evictions, a recomputed.
			for r := range m {
				for c := range k {
					var v float64
					for q := r; q < m; q++ {
						v += l.L[q*b+r] * l.A[q*k+c]
					}
					cmp("LᵀA", v, l.U[r*p+c], 1)
				}
				var v float64
				for q := r; q < m; q++ {
					v += l.L[q*b+r] * l.a[q]
				}
				cmp("Lᵀa", v, l.muRef[r], 1)
			}
			// c = U_kᵀμ_ref and ‖μ_ref‖², updated in place on evictions.
			var mm float64
			for r := range m {
				mm += l.muRef[r] * l.muRef[r]
			}
			cmp("‖μ_ref‖²", l.mmRef, mm, 1)
			for c := range k {
				var v float64
				for r := range m {
					v += l.U[r*p+c] * l.muRef[r]
				}
				cmp("U_kᵀμ_ref", l.c[c], v, 1)
			}
			// P·(LLᵀ) = I; without a kept P (centroid), for the columns
			// colP solves for.
			P := l.P
			if P == nil {
				P = make([]float64, b*b)
				col := make([]float64, m)
				for j := range m {
					l.colP(j, col)
					for r := range m {
						P[r*b+j] = col[r]
					}
				}
			}
			for r := range m {
				for c := range m {
					var v float64
					for q := range m {
						var kk float64
						for s := 0; s <= min(q, c); s++ {
							kk += l.L[q*b+s] * l.L[c*b+s]
						}
						v += P[r*b+q] * kk
					}
					want := 0.0
					if r == c {
						want = 1
					}
					cmp("P·LLᵀ", v, want, 1)
				}
			}
		}
	}
}

// TestSerialDgemm checks the blocked product against a plain triple loop for
// every transpose combination, with more rows and columns than one block (a transposed a with more than
// 64 rows once panicked).
func TestSerialDgemm(t *testing.T) {
	const m, n, kk = 70, 200, 5
	val := func(i, j int) float64 { return math.Sin(float64(3*i+7*j) + 0.5) }
	for _, ta := range []blas.Transpose{blas.NoTrans, blas.Trans} {
		for _, tb := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			// op(A) is m×kk, op(B) is kk×n; storage follows the transpose flags.
			var a, b []float64
			lda, ldb := kk, n
			if ta == blas.Trans {
				lda = m
			}
			if tb == blas.Trans {
				ldb = kk
			}
			a = make([]float64, m*kk)
			b = make([]float64, kk*n)
			for i := range m {
				for l := range kk {
					if ta == blas.Trans {
						a[l*lda+i] = val(i, l)
					} else {
						a[i*lda+l] = val(i, l)
					}
				}
			}
			for l := range kk {
				for j := range n {
					if tb == blas.Trans {
						b[j*ldb+l] = val(l+100, j)
					} else {
						b[l*ldb+j] = val(l+100, j)
					}
				}
			}
			c := make([]float64, m*n)
			serialDgemm(ta, tb, m, n, kk, 1, a, lda, b, ldb, 0, c, n)
			for i := range m {
				for j := range n {
					var want float64
					for l := range kk {
						want += val(i, l) * val(l+100, j)
					}
					if math.Abs(c[i*n+j]-want) > 1e-12 {
						t.Fatalf("ta=%c tb=%c: c[%d,%d] = %v, want %v", ta, tb, i, j, c[i*n+j], want)
					}
				}
			}
		}
	}
}

// TestIKPCACentroidMovesKeepStatistics checks the centroid policy's moves
// against exact statistics: with the linear kernel and B = d, the members
// span all of ℝᵈ, so after any number of moves (each an eviction whose
// dropped coordinate is projected on the moved member's direction) the
// mean and scatter held in coordinates must still be the sample mean and
// scatter of every observation, mapped back through v = Dᵀ L⁻ᵀ z.
func TestIKPCACentroidMovesKeepStatistics(t *testing.T) {
	const d, n = 3, 400
	l, err := NewIKPCA(Config{Dim: d, Components: 2, Budget: d, Kernel: Kernel{Name: KernelLinear}, Eviction: EvictCentroid})
	if err != nil {
		t.Fatal(err)
	}
	rng := uint64(11)
	next := func() float64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return float64(rng>>11)/(1<<53)*2 - 1
	}
	var mean [d]float64
	var scat [d][d]float64
	x := make([]float64, d)
	for i := range n {
		for j := range x {
			x[j] = next() + float64(j)
		}
		// Welford: mean and scatter of the observations so far.
		var dx [d]float64
		for j := range x {
			dx[j] = x[j] - mean[j]
			mean[j] += dx[j] / float64(i+1)
		}
		for a := range d {
			for b := range d {
				scat[a][b] += dx[a] * (x[b] - mean[b])
			}
		}
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
	}
	if l.moveRate == 0 || l.rows.Len() != d {
		t.Fatalf("no moves (rate %v) or dictionary of %d, want moves and %d members", l.moveRate, l.rows.Len(), d)
	}
	l.flush()
	l.mirror()
	m, b := l.rows.Len(), l.b
	// M = Dᵀ L⁻ᵀ (d×m): column i maps coordinate i to ℝᵈ.
	M := make([]float64, d*m)
	col := make([]float64, m)
	for i := range m {
		clear(col)
		col[i] = 1
		trsvLowerT(m, l.L, b, col)
		for r := range m {
			pt := l.rows.Point(r)
			for a := range d {
				M[a*m+i] += pt[a] * col[r]
			}
		}
	}
	for a := range d {
		var v float64
		for i := range m {
			v += M[a*m+i] * l.mu[i]
		}
		if math.Abs(v-mean[a]) > 1e-9 {
			t.Errorf("mean[%d] = %.12g, sample mean %.12g", a, v, mean[a])
		}
		for c := range d {
			var v float64
			for i := range m {
				for j := range m {
					v += M[a*m+i] * l.sc * l.S[i*b+j] * M[c*m+j]
				}
			}
			if math.Abs(v-scat[a][c]) > 1e-8*float64(n) {
				t.Errorf("scatter[%d][%d] = %.12g, sample scatter %.12g", a, c, v, scat[a][c])
			}
		}
	}
	if tr := scat[0][0] + scat[1][1] + scat[2][2]; math.Abs(l.dropped) > 1e-8*tr {
		t.Errorf("dropped mass %g, want 0 up to rounding of the scatter's trace %g (the span is all of ℝᵈ)", l.dropped, tr)
	}
}
