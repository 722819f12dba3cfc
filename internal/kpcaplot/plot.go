package kpcaplot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// The PNG plots of replay --plot: the report's charts, drawn with gonum/plot.
// Every plot has a title and both axis titles, tick labels written as
// people write numbers (2,500, not 2500.00), and its legend beside the
// data, never over it: the legend column is measured and the plot area
// shrinks to make room (a size too small for it is an error, not a cut
// legend).

var plotPalette = []color.RGBA{{47, 111, 219, 255}, {224, 138, 30, 255}, {42, 157, 111, 255}, {194, 64, 91, 255},
	{123, 92, 196, 255}, {140, 109, 63, 255}, {210, 100, 182, 255}, {95, 107, 122, 255}}

var (
	plotRed  = color.RGBA{210, 63, 63, 255}
	plotGrey = color.RGBA{125, 141, 174, 255}
	plotInk  = color.RGBA{29, 35, 48, 255}
)

// Size is the PNG files' size in pixels (replay --plot-size, a flag.Value).
type Size struct{ W, H int }

// DefaultSize is --plot-size's default.
var DefaultSize = Size{1200, 675}

// Limits of --plot-size: smaller leaves no room for a legend column and
// readable ticks; larger is a poster.
const (
	MinW, MinH = 480, 300
	MaxSide    = 8000
)

func (s *Size) String() string { return fmt.Sprintf("%dx%d", s.W, s.H) }

func (s *Size) Set(v string) error {
	ws, hs, ok := strings.Cut(strings.ToLower(strings.TrimSpace(v)), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("want WIDTHxHEIGHT in pixels, such as 1200x675, got %q", v)
	}
	if w < MinW || h < MinH || w > MaxSide || h > MaxSide {
		return fmt.Errorf("want a width of %d to %d and a height of %d to %d pixels, got %dx%d", MinW, MaxSide, MinH, MaxSide, w, h)
	}
	s.W, s.H = w, h
	return nil
}

// plotDPI scales the fonts (sized in points) with the image: 96 dpi at
// 800 pixels wide, so that text keeps its share of a larger image.
func (s Size) dpi() int { return max(72, min(300, 96*s.W/800)) }

// panel is one plot of a figure with the legend drawn beside it.
type panel struct {
	p       *plot.Plot
	lg      plot.Legend
	entries int // in lg
}

func newPanel(title, xlabel, ylabel string) *panel {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = humanTicks{}
	p.Y.Tick.Marker = humanTicks{}
	p.Add(plotter.NewGrid())
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	lg.TextStyle.Font.Size = vg.Points(10)
	lg.ThumbnailWidth = vg.Points(16)
	lg.Padding = vg.Points(2)
	return &panel{p: p, lg: lg}
}

// add draws a plotter with a legend entry (none for an empty name).
func (pn *panel) add(name string, pl plot.Plotter, thumb plot.Thumbnailer) {
	pn.p.Add(pl)
	if name != "" {
		pn.entry(name, thumb)
	}
}

// entry adds a legend entry.
func (pn *panel) entry(name string, thumb plot.Thumbnailer) {
	pn.lg.Add(name, thumb)
	pn.entries++
}

// legendWidth is the width of pn's legend column, 0 without entries.
func (pn *panel) legendWidth(c draw.Canvas) vg.Length {
	r := pn.lg.Rectangle(c)
	return r.Max.X - r.Min.X
}

