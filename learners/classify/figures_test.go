package classify_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// imagesSet is the synthetic 784-pixel image stream of learnertest.Images
// (10 classes, seed 1, stream 1) as a dataset.
func imagesSet(n int) *dataset {
	const d, classes = 784, 10
	x, y := learnertest.Images(n, d, classes, 1, 1)
	ds := &dataset{y: y, classes: classes}
	for i := range n {
		ds.x = append(ds.x, x[i*d:(i+1)*d])
	}
	return ds
}

// TestClassifierFigures prints the classifier stage's prequential accuracy
// (last half of the stream, basis-aware on ikpca's coordinates, seed 1)
// on every labelled set of the repository and the synthetic image stream,
// at the stated budget and k, with the wall time per message (learner +
// classifier); the RBF SVM references come from
// bench/learners/svm_reference.py (bench/RESULTS.md §17):
//
//	go test ./learners/classify -run TestClassifierFigures -v
//
// It asserts that every cell is above chance by a wide margin (the
// figures themselves are compared in RESULTS). Skipped under -short.
func TestClassifierFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluation on every labelled set (about a minute): skipped under -short")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-18s %6s %3s %5s %7s %9s %9s\n", "data", "passes", "k", "B", "γ", "last half", "µs/msg")
	for _, tc := range []struct {
		name   string
		ds     func() *dataset
		passes int
		gamma  float64 // 0: 1/d
		k, b   int
	}{
		{"satellite", func() *dataset { return loadLabelled(t, "satellite.csv") }, 1, 0, 16, 200},
		{"satellite", func() *dataset { return loadLabelled(t, "satellite.csv") }, 1, 3.0 / 36, 16, 200},
		{"satellite", func() *dataset { return loadLabelled(t, "satellite.csv") }, 1, 3.0 / 36, 16, 400},
		{"satellite", func() *dataset { return loadLabelled(t, "satellite.csv") }, 1, 3.0 / 36, 16, 800},
		{"wine", func() *dataset { return loadLabelled(t, "wine.csv") }, 3, 0, 16, 200},
		{"iris", func() *dataset { return loadLabelled(t, "iris.csv") }, 3, 0, 16, 200},
		{"two_spirals", func() *dataset { return loadLabelled(t, "two_spirals.csv") }, 5, 3, 16, 200},
		{"three_clusters", func() *dataset { return loadLabelled(t, "three_clusters.csv") }, 1, 0, 16, 200},
		{"images (synthetic)", func() *dataset { return imagesSet(4000) }, 1, 0, 32, 300},
		{"images (synthetic)", func() *dataset { return imagesSet(4000) }, 1, 0, 32, 600},
		{"images (synthetic)", func() *dataset { return imagesSet(4000) }, 1, 3.0 / 784, 32, 300},
	} {
		ds := tc.ds()
		ds.standardise()
		if tc.gamma == 0 {
			tc.gamma = 1 / float64(len(ds.x[0]))
		}
		start := time.Now()
		r := prequential(t, ds, tc.k, tc.b, tc.passes, 1, aware, tc.gamma, 0, "", onIKPCA)
		per := time.Since(start) / time.Duration(len(ds.x)*tc.passes)
		fmt.Fprintf(&b, "%-18s %6d %3d %5d %7.3g %9.4f %9.1f\n", tc.name, tc.passes, tc.k, tc.b, tc.gamma, r.lastHalf, float64(per.Nanoseconds())/1e3)
		if chance := 1 / float64(ds.classes); r.lastHalf < chance+0.5*(1-chance) {
			t.Errorf("%s: last-half accuracy %.4f, not even halfway from chance %.2f to 1", tc.name, r.lastHalf, chance)
		}
	}
	t.Log(b.String())
}
