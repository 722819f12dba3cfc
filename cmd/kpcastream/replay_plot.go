package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// The PNG plots of replay --plot: the report's charts, drawn with gonum/plot.

var plotPalette = []color.RGBA{{47, 111, 219, 255}, {224, 138, 30, 255}, {42, 157, 111, 255}, {194, 64, 91, 255},
	{123, 92, 196, 255}, {140, 109, 63, 255}, {210, 100, 182, 255}, {95, 107, 122, 255}}

var (
	plotRed  = color.RGBA{210, 63, 63, 255}
	plotGrey = color.RGBA{125, 141, 174, 255}
	plotInk  = color.RGBA{29, 35, 48, 255}
)

// writePlots writes spectrum.png, explained.png, novelty_spe.png,
// novelty_t2.png, scatter.png, dictionary.png and, when measured,
// similarity.png into dir.
func writePlots(dir string, v *kpcaview.KeyView) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, s := v.Buckets, v.Samples
	mid := make([]float64, len(b.X))
	for i := range b.X {
		mid[i] = float64(b.X[i]) + float64(b.Width[i])/2
	}
	var drifts []float64
	for _, e := range v.Events {
		if e.Kind == "drift" {
			drifts = append(drifts, float64(e.X))
		}
	}
	save := func(p *plot.Plot, name string) error {
		return p.Save(16*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, name))
	}
	newPlot := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "row"
		p.Y.Label.Text = ylabel
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		return p
	}

	// spectrum
	p := newPlot("Eigenvalues over the rows (dashed: drift markers)", "eigenvalue")
	for c, col := range b.Eig {
		if err := addLine(p, mid, col, plotPalette[c%len(plotPalette)], 1.5, legendName(c)); err != nil {
			return err
		}
	}
	addMarkers(p, drifts, b.Eig...)
	if err := save(p, "spectrum.png"); err != nil {
		return err
	}

	p = newPlot("Explained variance", "share of the variance")
	if err := addLine(p, mid, b.Explained, plotInk, 1.5, "explained"); err != nil {
		return err
	}
	addMarkers(p, drifts, b.Explained)
	p.Y.Min, p.Y.Max = 0, 1
	if err := save(p, "explained.png"); err != nil {
		return err
	}

	// novelty
	xs := make([]float64, len(s.X))
	for i, x := range s.X {
		xs[i] = float64(x)
	}
	for _, n := range []struct {
		file, title    string
		vals, mean     []float64
		limit          float64
		sampled, means string
	}{
		{"novelty_spe.png", "SPE (Q)", s.SPE, b.SPE, v.Limits.SPE, "SPE", "mean per bucket"},
		{"novelty_t2.png", "Hotelling T²", s.T2, b.T2, v.Limits.T2, "T²", "mean per bucket"},
	} {
		p := newPlot(fmt.Sprintf("%s with its %.0f %% limit (dashed red: drift markers)", n.title, 100*v.Limits.Q), n.title)
		if err := addPoints(p, xs, n.vals, func(int) color.Color { return plotGrey }, 1.2, n.sampled); err != nil {
			return err
		}
		if err := addLine(p, mid, n.mean, plotInk, 1.5, n.means); err != nil {
			return err
		}
		var ox, oy []float64
		for i, y := range n.vals {
			if y > n.limit {
				ox, oy = append(ox, xs[i]), append(oy, y)
			}
		}
		if len(ox) > 0 {
			if err := addPoints(p, ox, oy, func(int) color.Color { return plotRed }, 1.8, fmt.Sprintf("%d above the limit", len(ox))); err != nil {
				return err
			}
		}
		if len(xs) > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: xs[0], Y: n.limit}, {X: xs[len(xs)-1], Y: n.limit}})
			if err != nil {
				return err
			}
			l.Color, l.Dashes, l.Width = plotPalette[1], []vg.Length{vg.Points(4), vg.Points(2)}, vg.Points(1.2)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("limit %.3g", n.limit), l)
		}
		addMarkers(p, drifts, n.vals)
		if err := save(p, n.file); err != nil {
			return err
		}
	}

	// scatter of the first two components, coloured by row
	if len(s.Z) >= 2 {
		p := newPlot("Projections on z1, z2 (colour: row, light = early)", "z2")
		p.X.Label.Text = "z1"
		nn := len(s.Z[0])
		err := addPoints(p, s.Z[0], s.Z[1], func(i int) color.Color { return rampColor(float64(i) / math.Max(1, float64(nn-1))) }, 1.3, "")
		if err != nil {
			return err
		}
		if err := save(p, "scatter.png"); err != nil {
			return err
		}
	}

	// dictionary
	stored := make([]float64, len(b.Stored))
	for i, n := range b.Stored {
		stored[i] = float64(n)
	}
	p = newPlot(fmt.Sprintf("Dictionary fill of B = %d, swaps and moves per 1,000 rows", v.Budget), "")
	if err := addLine(p, mid, stored, plotPalette[0], 1.5, "stored"); err != nil {
		return err
	}
	if err := addLine(p, mid, b.Swaps, plotRed, 1, "swaps/1000"); err != nil {
		return err
	}
	if err := addLine(p, mid, b.Moves, plotPalette[2], 1, "moves/1000"); err != nil {
		return err
	}
	addMarkers(p, drifts, stored)
	if err := save(p, "dictionary.png"); err != nil {
		return err
	}

	if sim := v.Similarity; sim != nil && len(sim.X) > 0 {
		p := newPlot(fmt.Sprintf("Similarity to batch KPCA of the last %d rows", sim.Window), "mean cos² of the principal angles")
		sx := make([]float64, len(sim.X))
		for i, x := range sim.X {
			sx[i] = float64(x)
		}
		if err := addLine(p, sx, sim.Sim, plotPalette[0], 1.5, "similarity"); err != nil {
			return err
		}
		if err := addPoints(p, sx, sim.Sim, func(int) color.Color { return plotPalette[0] }, 2, ""); err != nil {
			return err
		}
		p.Y.Min, p.Y.Max = 0, 1.02
		addMarkers(p, drifts, []float64{0, 1})
		if err := save(p, "similarity.png"); err != nil {
			return err
		}
	}
	return nil
}

