package kpcaplot

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// TestPlotTicks: tick labels read as numbers are written (2,500, not
// 2500.00) at 1, 2, 2.5 or 5 × 10ⁿ.
func TestPlotTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 20_000, []string{"0", "5,000", "10,000", "15,000", "20,000"}},
		{0, 14_000, []string{"0", "2,500", "5,000", "7,500", "10,000", "12,500"}},
		{0, 1, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{0.01, 0.26, []string{"0.05", "0.1", "0.15", "0.2", "0.25"}},
		{-3, 3, []string{"-3", "-2", "-1", "0", "1", "2", "3"}},
		{0, 2e6, []string{"0", "500,000", "1,000,000", "1,500,000", "2,000,000"}},
	} {
		var got []string
		for _, tk := range (humanTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ticks of [%v, %v]: %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

// TestPlotLegendNeverCut: a legend too wide for the image is an error
// naming --plot-size, not a legend cut at the border.
func TestPlotLegendNeverCut(t *testing.T) {
	pn := newPanel("t", "row", "y")
	if err := pn.line([]float64{0, 1}, []float64{0, 1}, plotInk, 1, strings.Repeat("a very long legend entry ", 8)); err != nil {
		t.Fatal(err)
	}
	err := saveFigure(filepath.Join(t.TempDir(), "x.png"), Size{MinW, MinH}, pn)
	if err == nil || !strings.Contains(err.Error(), "--plot-size") {
		t.Errorf("a legend wider than the image: %v", err)
	}
	pn = newPanel("t", "row", "y")
	for i := range 40 {
		if err := pn.line([]float64{0, 1}, []float64{0, float64(i)}, plotInk, 1, fmt.Sprintf("series %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := saveFigure(filepath.Join(t.TempDir(), "y.png"), Size{MinW, MinH}, pn); err == nil || !strings.Contains(err.Error(), "taller") {
		t.Errorf("a legend taller than the plot: %v", err)
	}
}

// TestNoveltyMarksAsThePage (issue 33 #6): with a monitor's limits, the
// novelty PNG marks the samples whose output raised the alarm, as the
// report page does, not those above the final limit: the two disagreed
// on the same replay (107 alarmed on the page, 150 above the limit on the
// PNG). A sample alarmed under an earlier, lower limit and one above the
// final limit that raised no alarm tell the rules apart.
func TestNoveltyMarksAsThePage(t *testing.T) {
	s := kpcaview.NewSeries(kpcaview.Options{Samples: 64, ZDims: 2, EigDims: 2, Buckets: 8, Width: 10})
	for i := range 40 {
		o := &kpcaview.Observation{X: int64(i), Seq: uint64(i), Z: []float64{1, 2}, Eigenvalues: []float64{2, 1}, SPE: 1, T2: 1, SPELimit: 5, T2Limit: 9}
		switch i {
		case 10, 11: // alarmed under the limit of their time, below the final one
			o.SPE, o.SPELimit, o.Alarm = 4, 3, "spe"
		case 20: // above the final limit, no alarm (learned while the limits moved)
			o.SPE, o.SPELimit = 6, 7
		case 30:
			o.SPE, o.T2, o.Alarm = 8, 12, "both"
		}
		s.Add(o)
	}
	v := &kpcaview.KeyView{Learner: "ikpca", Dim: 2, Components: 2, Budget: 10, View: s.View(0.99, kpcaview.DefaultDrift)}
	// The page's rule (app.js): with limits from a monitor, the samples
	// whose alarm names the chart.
	var page int
	for _, a := range v.Samples.Alarm {
		if a == "spe" || a == "both" {
			page++
		}
	}
	f := newFigures(t.TempDir(), v, 40, Size{MinW, MinH})
	if err := f.novelty(); err != nil {
		t.Fatal(err)
	}
	if page != 3 || f.marked["spe"] != page || v.Limits.SPEOver != page {
		t.Errorf("SPE: the page marks %d (want 3), the PNG %d, the view's count %d: want one count", page, f.marked["spe"], v.Limits.SPEOver)
	}
	if f.marked["t2"] != 1 || v.Limits.T2Over != 1 {
		t.Errorf("T²: the PNG marks %d, the view counts %d; want the 1 alarmed", f.marked["t2"], v.Limits.T2Over)
	}
}