// saveFigure draws the panels one above the other, each with its legend in
// a column to the right of the data, into a PNG of size px.
func saveFigure(path string, px Size, panels ...*panel) error {
	dpi := px.dpi()
	w, h := vg.Length(px.W)*vg.Inch/vg.Length(dpi), vg.Length(px.H)*vg.Inch/vg.Length(dpi)
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	// Every legend entry on the same column width; the column is part
	// of the image, never over the data.
	var lw vg.Length
	for _, pn := range panels {
		lw = max(lw, pn.legendWidth(dc))
	}
	gap := vg.Points(8)
	if lw > 0 {
		lw += 2 * gap
	}
	if lw > w*45/100 {
		return fmt.Errorf("%s: the legend (%.0f pt) needs more than 45%% of the width (%.0f pt): use a larger --plot-size", filepath.Base(path), float64(lw), float64(w))
	}
	margin := vg.Points(6)
	area := draw.Crop(dc, margin, -lw-margin, margin, -margin)
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		plots[i] = []*plot.Plot{pn.p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(10)}
	canv := plot.Align(plots, tiles, area)
	for i, pn := range panels {
		c := canv[i][0]
		pn.p.Draw(c) // its own legend is empty: every entry went to pn.lg
		data := pn.p.DataCanvas(c)
		lc := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: area.Max.X + gap, Y: data.Min.Y},
			Max: vg.Point{X: dc.Max.X - gap, Y: data.Max.Y},
		}}
		if r := pn.lg.Rectangle(lc); r.Min.Y < lc.Min.Y-vg.Points(1) {
			return fmt.Errorf("%s: panel %d's legend (%d entries) is taller than its plot: use a larger --plot-size", filepath.Base(path), i+1, pn.entries)
		}
		pn.lg.Draw(lc)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (&vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Write writes the plots of the first rows rows into dir, at size px: spectrum.png (the eigenvalue
// spectrum at the end, with the cumulative explained share),
// eigenvalues.png (the eigenvalues over the rows), explained.png,
// novelty_spe.png, novelty_t2.png, scatter.png, dictionary.png (two
// panels: the points stored; swaps and moves per 1,000 rows) and, when
// measured, similarity.png.
func Write(dir string, v *kpcaview.KeyView, rows int64, px Size) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f := newFigures(dir, v, rows, px)
	for _, fig := range []func() error{f.spectrum, f.eigenvalues, f.explained, f.novelty, f.scatter, f.dictionary, f.similarity} {
		if err := fig(); err != nil {
			return err
		}
	}
	return nil
}

// figures is what every figure of Write draws from: the view, the
// buckets' mid-points and the drift markers.
type figures struct {
	dir        string
	v          *kpcaview.KeyView
	rows       int64
	px         Size
	mid        []float64 // the buckets' mid-points
	drifts     []float64 // the drift markers' rows
	markerNote string    // the titles' note on the markers
	// marked counts the samples drawn red on each novelty chart.
	marked map[string]int
}

func newFigures(dir string, v *kpcaview.KeyView, rows int64, px Size) *figures {
	f := &figures{dir: dir, v: v, rows: rows, px: px, marked: map[string]int{}}
	b := v.Buckets
	f.mid = make([]float64, len(b.X))
	for i := range b.X {
		f.mid[i] = float64(b.X[i]) + float64(b.Width[i])/2
	}
	for _, e := range v.Events {
		if e.Kind == "drift" {
			f.drifts = append(f.drifts, float64(e.X))
		}
	}
	if len(f.drifts) > 0 {
		f.markerNote = " (dashed red: drift markers)"
	}
	return f
}

func (f *figures) save(name string, panels ...*panel) error {
	return saveFigure(filepath.Join(f.dir, name), f.px, panels...)
}

// spectrum: the eigenvalues after the last row, and their cumulative
// share of the variance (explained is the share of all k).
func (f *figures) spectrum() error {
	b := f.v.Buckets
	last := len(b.X) - 1
	if last < 0 || len(b.Eig) == 0 {
		return nil
	}
	eig := make([]float64, len(b.Eig))
	sum := 0.0
	for c := range b.Eig {
		eig[c] = b.Eig[c][last]
		sum += eig[c]
	}
	ex := b.Explained[last]
	pn := newPanel(fmt.Sprintf("Eigenvalue spectrum after %s rows (the %d components explain %.1f %%)", humanInt(f.rows), len(eig), 100*ex),
		"component", "eigenvalue")
	bars, err := plotter.NewBarChart(plotter.Values(eig), vg.Points(max(8, float64(f.px.W)/float64(4*len(eig)+8))))
	if err != nil {
		return err
	}
	bars.Color, bars.LineStyle.Width = plotPalette[0], 0
	pn.add("eigenvalue", bars, bars)
	names := make([]string, len(eig))
	for c := range names {
		names[c] = fmt.Sprintf("λ%d", c+1)
	}
	pn.p.NominalX(names...)
	pn.p.X.Min, pn.p.X.Max = -0.5, float64(len(eig))-0.5
	pn.p.Y.Min, pn.p.Y.Max = 0, math.Max(eig[0], 1e-12)*1.08
	if !(sum > 0 && ex > 0) {
		return f.save("spectrum.png", pn)
	}
	// The cumulative share of the variance, on a panel of its own (one
	// unit per axis): explained is the share of all k, so the total
	// variance is sum/explained.
	total := sum / ex
	share := newPanel("Cumulative share of the variance", "component", "share of the variance")
	sx := make([]float64, len(eig))
	sy := make([]float64, len(eig))
	acc := 0.0
	for c := range eig {
		acc += eig[c]
		sx[c], sy[c] = float64(c), acc/total
	}
	if err := share.line(sx, sy, plotPalette[1], 1.5, "cumulative share"); err != nil {
		return err
	}
	if err := share.points(sx, sy, func(int) color.Color { return plotPalette[1] }, 2.5, ""); err != nil {
		return err
	}
	share.p.NominalX(names...)
	share.p.X.Min, share.p.X.Max = -0.5, float64(len(eig))-0.5
	share.p.Y.Min, share.p.Y.Max = 0, 1
	return f.save("spectrum.png", pn, share)
}

func (f *figures) eigenvalues() error {
	b := f.v.Buckets
	pn := newPanel("Eigenvalues over the rows"+f.markerNote, "row", "eigenvalue")
	for c, col := range b.Eig {
		if err := pn.line(f.mid, col, plotPalette[c%len(plotPalette)], 1.5, fmt.Sprintf("λ%d", c+1)); err != nil {
			return err
		}
	}
	pn.markers(f.drifts, b.Eig...)
	pn.p.Y.Min = 0
	return f.save("eigenvalues.png", pn)
}

func (f *figures) explained() error {
	b := f.v.Buckets
	pn := newPanel("Explained variance"+f.markerNote, "row", "share of the variance")
	if err := pn.line(f.mid, b.Explained, plotInk, 1.5, fmt.Sprintf("explained by %d components", len(b.Eig))); err != nil {
		return err
	}
	pn.markers(f.drifts, b.Explained)
	pn.p.Y.Min, pn.p.Y.Max = 0, 1
	return f.save("explained.png", pn)
}

// novelty: the SPE and T² of the kept samples, their mean per bucket and
// the limit; the samples the page marks (kpcaview.View.Marked: alarmed
// with a monitor's limits, else above the limit) are red.
func (f *figures) novelty() error {
	v, b, s := f.v, f.v.Buckets, f.v.Samples
	xs := make([]float64, len(s.X))
	for i, x := range s.X {
		xs[i] = float64(x)
	}
	sampled := "sampled rows"
	if v.Stride > 1 {
		sampled = fmt.Sprintf("every %s row", ordinal(v.Stride))
	}
	for _, n := range []struct {
		which, file, title, unit string
		vals, mean               []float64
		limit                    float64
	}{
		{"spe", "novelty_spe.png", "SPE (Q)", "SPE (squared reconstruction error)", s.SPE, b.SPE, v.Limits.SPE},
		{"t2", "novelty_t2.png", "Hotelling T²", "T²", s.T2, b.T2, v.Limits.T2},
	} {
		pn := newPanel(fmt.Sprintf("%s with its %.0f %% limit%s", n.title, 100*v.Limits.Q, f.markerNote), "row", n.unit)
		if err := pn.points(xs, n.vals, func(int) color.Color { return plotGrey }, 1.2, sampled); err != nil {
			return err
		}
		if err := pn.line(f.mid, n.mean, plotInk, 1.5, "mean per bucket"); err != nil {
			return err
		}
		k, err := pn.marked(v, n.which, xs, n.vals)
		if err != nil {
			return err
		}
		f.marked[n.which] = k
		if len(xs) > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: xs[0], Y: n.limit}, {X: xs[len(xs)-1], Y: n.limit}})
			if err != nil {
				return err
			}
			l.Color, l.Dashes, l.Width = plotPalette[1], []vg.Length{vg.Points(4), vg.Points(2)}, vg.Points(1.2)
			pn.add("limit "+humanFloat(n.limit), l, l)
		}
		pn.markers(f.drifts, n.vals)
		if err := f.save(n.file, pn); err != nil {
			return err
		}
	}
	return nil
}

