package learners

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

// TestWindowRestoreGramBitIdentical checks that Restore rebuilds the Gram
// matrix bit for bit as Learn built it (rows by Rows.Row, against the
// window as it was when each point arrived), while the window fills, just
// after it fills and after it has wrapped around, for every kernel and
// for dimensions that do and do not fill gonum's 4-wide blocks; and that
// a restored learner then stays identical to the uninterrupted one.
func TestWindowRestoreGramBitIdentical(t *testing.T) {
	kernels := []Kernel{
		{Name: KernelRBF, Gamma: 0.5},
		{Name: KernelPoly, Gamma: 0.3, Coef0: 1, Degree: 3},
		{Name: KernelLinear},
		{Name: KernelLaplacian, Gamma: 0.4},
	}
	for _, kern := range kernels {
		for _, d := range []int{3, 8, 13} {
			for _, W := range []int{9, 38} {
				for _, seen := range []int{W - 2, W, W + 3, 2*W + 5} {
					name := fmt.Sprintf("%s/d%d/W%d/seen%d", kern.Name, d, W, seen)
					cfg := windowConfig(d, 3, W, 5)
					cfg.Kernel = kern
					x := windowStream(seen+W, d, uint64(7*d+W))
					l, err := NewWindow(cfg)
					if err != nil {
						t.Fatal(err)
					}
					for i := range seen {
						if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
							t.Fatalf("%s: Learn %d: %v", name, i, err)
						}
					}
					r, err := NewWindow(cfg)
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Restore(l.State()); err != nil {
						t.Fatalf("%s: Restore: %v", name, err)
					}
					m := l.ring.Len()
					for i := range m {
						for j := range m {
							a, b := l.gram[i*W+j], r.gram[i*W+j]
							if math.Float64bits(a) != math.Float64bits(b) {
								t.Fatalf("%s: restored Gram[%d][%d] = %v, Learn built %v", name, i, j, b, a)
							}
						}
					}
					for i := seen; i < seen+W; i++ {
						xi := x[i*d : (i+1)*d]
						if err := l.Learn(xi); err != nil {
							t.Fatalf("%s: Learn %d: %v", name, i, err)
						}
						if err := r.Learn(xi); err != nil {
							t.Fatalf("%s: restored Learn %d: %v", name, i, err)
						}
					}
					if !reflect.DeepEqual(l.State(), r.State()) {
						t.Fatalf("%s: restored learner diverged from the uninterrupted one after %d more observations", name, W)
					}
				}
			}
		}
	}
}
