package learners

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestKHASMDTracking checks gain smd's bookkeeping: M = AᵀK_εV, tracked in
// k-space through the steps and rotated with A at each refresh, equals
// AᵀK_εV computed from scratch (kernel evaluations) both right after a
// refresh and between refreshes; the gain factors stay in their bounds;
// MemoryBytes counts the extra arrays. With dictionary kmeans the same
// holds across the rebases (at 50, 100 and 200 observations here), and the
// memorised set has moved off the first B points.
func TestKHASMDTracking(t *testing.T) {
	for _, dict := range []string{"", DictKMeans} {
		t.Run("dictionary_"+dict, func(t *testing.T) { testKHASMDTracking(t, dict) })
	}
}

func testKHASMDTracking(t *testing.T, dict string) {
	cfg := Config{Learner: KindKHA, Dim: 2, Components: 3, Budget: 25, Refresh: 4, Gain: GainSMD, Dictionary: dict,
		Kernel: Kernel{Name: KernelRBF, Gamma: 2}, Seed: 3}
	l, err := NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := len(l.rows.pts) + len(l.rows.norms) + len(l.chol)
	for _, v := range [][]float64{l.invDiag, l.a, l.a2, l.ka, l.ref, l.g, l.g2, l.h, l.h2, l.w, l.c, l.u, l.c2, l.u2, l.kr, l.s, l.v, l.lam, l.lam2, l.y, l.eta, l.zr, l.acc, l.sign, l.refSign, l.pubEig,
		l.rho, l.rho2, l.vt, l.vt2, l.mt, l.mt2, l.dy, l.sm, l.qm, l.zm, l.cent, l.cnt, l.selfK, l.oldPts,
		l.cov, l.rot, l.theta, l.rrWork, l.sumKK} {
		n += cap(v)
	}
	if len(l.rrWork) != 34*l.k {
		t.Errorf("the eigensolver's workspace is %d values, MemoryBytes's documentation says 34k = %d", len(l.rrWork), 34*l.k)
	}
	if got, want := 8*(n+cap(l.perm)+cap(l.refPerm)+cap(l.match)), l.MemoryBytes(); got != want {
		t.Fatalf("arrays hold %d bytes, MemoryBytes says %d", got, want)
	}
	b, k := l.b, l.k
	eps := cfg.Jitter
	if eps == 0 {
		eps = DefaultJitter
	}
	check := func(when string) {
		t.Helper()
		var worst, scale float64
		for i := range k {
			for j := range k {
				var m float64
				for p := range b {
					for q := range b {
						kv := cfg.Kernel.Eval(l.rows.Point(p), l.rows.Point(q))
						if p == q {
							kv += eps * l.meanDiag
						}
						m += l.a[p*k+i] * kv * l.vt[q*k+j]
					}
				}
				worst = math.Max(worst, math.Abs(m-l.mt[i*k+j]))
				scale = math.Max(scale, math.Abs(m))
			}
		}
		if scale == 0 || worst > 1e-8*scale {
			t.Fatalf("%s: tracked M differs from AᵀK_εV by %v (largest entry %v)", when, worst, scale)
		}
		for i, r := range l.rho {
			if !(r >= khaSMDMin && r <= khaSMDMax) {
				t.Fatalf("%s: gain factor %d is %v, outside [%v, %v]", when, i, r, khaSMDMin, khaSMDMax)
			}
		}
	}
	x := make([]float64, 2)
	for i := 0; i < 6*cfg.Budget; i++ {
		x[0], x[1] = math.Cos(float64(i)*0.7), 0.5*math.Sin(float64(i)*0.7)+0.01*float64(i%7)
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
		if i >= cfg.Budget && i%17 == 0 {
			check("step " + string(rune('0'+l.sinceRefresh)))
		}
	}
	for l.sinceRefresh != 0 {
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
	}
	check("after a refresh")
	if dict == DictKMeans {
		// Member i was observation i at the start.
		moved := 0
		for i := range b {
			p := l.rows.Point(i)
			if p[0] != math.Cos(float64(i)*0.7) || p[1] != 0.5*math.Sin(float64(i)*0.7)+0.01*float64(i%7) {
				moved++
			}
		}
		if moved == 0 {
			t.Fatalf("after %d observations every member is still the observation it started as", l.seen)
		}
		t.Logf("%d of %d members moved", moved, b)
		if l.nextRebase <= l.seen || l.nextRebase <= 4*int64(b) || l.rebaseGap < 2*int64(b) || l.rebaseGap > 16*int64(b) {
			t.Fatalf("rebase schedule: next %d (seen %d), gap %d; want after seen, past 4B, gap in [2B, 16B]", l.nextRebase, l.seen, l.rebaseGap)
		}
	}
}

// BenchmarkKHARebase measures one rebase of dictionary kmeans (the cross
// kernel K(D',D), the factor of K'_ε, the projections of A, R and — with
// gain smd — V, and the exact G, H, M) on the learner benchmark grid:
//
//	go test ./learners -run '^$' -bench KHARebase -benchmem
func BenchmarkKHARebase(b *testing.B) {
	for _, c := range []struct{ b, d, k int }{{128, 8, 8}, {512, 64, 16}, {2048, 784, 32}} {
		for _, gain := range []string{"", GainSMD} {
			b.Run(fmt.Sprintf("gain%s/B%d_d%d_k%d", gain, c.b, c.d, c.k), func(b *testing.B) {
				l, err := NewKHA(Config{Learner: KindKHA, Gain: gain, Dictionary: DictKMeans, Dim: c.d, Components: c.k, Budget: c.b,
					Kernel: Kernel{Name: KernelRBF, Gamma: 1 / float64(c.d)}})
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(42, uint64(c.d)))
				x := make([]float64, c.d)
				for range 2*c.b - 1 {
					for j := range x {
						x[j] = rng.NormFloat64()
					}
					if err := l.Learn(x); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					l.rebase()
				}
			})
		}
	}
}