// marked draws the samples v.Marked(which) in red, with their count in
// the legend (the page's count, from the same rule), and returns it.
func (pn *panel) marked(v *kpcaview.KeyView, which string, xs, vals []float64) (int, error) {
	idx := v.Marked(which)
	if len(idx) == 0 {
		return 0, nil
	}
	ox, oy := make([]float64, len(idx)), make([]float64, len(idx))
	for j, i := range idx {
		ox[j], oy[j] = xs[i], vals[i]
	}
	what := "above the limit"
	if v.Limits.Source == "monitor" && v.Samples.Alarm != nil {
		what = "alarmed"
	}
	return len(idx), pn.points(ox, oy, func(int) color.Color { return plotRed }, 1.8, fmt.Sprintf("%s %s", humanInt(int64(len(idx))), what))
}

// scatter of the first two components, coloured by row.
func (f *figures) scatter() error {
	s := f.v.Samples
	if len(s.Z) < 2 {
		return nil
	}
	pn := newPanel("Projections on the first two components", "z1", "z2")
	nn := len(s.Z[0])
	ramp := func(i int) color.Color { return rampColor(float64(i) / math.Max(1, float64(nn-1))) }
	if err := pn.points(s.Z[0], s.Z[1], ramp, 1.3, ""); err != nil {
		return err
	}
	if nn > 0 {
		for _, e := range []struct {
			name string
			i    int
		}{{fmt.Sprintf("early (row %s)", humanInt(s.X[0])), 0}, {fmt.Sprintf("late (row %s)", humanInt(s.X[nn-1])), nn - 1}} {
			pn.entry(e.name, glyphThumb{ramp(e.i)})
		}
	}
	return f.save("scatter.png", pn)
}

