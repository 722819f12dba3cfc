package learners_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// imagesGamma is the rbf γ of the synthetic image stream: 1/mean squared
// distance between rows (measured on 500 rows of seed 1).
func imagesGamma(x []float64, d int) float64 {
	var s float64
	var n int
	for i := 0; i+1 < 500; i += 2 {
		a, b := x[i*d:(i+1)*d], x[(i+1)*d:(i+2)*d]
		for j := range a {
			s += (a[j] - b[j]) * (a[j] - b[j])
		}
		n++
	}
	return float64(n) / s
}

// TestIKPCAMoveScheduleImages compares centroid's move schedules on a long
// high-dimensional stream (learnertest.Images, 784 pixels, 20× the budget)
// at B 512 and 1024, by the similarity to batch KPCA of a held-out sample
// (3,000 rows of the same distribution) after 4× and 20× the budget (a
// synced copy), the dictionary changes and the time spent in Learn. Opt-in (minutes): KPCASTREAM_BENCH=1 go test
// ./learners -run TestIKPCAMoveScheduleImages -v -timeout 30m (KPCASTREAM_ORDER=classes: the
// classes arrive in order; KPCASTREAM_BUDGETS=512: one budget)
func TestIKPCAMoveScheduleImages(t *testing.T) {
	if os.Getenv("KPCASTREAM_BENCH") == "" {
		t.Skip("opt-in: KPCASTREAM_BENCH=1 (several minutes)")
	}
	const d, k, held = 784, 8, 3000
	hx, _ := learnertest.Images(held, d, 10, 1, 99)
	kern := learners.Kernel{Name: learners.KernelRBF, Gamma: imagesGamma(hx, d)}
	ref, err := learners.FitBatchWith(kern, hx, held, d, k, learners.BatchOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	budgets := []int{512, 1024}
	if s := os.Getenv("KPCASTREAM_BUDGETS"); s != "" {
		budgets = nil
		for _, f := range strings.Split(s, ",") {
			var b int
			fmt.Sscan(f, &b)
			budgets = append(budgets, b)
		}
	}
	var out strings.Builder
	for _, b := range budgets {
		n := 20 * b
		x, labels := learnertest.Images(n, d, 10, 1, 1)
		if os.Getenv("KPCASTREAM_ORDER") == "classes" {
			// A non-stationary start: the classes arrive one after
			// another (rows sorted by label, stable), so the dictionary
			// must keep moving to new regions for the whole stream.
			x = byClass(x, labels, d)
		}
		// score syncs a copy of l (through State and Restore) and returns
		// its similarity to the held-out batch fit.
		score := func(l *learners.IKPCA) float64 {
			c, err := learners.NewIKPCA(l.Config())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Restore(l.State()); err != nil {
				t.Fatal(err)
			}
			if err := c.Sync(100); err != nil {
				t.Fatal(err)
			}
			m, err := c.Model()
			if err != nil {
				t.Fatal(err)
			}
			rep, err := kpcaeval.CompareFit(ref, m)
			if err != nil {
				t.Fatal(err)
			}
			return rep.Similarity
		}
		for _, c := range []struct {
			name string
			area int64
		}{{"default", 0}, {"gap 2", 1 << 60}} {
			l, err := learners.NewIKPCA(learners.Config{Dim: d, Components: k, Budget: b, Kernel: kern})
			if err != nil {
				t.Fatal(err)
			}
			if c.area > 0 {
				learners.SetMoveGapArea(l, c.area)
			}
			if v := os.Getenv("KPCASTREAM_BURST"); v != "" && c.area == 0 {
				var n int64
				fmt.Sscan(v, &n)
				learners.SetMoveBurst(l, n)
			}
			var took time.Duration
			var early float64
			var earlyChanges int64
			for i := range n {
				start := time.Now()
				if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
					t.Fatal(err)
				}
				took += time.Since(start)
				if i+1 == 4*b {
					early, earlyChanges = score(l), l.State().Ints["clock"]
				}
			}
			fmt.Fprintf(&out, "B %d: %-8s after %d rows similarity %.5f (%d admissions and moves); after %d rows %.5f (%d); Learn %v in all\n",
				b, c.name, 4*b, early, earlyChanges, n, score(l), l.State().Ints["clock"], took.Round(time.Millisecond))
		}
	}
	t.Log("\n" + out.String())
}

// byClass returns the n×d rows of x sorted by their labels, stably.
func byClass(x []float64, labels []int, d int) []float64 {
	idx := make([]int, len(labels))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return labels[a] - labels[b] })
	out := make([]float64, 0, len(x))
	for _, i := range idx {
		out = append(out, x[i*d:(i+1)*d]...)
	}
	return out
}