// TestKHARayleighRitz checks gain smd's guard components and Rayleigh–Ritz
// step: the learner learns k + g directions and publishes k; the row
// moment S equals Σₜ k_D(xₜ)k_D(xₜ)ᵀ over every observation (the warm-up
// replay included); right after each step the output covariance of the
// directions over all observations, computed here from kernel evaluations,
// is diagonal with λ̂ on its diagonal in descending order, G is I and H is
// RᵀK_εA; and the published components are directions of the learned span
// with their eigenvalues among λ̂. It fails with the rotation left out
// (the covariance is then not diagonal).
func TestKHARayleighRitz(t *testing.T) {
	cfg := Config{Learner: KindKHA, Dim: 2, Components: 3, Budget: 20, Refresh: 5, Gain: GainSMD,
		Kernel: Kernel{Name: KernelRBF, Gamma: 2}, Seed: 3}
	l, err := NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.k != 5 || l.kp != 3 || l.Components() != 3 {
		t.Fatalf("learned %d, published %d (Components %d), want 5 and 3", l.k, l.kp, l.Components())
	}
	rng := rand.New(rand.NewPCG(4, 4))
	var xs [][]float64
	steps := 0
	for i := range 400 {
		x := []float64{rng.NormFloat64() * 1.5, rng.NormFloat64() * 0.5}
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
		if !l.full || l.sinceSync != 0 || l.sinceRefresh != 0 || i < cfg.Budget {
			continue
		}
		steps++
		b, k := l.b, l.k
		// S from scratch.
		kr := make([][]float64, len(xs))
		for n, x := range xs {
			kr[n] = make([]float64, b)
			for j := range b {
				kr[n][j] = cfg.Kernel.Eval(l.rows.Point(j), x)
			}
		}
		var worst, scale float64
		for p := range b {
			for q := p; q < b; q++ {
				var s float64
				for _, r := range kr {
					s += r[p] * r[q]
				}
				worst = math.Max(worst, math.Abs(s-l.sumKK[p*b+q]))
				scale = math.Max(scale, math.Abs(s))
			}
		}
		if float64(len(xs)) != l.momentN || worst > 1e-10*scale {
			t.Fatalf("after %d observations: S holds %v of them, differs from Σ k kᵀ by %v (largest %v)", len(xs), l.momentN, worst, scale)
		}
		// The output covariance over all observations.
		n := float64(len(xs))
		ys := make([][]float64, len(xs))
		mean := make([]float64, k)
		for m, r := range kr {
			ys[m] = make([]float64, k)
			for i := range k {
				for j := range b {
					ys[m][i] += l.a[j*k+i] * r[j]
				}
				mean[i] += ys[m][i] / n
			}
		}
		for i := range k {
			for c := range k {
				var s float64
				for _, y := range ys {
					s += y[i] * y[c]
				}
				cov := s/n - mean[i]*mean[c]
				want := 0.0
				if i == c {
					want = l.lam[i]
				}
				if math.Abs(cov-want) > 1e-8*l.lam[0] {
					t.Fatalf("step %d: output covariance [%d][%d] = %v, want %v (λ̂ %v)", steps, i, c, cov, want, l.lam)
				}
			}
			if i > 0 && l.lam[i] > l.lam[i-1] {
				t.Fatalf("step %d: λ̂ %v is not descending", steps, l.lam)
			}
		}
		// G = I and H = RᵀK_εA (the refresh's orthonormalisation, then the rotation).
		gram := func(u, v []float64, i, c int) float64 {
			var s float64
			for p := range b {
				for q := range b {
					kv := cfg.Kernel.Eval(l.rows.Point(p), l.rows.Point(q))
					if p == q {
						kv += DefaultJitter * l.meanDiag
					}
					s += u[p*k+i] * kv * v[q*k+c]
				}
			}
			return s
		}
		for i := range k {
			for c := range k {
				want := 0.0
				if i == c {
					want = 1
				}
				if g := gram(l.a, l.a, i, c); math.Abs(g-want) > 1e-8 || l.g[i*k+c] != want {
					t.Fatalf("step %d: G[%d][%d] = %v (tracked %v), want %v", steps, i, c, g, l.g[i*k+c], want)
				}
				if h := gram(l.ref, l.a, i, c); math.Abs(h-l.h[i*k+c]) > 1e-8 {
					t.Fatalf("step %d: H[%d][%d] tracked %v, exact %v", steps, i, c, l.h[i*k+c], h)
				}
			}
		}
	}
	if steps < 3 {
		t.Fatalf("only %d Rayleigh–Ritz steps checked", steps)
	}
	// The published components: Config.Components of them, their
	// eigenvalues those of the components perm names.
	sum := l.Summary(nil)
	if len(sum.Eigenvalues) != 3 {
		t.Fatalf("%d published eigenvalues, want 3", len(sum.Eigenvalues))
	}
	m, err := l.Model()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Eigenvalues) != 3 || len(m.Coefficients[0]) != 3 {
		t.Fatalf("model has %d eigenvalues and %d coefficient columns, want 3", len(m.Eigenvalues), len(m.Coefficients[0]))
	}
}
