package kpcaplot

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
