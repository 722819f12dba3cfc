package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestReplayGolden from today's outputs")

// goldenCase is one replay whose every output is compared with the files
// in testdata/replay-golden/<name>: stdout, stderr (timings left out),
// the --out CSV, the model exports, the data the --report page embeds
// (its clock and latencies left out) and the --plot PNGs (their pixels,
// by hash).
type goldenCase struct {
	name string
	in   func(t *testing.T, dir string) string
	args []string
	out  bool     // --out
	at   []string // --model-at counts
	rep  bool     // --report
	plot bool     // --plot
}

// rowsCSV writes the header and rows [from, to) of a testdata/data file
// into dir.
func rowsCSV(name string, from, to int) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "data", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		path := filepath.Join(dir, fmt.Sprintf("%d-%d-%s", from, to, name))
		if err := os.WriteFile(path, []byte(lines[0]+strings.Join(lines[1+from:1+to], "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// dataFile is a testdata/data file as it is.
func dataFile(name string) func(t *testing.T, dir string) string {
	return func(*testing.T, string) string { return filepath.Join("..", "..", "testdata", "data", name) }
}

var goldenCases = []goldenCase{
	{name: "ikpca_report", in: rowsCSV("drift_stream.csv", 0, 2000),
		args: []string{"--gamma", "0.5", "--components", "3", "--budget", "50", "--forget", "0.999", "--drop", "phase",
			"--report-window", "200", "--report-bucket", "50", "--plot-size", "480x300"},
		out: true, at: []string{"1000"}, rep: true, plot: true},
	{name: "monitored", in: rowsCSV("drift_stream.csv", 9300, 10800),
		args: []string{"--gamma", "0.5", "--components", "3", "--budget", "50", "--forget", "0.999", "--learn", "normal",
			"--warmup", "300", "--fault-column", "phase", "--report-window", "0", "--report-bucket", "50", "--plot-size", "480x300"},
		out: true, rep: true, plot: true},
	{name: "standardize", in: dataFile("wine.csv"),
		args: []string{"--drop", "label", "--standardize", "--warmup", "100", "--budget", "50", "--components", "3"},
		out:  true, at: []string{"120"}},
	{name: "labelled", in: dataFile("wine.csv"),
		args: []string{"--label", "label", "--standardize", "--budget", "50", "--components", "3"}, out: true},
	{name: "labelled_z_kha", in: dataFile("iris.csv"),
		args: []string{"--label", "label", "--classify-on", "z", "--learner", "kha", "--budget", "40", "--passes", "2", "--shuffle-seed", "1"},
		out:  true},
	{name: "batch_report", in: dataFile("three_clusters.csv"),
		args: []string{"--learner", "batch", "--drop", "cluster", "--gamma", "10", "--components", "3", "--report-window", "0"},
		out:  true, rep: true},
	{name: "window_passes", in: dataFile("toy_parabola.csv"),
		args: []string{"--learner", "window", "--budget", "30", "--passes", "2", "--components", "2"}, out: true},
	{name: "kha_model_at", in: dataFile("three_clusters.csv"),
		args: []string{"--learner", "kha", "--drop", "cluster", "--gamma", "10", "--budget", "30", "--components", "2"},
		out:  true, at: []string{"50"}},
}

// TestReplayGolden runs representative replays (plain with a report and
// plots, monitored with a fault column, standardised, labelled on the
// coordinates and on z, batch, window and kha with --model-at) and
// compares every output with the golden files written from the outputs
// of the replay before it moved into package replay (go test -run
// TestReplayGolden -update rewrites them: only for a deliberate change,
// named in the commit).
func TestReplayGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			got := runGolden(t, c, dir)
			gdir := filepath.Join("testdata", "replay-golden", c.name)
			if *updateGolden {
				os.RemoveAll(gdir)
				if err := os.MkdirAll(gdir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, b := range got {
					if err := os.WriteFile(filepath.Join(gdir, name), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			ents, err := os.ReadDir(gdir)
			if err != nil {
				t.Fatalf("no golden files (go test -run TestReplayGolden -update writes them): %v", err)
			}
			var want []string
			for _, e := range ents {
				want = append(want, e.Name())
				b, err := os.ReadFile(filepath.Join(gdir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				g, ok := got[e.Name()]
				if !ok {
					t.Errorf("%s: not written", e.Name())
					continue
				}
				if !bytes.Equal(g, b) {
					t.Errorf("%s differs from %s:\n%s", e.Name(), filepath.Join(gdir, e.Name()), firstDiff(b, g))
				}
			}
			for name := range got {
				if !slices.Contains(want, name) {
					t.Errorf("%s: written, but has no golden file", name)
				}
			}
		})
	}
}

// runGolden runs the case's replay in dir and returns its outputs by
// golden file name.
func runGolden(t *testing.T, c goldenCase, dir string) map[string][]byte {
	t.Helper()
	model := filepath.Join(dir, "model.json")
	args := append([]string{"replay", "--in", c.in(t, dir), "--model-out", model, "--progress", "0"}, c.args...)
	if c.out {
		args = append(args, "--out", filepath.Join(dir, "out.csv"))
	}
	if c.at != nil {
		args = append(args, "--model-at", strings.Join(c.at, ","))
	}
	if c.rep {
		args = append(args, "--report", filepath.Join(dir, "report.html"))
	}
	if c.plot {
		args = append(args, "--plot", filepath.Join(dir, "plots"))
	}
	code, stdout, stderr := runCmd(t, args...)
	got := map[string][]byte{"exit": fmt.Appendf(nil, "%d\n", code), "stdout": []byte(stdout), "stderr": []byte(goldenStderr(stderr))}
	read := func(name, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		got[name] = b
	}
	read("model.json", model)
	for _, n := range c.at {
		read("model."+n+".json", filepath.Join(dir, "model."+n+".json"))
	}
	if c.out {
		read("out.csv", filepath.Join(dir, "out.csv"))
	}
	if c.rep {
		page, err := os.ReadFile(filepath.Join(dir, "report.html"))
		if err != nil {
			t.Fatal(err)
		}
		got["report.json"] = goldenReport(t, page)
	}
	if c.plot {
		got["plots.sha256"] = goldenPlots(t, filepath.Join(dir, "plots"))
	}
	return got
}

// goldenStderr is stderr without what depends on the clock: the report's
// timing line and the seconds of a batch fit.
func goldenStderr(s string) string {
	var keep []string
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.Contains(line, "report: its own work") {
			continue
		}
		keep = append(keep, regexp.MustCompile(`, [0-9.]+ s$`).ReplaceAllString(strings.TrimSuffix(line, "\n"), ", (seconds)")+
			strings.Repeat("\n", strings.Count(line, "\n")))
	}
	return strings.Join(keep, "")
}

// goldenReport is the data a report page embeds, indented, without its
// clock (generated, time) and the learner's latency per bucket.
func goldenReport(t *testing.T, page []byte) []byte {
	t.Helper()
	m := regexp.MustCompile(`(?s)window\.KPCA_REPORT = (\{.*?\});</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("the report embeds no data")
	}
	var rep map[string]any
	if err := json.Unmarshal(m[1], &rep); err != nil {
		t.Fatal(err)
	}
	rep["generated"] = ""
	view := rep["view"].(map[string]any)
	view["time"] = 0
	view["buckets"].(map[string]any)["learn"] = nil
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// goldenPlots lists the PNG files of dir with their size in pixels and a
// hash of their pixels (not of the encoding: another zlib may pack the
// same image differently). A PNG that differs from its golden hash is
// kept in the test's artifact directory (go test -artifacts).
func goldenPlots(t *testing.T, dir string) []byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		rgba := image.NewRGBA(img.Bounds())
		draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
		sz := img.Bounds().Size()
		fmt.Fprintf(&b, "%s %dx%d %x\n", e.Name(), sz.X, sz.Y, sha256.Sum256(rgba.Pix))
		if !*updateGolden {
			os.WriteFile(filepath.Join(t.ArtifactDir(), e.Name()), raw, 0o644)
		}
	}
	return b.Bytes()
}

// firstDiff shows the first line where got differs from want.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\nwant %.300s\ngot  %.300s", i+1, a, b)
		}
	}
	return "(same lines, different bytes)"
}
