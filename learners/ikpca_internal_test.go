package learners

import (
	"reflect"
	"testing"
)

// TestIKPCAMemoryBytes checks the documented formula against the slices the
// learner actually holds, after warm-up and after 10·B observations.
func TestIKPCAMemoryBytes(t *testing.T) {
	for _, cfg := range []Config{
		{Dim: 3, Components: 2, Budget: 16, Kernel: Kernel{Name: KernelRBF, Gamma: 1}},
		{Dim: 7, Components: 5, Budget: 40, Kernel: Kernel{Name: KernelRBF, Gamma: 0.3}, Eviction: "fifo"},
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
