package classify_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSVMGapFigures is issue 32 item 4's table: prequential accuracy (one
// shuffled pass, last half of the stream: every prediction is made before
// its row is learned, as held-out data) of the classifier stage on every
// labelled set of the repository, five shuffles (seeds 1–5), beside the
// RBF SVM references of bench/learners/svm_reference.py (5-fold CV, the
// best of its C × γ grid, bench/RESULTS.md §17). Per set, at B 200 (ikpca,
// k 16): the defaults (ridge 0.1, γ 1/d, loss squared: today's stage), the
// hinge at the defaults, the means of the grid γ·d {1, 3, 10} × ridge
// {0.1, 0.01} × loss {squared, hinge} and its best cell (as optimistic as
// the SVM's grid, scored on the same runs); on satellite also B 400 and 800 and kha with
// dictionary kmeans at B 200, 400 and 800 (γ 3/d, the SVM's best, ridge 0.1). With the
// wall time per message (learner and classifier, one run, under whatever
// load the machine has).
//
//	KPCASTREAM_BENCH=1 go test ./learners/classify -run TestSVMGapFigures -v -timeout 1h
//
// KPCASTREAM_SETS narrows the sets (comma-separated file names);
// KPCASTREAM_NOGRID=1 leaves out the grids (satellite's budget rows only).
// A measurement, not a check: it asserts only that each set's best cell
// and the satellite rows are above chance by a wide margin (a grid cell may
// be at chance: two_spirals at γ 1/d).
func TestSVMGapFigures(t *testing.T) {
	if os.Getenv("KPCASTREAM_BENCH") == "" {
		t.Skip("a measurement, not a check: set KPCASTREAM_BENCH=1")
	}
	only := os.Getenv("KPCASTREAM_SETS") // comma-separated file names, "" all
	type cell struct {
		b           int
		gd, ridge   float64
		loss, learn string
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n%-16s %-34s %-8s %-15s %s\n", "data", "configuration", "mean", "min–max", "µs/msg")
	run := func(file string, ds *dataset, c cell, check bool) (mean float64) {
		lo, hi := 1.0, 0.0
		start := time.Now()
		const seeds = 5
		for seed := uint64(1); seed <= seeds; seed++ {
			r := prequential(t, ds, 16, c.b, 1, seed, aware, c.gd/float64(len(ds.x[0])), c.ridge, c.loss, c.learn)
			mean += r.lastHalf / seeds
			lo, hi = min(lo, r.lastHalf), max(hi, r.lastHalf)
		}
		per := time.Since(start) / time.Duration(seeds*len(ds.x))
		name := c.learn
		if name == "" {
			name = "ikpca"
		}
		loss := c.loss
		if loss == "" {
			loss = "squared"
		}
		fmt.Fprintf(&out, "%-16s %-34s %.4f   %.4f–%.4f   %.0f\n", strings.TrimSuffix(file, ".csv"),
			fmt.Sprintf("%s B %d γ %g/d ridge %g %s", name, c.b, c.gd, c.ridge, loss), mean, lo, hi, float64(per.Nanoseconds())/1e3)
		if chance := 1 / float64(ds.classes); check && mean < chance+0.5*(1-chance) {
			t.Errorf("%s %+v: mean last-half accuracy %.4f, not even halfway from chance %.2f to 1", file, c, mean, chance)
		}
		return mean
	}
	// grid runs the grid; the defaults (its first two cells) are printed,
	// then the best cell again, the means of all in grid order.
	grid := func(file string, ds *dataset) {
		best, bestAcc := cell{}, -1.0
		var grid strings.Builder
		for i, gd := range []float64{1, 3, 10} {
			for j, ridge := range []float64{0.1, 0.01} {
				for _, loss := range []string{"", "hinge"} {
					c := cell{b: 200, gd: gd, ridge: ridge, loss: loss}
					saved := out.String()
					acc := run(file, ds, c, false)
					fmt.Fprintf(&grid, " %.4f", acc)
					if i > 0 || j > 0 {
						out.Reset()
						out.WriteString(saved)
					}
					if acc > bestAcc {
						best, bestAcc = c, acc
					}
				}
			}
		}
		out.WriteString("  grid (γ·d 1, 3, 10 × ridge 0.1, 0.01 × squared, hinge):" + grid.String() + "; best:\n")
		run(file, ds, best, true)
	}
	for _, file := range []string{"wine.csv", "iris.csv", "three_clusters.csv", "two_spirals.csv", "satellite.csv"} {
		if only != "" && !strings.Contains(","+only+",", ","+file+",") {
			continue
		}
		ds := loadLabelled(t, file)
		ds.standardise()
		if os.Getenv("KPCASTREAM_NOGRID") == "" {
			grid(file, ds)
		}
		if file == "satellite.csv" {
			for _, c := range []cell{
				{b: 400, gd: 3, ridge: 0.1}, {b: 400, gd: 3, ridge: 0.1, loss: "hinge"},
				{b: 800, gd: 3, ridge: 0.1}, {b: 800, gd: 3, ridge: 0.1, loss: "hinge"},
				{b: 200, gd: 3, ridge: 0.1, learn: onKHAMeans}, {b: 200, gd: 3, ridge: 0.1, loss: "hinge", learn: onKHAMeans},
				{b: 400, gd: 3, ridge: 0.1, learn: onKHAMeans}, {b: 400, gd: 3, ridge: 0.1, loss: "hinge", learn: onKHAMeans},
				{b: 800, gd: 3, ridge: 0.1, learn: onKHAMeans}, {b: 800, gd: 3, ridge: 0.1, loss: "hinge", learn: onKHAMeans},
			} {
				run(file, ds, c, true)
			}
		}
	}
	t.Log(out.String())
}
