package learners

import "testing"

// TestPolyCoef0Default pins the documented decision on coef0 (README,
// "Configuration reference"): it defaults to 0, not to scikit-learn's 1,
// and a learner restored from its state keeps the coef0 it was built with
// (the state carries the config), so no default can change a running key.
func TestPolyCoef0Default(t *testing.T) {
	for _, coef0 := range []float64{0, 1, 0.25} {
		cfg := Config{Learner: KindIKPCA, Dim: 2, Components: 1, Budget: 8, Kernel: Kernel{Name: KernelPoly, Gamma: 0.5, Degree: 2, Coef0: coef0}}
		if got := cfg.WithDefaults().Kernel.Coef0; got != coef0 {
			t.Errorf("coef0 %g after defaults: %g", coef0, got)
		}
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			if err := l.Learn([]float64{float64(i), float64(i * i % 5)}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Restore(l.State())
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.Model()
		if err != nil {
			t.Fatal(err)
		}
		if m.Kernel.Coef0 != coef0 {
			t.Errorf("restored learner's coef0 %g, want %g", m.Kernel.Coef0, coef0)
		}
		if k := m.Kernel.Eval([]float64{1, 0}, []float64{1, 0}); k != (0.5+coef0)*(0.5+coef0) {
			t.Errorf("k(x,x) with coef0 %g: %g", coef0, k)
		}
	}
}
