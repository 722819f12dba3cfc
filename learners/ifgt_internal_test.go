package learners

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestIFGTErrorBound: every entry of K̂v is within ε·‖v‖₁ of the exact
// product, for clustered and uniform data at several bandwidths and
// precisions; and the expansion is refused where it does not pay.
func TestIFGTErrorBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, c := range []struct {
		n, d         int
		gamma, eps   float64
		spread       float64
		wantFallback bool
	}{
		{2000, 2, 0.5, 1e-6, 1, false},
		{2000, 3, 0.2, 1e-4, 1, false},
		{2000, 2, 0.05, 1e-8, 1, false},
		{1500, 8, 1.0 / 8, 1e-6, 1, true}, // standard normal in 8-d at γ = 1/d: does not pay
	} {
		x := make([]float64, c.n*c.d)
		for i := range x {
			x[i] = rng.NormFloat64() * c.spread
		}
		g, why := newIFGT(x, c.n, c.d, c.gamma, c.eps)
		if c.wantFallback {
			if g != nil || why == "" {
				t.Errorf("d=%d γ=%v: expansion chosen (%d clusters, %d terms), want a fallback", c.d, c.gamma, g.Clusters, g.MaxTerms)
			}
			continue
		}
		if g == nil {
			t.Fatalf("d=%d γ=%v ε=%v: no expansion: %s", c.d, c.gamma, c.eps, why)
		}
		exact := newBlockedProduct(Kernel{Name: KernelRBF, Gamma: c.gamma}, x, c.n, c.d)
		v := make([]float64, c.n)
		got := make([]float64, c.n)
		want := make([]float64, c.n)
		for trial := range 2 {
			var l1 float64
			for i := range v {
				v[i] = rng.NormFloat64()
				if trial == 1 {
					v[i] = 1 // the column sums used for centring
				}
				l1 += math.Abs(v[i])
			}
			g.apply(got, v)
			exact.apply(want, v)
			var worst float64
			for i := range got {
				worst = math.Max(worst, math.Abs(got[i]-want[i]))
			}
			if !(worst <= c.eps*l1) {
				t.Errorf("d=%d γ=%v ε=%v: max error %.3g > ε‖v‖₁ = %.3g", c.d, c.gamma, c.eps, worst, c.eps*l1)
			}
			t.Logf("d=%d γ=%v ε=%v: %d clusters, ≤ %d terms, max error %.3g (bound %.3g, %.2g of it)", c.d, c.gamma, c.eps, g.Clusters, g.MaxTerms, worst, c.eps*l1, worst/(c.eps*l1))
		}
	}
}

func TestIFGTTruncation(t *testing.T) {
	// Direct check of the remainder bound on a grid: the Taylor remainder
	// of e^(2ab) with p terms, times e^(−a²−b²), never exceeds eps.
	for _, a := range []float64{0.1, 0.5, 1, 2} {
		for _, eps := range []float64{1e-3, 1e-6, 1e-9} {
			bmax := a + math.Sqrt(math.Log(1/eps))
			p := ifgtTruncation(a, bmax, eps)
			if p < 1 {
				t.Fatalf("a=%v eps=%v: no truncation", a, eps)
			}
			for i := 0; i <= 50; i++ {
				ai := a * float64(i%11) / 10
				b := bmax * float64(i) / 50
				z := 2 * ai * b
				var partial, term float64 = 0, 1
				for j := range p {
					if j > 0 {
						term *= z / float64(j)
					}
					partial += term
				}
				rem := (math.Exp(z) - partial) * math.Exp(-ai*ai-b*b)
				if rem > eps*(1+1e-9) {
					t.Errorf("a=%v b=%v p=%d: remainder %.3g > eps %.1g", ai, b, p, rem, eps)
				}
			}
		}
	}
}

// BenchmarkIFGTPlan reports, for standard-normal rows, whether the rbf
// expansion pays and its estimated cost as a fraction of the exact
// product's (the rule SolverFast uses; "ratio" 0 when it does not pay).
// go test ./learners -run X -bench IFGTPlan -benchtime 1x
func BenchmarkIFGTPlan(b *testing.B) {
	for _, n := range []int{15000, 200000} {
		for _, d := range []int{2, 3, 5, 8} {
			if n > 15000 && d < 5 {
				continue
			}
			rng := rand.New(rand.NewPCG(1, uint64(d)))
			x := make([]float64, n*d)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			gammas := []float64{0.01, 0.05, 0.2}
			if d != 5 {
				gammas = append(gammas, 1/float64(d)) // the default γ = 1/d
			}
			for _, gamma := range gammas {
				for _, eps := range []float64{1e-3, 1e-4, 1e-6} {
					b.Run(fmt.Sprintf("n=%d/d=%d/gamma=%.3g/eps=%.0e", n, d, gamma, eps), func(b *testing.B) {
						var g *ifgtProduct
						for b.Loop() {
							g, _ = newIFGT(x, n, d, gamma, eps)
						}
						pays, ratio, terms := 0.0, 0.0, 0.0
						if g != nil {
							pays, ratio, terms = 1, g.Cost/g.ExactCost, float64(g.MaxTerms)
						}
						b.ReportMetric(pays, "pays")
						b.ReportMetric(ratio, "ratio")
						b.ReportMetric(terms, "terms")
					})
				}
			}
		}
	}
}
