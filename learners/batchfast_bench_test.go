package learners_test

import (
	"fmt"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// BenchmarkFitBatchFast: batch fits by solver and product, allocations
// reported. go test ./learners -run X -bench FitBatchFast -benchtime 1x
func BenchmarkFitBatchFast(b *testing.B) {
	poly := learners.Kernel{Name: learners.KernelPoly, Coef0: 1, Degree: 3}
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}
	for _, c := range []struct {
		name   string
		kern   learners.Kernel
		n, d   int
		solver string
	}{
		{"poly_d5_p3/fast", poly, 20000, 5, learners.SolverFast},
		{"poly_d5_p3/fast", poly, 200000, 5, learners.SolverFast},
		{"poly_d5_p3/lanczos_gram", poly, 4000, 5, learners.SolverLanczos},
		{"poly_d5_p3/fast", poly, 4000, 5, learners.SolverFast},
		{"rbf_d2_g0.5/lanczos_gram", rbf, 4000, 2, learners.SolverLanczos},
		{"rbf_d2_g0.5/fast", rbf, 4000, 2, learners.SolverFast},
		{"rbf_d2_g0.5/fast", rbf, 20000, 2, learners.SolverFast},
	} {
		x := gaussRows(c.n, c.d, 1)
		b.Run(fmt.Sprintf("%s/n=%d", c.name, c.n), func(b *testing.B) {
			b.ReportAllocs()
			var f *learners.BatchFit
			for b.Loop() {
				var err error
				if f, err = learners.FitBatchWith(c.kern, x, c.n, c.d, 2, learners.BatchOptions{Solver: c.solver, Seed: 1}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(f.Products), "products")
			b.ReportMetric(float64(c.n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkFitBatchFallback: where the fast rbf expansion does not pay
// (d 64 and 784 at the default γ = 1/d), fast against auto on the same rows
// (issue 32 item 3: fast ≤ 1.1× auto). go test ./learners -run X -bench
// FitBatchFallback -benchtime 1x
func BenchmarkFitBatchFallback(b *testing.B) {
	rbf := learners.Kernel{Name: learners.KernelRBF}
	for _, c := range []struct{ n, d int }{{1797, 64}, {4000, 784}} {
		x := gaussRows(c.n, c.d, 1)
		for _, solver := range []string{learners.SolverAuto, learners.SolverFast} {
			name := solver
			if name == "" {
				name = "auto"
			}
			b.Run(fmt.Sprintf("n=%d/d=%d/%s", c.n, c.d, name), func(b *testing.B) {
				b.ReportAllocs()
				var f *learners.BatchFit
				for b.Loop() {
					var err error
					if f, err = learners.FitBatchWith(rbf, x, c.n, c.d, 8, learners.BatchOptions{Solver: solver, Seed: 1}); err != nil {
						b.Fatal(err)
					}
				}
				if f.Product != learners.ProductGram {
					b.Fatalf("%s: product %q (%s), want the stored Gram", name, f.Product, f.Note)
				}
			})
		}
	}
}

// BenchmarkBatchTransformPoly: one projection of a poly fit, through the
// explicit features (n = 20,000 > the feature threshold) and through
// kernel rows (n = 200).
func BenchmarkBatchTransformPoly(b *testing.B) {
	poly := learners.Kernel{Name: learners.KernelPoly, Coef0: 1, Degree: 3}
	for _, n := range []int{200, 20000} {
		x := gaussRows(n, 5, 2)
		f, err := learners.FitBatchWith(poly, x, n, 5, 2, learners.BatchOptions{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]float64, 2)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f.Transform(dst, x[:5])
			}
		})
	}
}
