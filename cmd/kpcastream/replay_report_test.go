package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/internal/kpcaplot"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// TestReplayReport replays drift_stream.csv (an abrupt change of structure
// at row 10,000) with --report and --plot and checks, on the data the
// report embeds, that the change shows at row 10,000 in the novelty scores
// (a drift marker there and nowhere else, a jump of the mean SPE) and in
// the spectrum, and that the similarity to batch KPCA was measured.
func TestReplayReport(t *testing.T) {
	data := filepath.Join("..", "..", "testdata", "data", "drift_stream.csv") // byte-identical to learners/testdata's and the shared one
	dir := t.TempDir()
	report, plots := filepath.Join(dir, "report.html"), filepath.Join(dir, "plots")
	code, _, stderr := runCmd(t, "replay", "--learner", "ikpca", "--kernel", "rbf", "--gamma", "0.5",
		"--components", "5", "--budget", "200", "--forget", "0.999", "--in", data, "--drop", "phase",
		"--model-out", filepath.Join(dir, "model.json"), "--report", report, "--plot", plots, "--plot-size", "640x360", "--progress", "0")
	if code != 0 {
		t.Fatalf("replay exit %d, stderr:\n%s", code, stderr)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)window\.KPCA_REPORT = (\{.*?\});</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("the report embeds no data")
	}
	if regexp.MustCompile(`<script src=|<link [^>]*href=|https?://`).Match(page) {
		t.Error("the report refers to an external file or address: it must be self-contained")
	}
	var rep kpcaview.Report
	if err := json.Unmarshal(m[1], &rep); err != nil {
		t.Fatal(err)
	}
	v := rep.View
	if v == nil || v.View == nil || v.Count < 19_000 || v.Count > 20_000 {
		t.Fatalf("report of %+v", v)
	}
	if rep.Rows != 20_000 {
		t.Errorf("the report says %d rows, the file has 20,000 (and stdout says so)", rep.Rows)
	}

	// Latency: the report's own work is not in it. The similarity to
	// batch KPCA runs after rows 500, 1000, …; the row after it once
	// took its time (~40 ms: the buckets holding rows k·500 had a median
	// of 440 µs per row against 27 µs for the others).
	var withSim, others []float64
	for i, x := range v.Buckets.X {
		if x < 1000 {
			continue // warm-up
		}
		if x/500 != (x+v.Buckets.Width[i]-1)/500 || x%500 == 0 {
			withSim = append(withSim, v.Buckets.Learn[i])
		} else {
			others = append(others, v.Buckets.Learn[i])
		}
	}
	if a, b := kpcaview.Quantile(withSim, 0.5), kpcaview.Quantile(others, 0.5); len(withSim) < 10 || a > 2*b {
		t.Errorf("median time per row %.1f µs in the %d buckets after a similarity computation, %.1f µs in the %d others: the report's own work is in the latency",
			a*1e6, len(withSim), b*1e6, len(others))
	}

	// Novelty: one drift marker, at the change.
	var drifts []int64
	for _, e := range v.Events {
		if e.Kind == "drift" {
			drifts = append(drifts, e.X)
		}
	}
	if len(drifts) != 1 || drifts[0] < 10_000 || drifts[0] > 10_300 {
		t.Errorf("drift markers at rows %v, want one within 300 rows after 10,000", drifts)
	}
	b := v.Buckets
	mean := func(col []float64, lo, hi int64) float64 {
		s, n := 0.0, 0
		for i, x := range b.X {
			if x >= lo && x < hi {
				s += col[i]
				n++
			}
		}
		if n == 0 {
			t.Fatalf("no bucket in rows [%d, %d)", lo, hi)
		}
		return s / float64(n)
	}
	before, after := mean(b.SPE, 8_000, 10_000), mean(b.SPE, 10_000, 10_500)
	if after < 5*before {
		t.Errorf("mean SPE %.4f before the change, %.4f in the 500 rows after: want a jump of 5× or more", before, after)
	}
	var over int
	for i, x := range v.Samples.X {
		if x >= 10_000 && x < 11_000 && v.Samples.SPE[i] > v.Limits.SPE {
			over++
		}
	}
	if over < v.Limits.SPEOver/2 {
		t.Errorf("%d of the %d samples above the SPE limit fall in the 1,000 rows after the change", over, v.Limits.SPEOver)
	}

	// Spectrum: the eigenvalues change at the change, not before.
	eigAt := func(x int64) []float64 {
		for i := range b.X {
			if b.X[i] <= x && x < b.X[i]+b.Width[i] {
				e := make([]float64, len(b.Eig))
				for c := range b.Eig {
					e[c] = b.Eig[c][i]
				}
				return e
			}
		}
		t.Fatalf("no bucket holds row %d", x)
		return nil
	}
	dist := func(a, c []float64) float64 {
		s, n := 0.0, 0.0
		for i := range a {
			s += (a[i] - c[i]) * (a[i] - c[i])
			n += a[i] * a[i]
		}
		return math.Sqrt(s / n)
	}
	if d := dist(eigAt(9_900), eigAt(10_500)); d < 0.25 {
		t.Errorf("spectrum changed by %.3f (relative) across row 10,000, want ≥ 0.25", d)
	}
	if d := dist(eigAt(7_900), eigAt(9_900)); d > 0.1 {
		t.Errorf("spectrum changed by %.3f (relative) between rows 7,900 and 9,900 (no change there), want < 0.1", d)
	}

	// Similarity to batch KPCA of the last 1,000 rows: high before, a dip
	// after the change.
	s := v.Similarity
	if s == nil || len(s.X) < 30 {
		t.Fatalf("similarity %+v", s)
	}
	lowBefore, lowAfter := 1.0, 1.0
	for i, x := range s.X {
		switch {
		case x >= 3_000 && x < 10_000:
			lowBefore = math.Min(lowBefore, s.Sim[i])
		case x >= 10_000 && x < 13_000:
			lowAfter = math.Min(lowAfter, s.Sim[i])
		}
	}
	if lowBefore < 0.99 || lowAfter > 0.95 {
		t.Errorf("similarity to batch KPCA: lowest %.3f before the change (want ≥ 0.99), %.3f in the 3,000 rows after (want a dip below 0.95)", lowBefore, lowAfter)
	}

	checkPNGs(t, plots, kpcaplot.Size{W: 640, H: 360}) // small: quicker under -race
}