// dictionary: counts and rates on two panels, each with its unit.
func (f *figures) dictionary() error {
	v, b := f.v, f.v.Buckets
	stored := make([]float64, len(b.Stored))
	for i, n := range b.Stored {
		stored[i] = float64(n)
	}
	top := newPanel(fmt.Sprintf("Dictionary: points stored of the budget B = %s%s", humanInt(int64(v.Budget)), f.markerNote), "row", "points stored")
	if err := top.line(f.mid, stored, plotPalette[0], 1.5, "stored"); err != nil {
		return err
	}
	top.p.Y.Min, top.p.Y.Max = 0, float64(max(v.Budget, 1))*1.05
	top.markers(f.drifts, []float64{0, float64(v.Budget)})
	bottom := newPanel("Dictionary changes", "row", "per 1,000 rows")
	if err := bottom.line(f.mid, b.Swaps, plotRed, 1, "swaps"); err != nil {
		return err
	}
	if err := bottom.line(f.mid, b.Moves, plotPalette[2], 1, "centroid moves"); err != nil {
		return err
	}
	bottom.p.Y.Min = 0
	bottom.markers(f.drifts, b.Swaps, b.Moves)
	return f.save("dictionary.png", top, bottom)
}

// similarity to batch KPCA over the rows, when measured.
func (f *figures) similarity() error {
	sim := f.v.Similarity
	if sim == nil || len(sim.X) == 0 {
		return nil
	}
	pn := newPanel(fmt.Sprintf("Similarity to batch KPCA of the last %s rows%s", humanInt(int64(sim.Window)), f.markerNote), "row", "mean cos² of the principal angles")
	sx := make([]float64, len(sim.X))
	for i, x := range sim.X {
		sx[i] = float64(x)
	}
	if err := pn.line(sx, sim.Sim, plotPalette[0], 1.5, "similarity"); err != nil {
		return err
	}
	if err := pn.points(sx, sim.Sim, func(int) color.Color { return plotPalette[0] }, 2, ""); err != nil {
		return err
	}
	pn.p.Y.Min, pn.p.Y.Max = 0, 1.02
	pn.markers(f.drifts, []float64{0, 1})
	return f.save("similarity.png", pn)
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

func (pn *panel) line(x, y []float64, c color.Color, width float64, name string) error {
	pts := xys(x, y)
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(width)
	pn.add(name, l, l)
	return nil
}

func (pn *panel) points(x, y []float64, col func(i int) color.Color, r float64, name string) error {
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
	pn.add(name, sc, sc)
	return nil
}

// glyphThumb is a legend thumbnail of one round glyph.
type glyphThumb struct{ c color.Color }

func (g glyphThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(draw.GlyphStyle{Color: g.c, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}, c.Center())
}

// markers draws a dashed red vertical line at each x over the range of
// the columns, with one legend entry.
func (pn *panel) markers(xs []float64, cols ...[]float64) {
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
	for i, x := range xs {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
		if err != nil {
			continue
		}
		l.Color, l.Dashes, l.Width = plotRed, []vg.Length{vg.Points(3), vg.Points(2)}, vg.Points(1)
		name := ""
		if i == 0 {
			name = "drift marker"
		}
		pn.add(name, l, l)
	}
}

// humanTicks are ticks at 1, 2, 2.5 or 5 × 10ⁿ, about six over the
// range, labelled as people write numbers: thousands separated (2,500),
// no trailing zeros (0.5, not 0.50), exponents only for very large or
// small values; with unlabelled minor ticks between them.
type humanTicks struct{}

func (humanTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return []plot.Tick{{Value: lo, Label: tickLabel(lo, 0)}}
	}
	step := niceStep((hi - lo) / 6)
	var ticks []plot.Tick
	first := math.Ceil(lo/step-1e-9) * step
	for i := 0; i < 100; i++ {
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: tickLabel(v, step)})
		if m := v + step/2; m < hi {
			ticks = append(ticks, plot.Tick{Value: m})
		}
	}
	if m := first - step/2; m > lo {
		ticks = append(ticks, plot.Tick{Value: m})
	}
	return ticks
}

