package learners

import (
	"math"
	"testing"
)

// imagesError returns max |P − K·V| relative to max |K·V| (over all basis
// rows: the scale of the largest eigenvalue, as the residuals).
func imagesError(w *Window) float64 {
	W, m := w.w, w.ring.Len()
	var big, diff float64
	for c := range w.valid {
		for i := range m {
			var s float64
			for j := range m {
				s += w.gram[i*W+j] * w.block[c*W+j]
			}
			big = max(big, math.Abs(s))
			diff = max(diff, math.Abs(s-w.img[c*W+i]))
		}
	}
	if big == 0 {
		return diff
	}
	return diff / big
}

// TestWindowImagesStayExact checks that the basis images P = K·V that Learn
// keeps up to date by rank-one updates equal K·V recomputed from the Gram
// matrix, at every step while the window fills and slides, for several
// refresh periods.
func TestWindowImagesStayExact(t *testing.T) {
	const d, k, W, n = 3, 3, 40, 300
	x := windowStream(n, d, 31)
	for _, refresh := range []int{1, 4, 1000} {
		l, err := NewWindow(windowConfig(d, k, W, refresh))
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i := range n {
			if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
				t.Fatal(err)
			}
			worst = max(worst, imagesError(l))
		}
		t.Logf("refresh %d: max relative image error %.2g", refresh, worst)
		if worst > 1e-10 {
			t.Errorf("refresh %d: basis images drift from K·V by %g relative", refresh, worst)
		}
	}
}