// plotFiles are the files of replay --plot.
var plotFiles = []string{"spectrum.png", "eigenvalues.png", "explained.png", "novelty_spe.png", "novelty_t2.png", "scatter.png", "dictionary.png", "similarity.png"}

// checkPNGs checks that every plot file is a PNG of size px that is not
// blank.
func checkPNGs(t *testing.T, dir string, px kpcaplot.Size) {
	t.Helper()
	for _, f := range plotFiles {
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Error(err)
			continue
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if b := img.Bounds(); b.Dx() != px.W || b.Dy() != px.H {
			t.Errorf("%s is %dx%d, want %v", f, b.Dx(), b.Dy(), &px)
		}
		inked, sampled := 0, 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y += 3 {
			for x := b.Min.X; x < b.Max.X; x += 3 {
				if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xc000 || g < 0xc000 || bl < 0xc000 {
					inked++
				}
				sampled++
			}
		}
		if inked < sampled/100 {
			t.Errorf("%s: %d inked pixels of %d sampled: blank?", f, inked, sampled)
		}
	}
}

// TestReplayPlotSize: --plot-size sets the PNG size; a size out of range
// is a usage error naming the range.
func TestReplayPlotSize(t *testing.T) {
	dir := t.TempDir()
	data := headCSV(t, filepath.Join("..", "..", "testdata", "data", "drift_stream.csv"), 3000, dir)
	args := []string{"replay", "--learner", "ikpca", "--kernel", "rbf", "--gamma", "0.5", "--components", "3", "--budget", "50",
		"--in", data, "--drop", "phase", "--model-out", filepath.Join(dir, "model.json"), "--progress", "0", "--report-window", "200"}
	code, _, stderr := runCmd(t, append(args, "--plot", filepath.Join(dir, "p"), "--plot-size", "640x360")...)
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	checkPNGs(t, filepath.Join(dir, "p"), kpcaplot.Size{W: 640, H: 360})
	for _, bad := range []string{"10x10", "640", "wide", "640x9000"} {
		code, _, stderr := runCmd(t, append(args, "--plot", filepath.Join(dir, "q"), "--plot-size", bad)...)
		if code == 0 || !strings.Contains(stderr, `invalid value "`+bad+`" for flag -plot-size: want`) {
			t.Errorf("--plot-size %s: exit %d, stderr %q", bad, code, stderr)
		}
	}
}