// niceStep rounds s up to 1, 2, 2.5 or 5 × 10ⁿ.
func niceStep(s float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(s)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= s*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel writes v with as many decimals as the tick step needs.
func tickLabel(v, step float64) string {
	a := math.Abs(v)
	if v == 0 || math.Abs(v) < math.Abs(step)*1e-9 {
		return "0"
	}
	if a >= 1e9 || a < 1e-4 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	dec := 0
	if step > 0 && step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
		if r := step * math.Pow(10, float64(dec)); math.Abs(r-math.Round(r)) > 1e-6 {
			dec++ // 0.25 steps
		}
	}
	t := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(t, ".") {
		t = strings.TrimRight(strings.TrimRight(t, "0"), ".")
	}
	return groupThousands(t)
}

// groupThousands puts commas into the integer part of a decimal number.
func groupThousands(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if hasFrac {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return sign + b.String()
}

// humanInt writes n with thousands separated.
func humanInt(n int64) string { return groupThousands(strconv.FormatInt(n, 10)) }

// humanFloat writes v with 3 significant digits, thousands separated.
func humanFloat(v float64) string {
	a := math.Abs(v)
	if a == 0 {
		return "0"
	}
	if a >= 1e9 || a < 1e-4 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	dec := max(0, 2-int(math.Floor(math.Log10(a))))
	return groupThousands(strconv.FormatFloat(v, 'f', dec, 64))
}

// ordinal writes 2nd, 4th, 16th, …
func ordinal(n int64) string {
	suf := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suf = "st"
		case 2:
			suf = "nd"
		case 3:
			suf = "rd"
		}
	}
	return humanInt(n) + suf
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
