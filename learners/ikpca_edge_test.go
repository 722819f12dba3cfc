package learners_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// TestIKPCACentroidEdgeCases runs the centroid policy on budgets of 1 to 5
// points, on every kernel (sigmoid is not positive definite) and on
// strong forgetting, with a stream whose scale changes: Learn never fails,
// the state always restores, and the budget-fit fractions stay in [0, 1].
func TestIKPCACentroidEdgeCases(t *testing.T) {
	for _, cfg := range []learners.Config{
		{Dim: 1, Components: 1, Budget: 1, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}},
		{Dim: 2, Components: 1, Budget: 2, Kernel: learners.Kernel{Name: learners.KernelLinear}},
		{Dim: 3, Components: 2, Budget: 5, Kernel: learners.Kernel{Name: learners.KernelSigmoid, Gamma: 0.5, Coef0: -1}},
		{Dim: 3, Components: 2, Budget: 5, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Forget: 0.5},
		{Dim: 3, Components: 2, Budget: 5, Kernel: learners.Kernel{Name: learners.KernelLaplacian, Gamma: 1}, Forget: 0.999},
	} {
		l, err := learners.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		x := make([]float64, cfg.Dim)
		for i := range 5000 {
			for j := range x {
				x[j] = rng.NormFloat64() * float64(1+i%3)
			}
			if err := l.Learn(x); err != nil { // x's scale cycles through 1, 2, 3
				t.Fatalf("%+v step %d: %v", cfg, i, err)
			}
		}
		if _, err := learners.Restore(l.State()); err != nil {
			t.Fatalf("%+v: Restore: %v", cfg, err)
		}
		sum := l.Summary(nil)
		if !(sum.DroppedMass >= 0 && sum.DroppedMass <= 1) || !(sum.OutsideSpan >= 0 && sum.OutsideSpan <= 1) || sum.BudgetAdvice == "" {
			t.Errorf("%+v: dropped %v outside %v advice %q; want fractions in [0, 1] and an advice", cfg, sum.DroppedMass, sum.OutsideSpan, sum.BudgetAdvice)
		}
	}
}