func xys(x, y []float64) plotter.XYs {
	pts := make(plotter.XYs, 0, len(x))
	for i := range x {
		if !math.IsNaN(y[i]) && !math.IsInf(y[i], 0) {
			pts = append(pts, plotter.XY{X: x[i], Y: y[i]})
		}
	}
	return pts
}

func addLine(p *plot.Plot, x, y []float64, c color.Color, width float64, name string) error {
	pts := xys(x, y)
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(width)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

func addPoints(p *plot.Plot, x, y []float64, col func(i int) color.Color, r float64, name string) error {
	pts := xys(x, y)
	if len(pts) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: col(0), Radius: vg.Points(r + 1), Shape: draw.CircleGlyph{}} // the legend's
	sc.GlyphStyleFunc = func(i int) draw.GlyphStyle {
		return draw.GlyphStyle{Color: col(i), Radius: vg.Points(r), Shape: draw.CircleGlyph{}}
	}
	p.Add(sc)
	if name != "" {
		p.Legend.Add(name, sc)
	}
	return nil
}

// addMarkers draws a dashed red vertical line at each x over the range of
// the columns.
func addMarkers(p *plot.Plot, xs []float64, cols ...[]float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range cols {
		for _, v := range c {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if lo > hi {
		return
	}
	for _, x := range xs {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
		if err != nil {
			continue
		}
		l.Color, l.Dashes, l.Width = plotRed, []vg.Length{vg.Points(3), vg.Points(2)}, vg.Points(1)
		p.Add(l)
	}
}

// legendName names eigenvalue c in the legend (the first five only).
func legendName(c int) string {
	if c >= 5 {
		return ""
	}
	return fmt.Sprintf("λ%d", c+1)
}

// rampColor maps t in [0, 1] from light blue to dark red (as the page).
func rampColor(t float64) color.Color {
	t = math.Max(0, math.Min(1, t))
	a, b, d := [3]float64{150, 190, 235}, [3]float64{40, 70, 170}, [3]float64{200, 40, 50}
	var c [3]float64
	for i := range c {
		if t < 0.6 {
			c[i] = a[i] + (b[i]-a[i])*t/0.6
		} else {
			c[i] = b[i] + (d[i]-b[i])*(t-0.6)/0.4
		}
	}
	return color.RGBA{uint8(c[0]), uint8(c[1]), uint8(c[2]), 255}
}
