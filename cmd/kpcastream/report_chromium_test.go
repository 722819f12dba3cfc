package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// The replay report and the page's self-check in headless Chromium. The
// page (app.js) sets on <html>: data-charts (points drawn per chart),
// data-selfcheck (KC.check's problems: an empty chart, a missing axis
// title, a series missing from its legend, a legend entry cut at the
// canvas's edge or over the data) and data-ready (every chart drawn and
// no problem).

// dumpDOM opens url in headless Chromium and returns the DOM after the
// page's scripts ran, and Chromium's log.
func dumpDOM(t *testing.T, chrome, url string, width int) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chrome, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		fmt.Sprintf("--window-size=%d,1110", width), "--user-data-dir="+filepath.Join(t.TempDir(), "profile"),
		"--virtual-time-budget=3000", "--enable-logging=stderr", "--v=0", "--dump-dom", url)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", chrome, err, se.String())
	}
	return so.String(), se.String()
}

// htmlAttr returns attribute name of the <html> element in dom.
func htmlAttr(dom, name string) string {
	m := regexp.MustCompile(`<html[^>]*\s` + name + `="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// pageProblems checks a dumped page: no JavaScript error, a self-check
// that ran and found nothing, and the charts drawn; it returns the
// charts' point counts.
func pageProblems(t *testing.T, what, dom, logs string) map[string]int {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "CONSOLE") && (strings.Contains(l, "Uncaught") || strings.Contains(l, "Error")) {
			t.Errorf("%s: console error: %s", what, l)
		}
	}
	if e := htmlAttr(dom, "data-errors"); e != "" {
		t.Errorf("%s: JavaScript errors: %s", what, e)
	}
	var problems []string
	if s := htmlAttr(dom, "data-selfcheck"); s == "" || json.Unmarshal([]byte(s), &problems) != nil {
		t.Fatalf("%s: the page's self-check did not run (data-selfcheck %q)", what, s)
	}
	for _, p := range problems {
		t.Errorf("%s: self-check: %s", what, p)
	}
	var charts map[string]int
	if s := htmlAttr(dom, "data-charts"); s == "" || json.Unmarshal([]byte(s), &charts) != nil {
		t.Fatalf("%s: no charts drawn (data-charts %q)", what, s)
	}
	if htmlAttr(dom, "data-ready") != "1" && len(problems) == 0 {
		t.Errorf("%s: the page did not set data-ready (charts %v)", what, charts)
	}
	return charts
}

// TestReportChromium opens replay --report's page (of the first 3,000 rows
// of drift_stream.csv) in headless Chromium, at a wide and a narrow window
// (legends wrap), and checks that every chart has data, axis titles and
// its whole legend, and that the header counts the file's 3,000 rows. It also opens a report of a classifier
// (samples with labels and predictions) and checks its accuracy chart and
// confusion table.
func TestReportChromium(t *testing.T) {
	chrome := needChromium(t)
	dir := t.TempDir()
	data := headCSV(t, filepath.Join("..", "..", "testdata", "data", "drift_stream.csv"), 3000, dir)
	report := filepath.Join(dir, "report.html")
	code, _, stderr := runCmd(t, "replay", "--learner", "ikpca", "--kernel", "rbf", "--gamma", "0.5", "--components", "5",
		"--budget", "100", "--forget", "0.999", "--in", data, "--drop", "phase", "--model-out", filepath.Join(dir, "m.json"),
		"--report", report, "--report-window", "200", "--progress", "0")
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	for _, width := range []int{1400, 700} {
		dom, logs := dumpDOM(t, chrome, "file://"+report, width)
		what := fmt.Sprintf("report at %d px", width)
		charts := pageProblems(t, what, dom, logs)
		for _, c := range []string{"spectrum", "eig", "scatter", "spe", "t2", "dict", "lat", "sim"} {
			if charts[c] <= 0 {
				t.Errorf("%s: chart %s is empty (points %d)", what, c, charts[c])
			}
		}
		if !strings.Contains(dom, "3,000 rows (2,99") {
			m := regexp.MustCompile(`<span id="keymeta">[^<]*`).FindString(dom)
			t.Errorf("%s: the header does not say 3,000 rows: %q", what, m)
		}
	}

	// A monitored replay: the SPE and T² charts draw the limits the
	// outputs carried and mark their alarms.
	monReport := filepath.Join(dir, "monitor.html")
	code, _, stderr = runCmd(t, "replay", "--learner", "ikpca", "--kernel", "rbf", "--gamma", "0.5", "--components", "5",
		"--budget", "100", "--in", data, "--drop", "phase", "--model-out", filepath.Join(dir, "mm.json"),
		"--learn", "normal", "--warmup", "300", "--report", monReport, "--report-window", "200", "--progress", "0")
	if code != 0 {
		t.Fatalf("monitored replay exit %d: %s", code, stderr)
	}
	dom, logs := dumpDOM(t, chrome, "file://"+monReport, 1400)
	if charts := pageProblems(t, "monitored report", dom, logs); charts["spe"] <= 0 {
		t.Errorf("monitored report: SPE chart empty")
	}
	for _, want := range []string{"control limit", "alarmed (the outputs' own limits)"} {
		if !strings.Contains(dom, want) {
			t.Errorf("monitored report: no %q on the page", want)
		}
	}
	// The contributions panel (issue 31): shown, with the variables the
	// alarms ranked first and the newest alarm's list, as drawn by the
	// page's own script (the live page runs the same app.js).
	card := regexp.MustCompile(`<div class="card" id="card-contrib"[^>]*>`).FindString(dom)
	rows := regexp.MustCompile(`<tr><th>x\d+</th><td>\d+ \(\d+\.\d%\)</td><td>\d+ \(\d+\.\d%\)</td></tr>`).FindAllString(dom, -1)
	note := regexp.MustCompile(`over (\d+) alarms \(x0 is the first variable`).FindStringSubmatch(dom)
	if card == "" || strings.Contains(card, "hidden") || len(rows) == 0 || note == nil || note[1] == "0" ||
		!regexp.MustCompile(`newest alarm, at row \d+: x\d+ `).MatchString(dom) {
		t.Errorf("monitored report: contributions panel %q with %d variable rows, note %q: want it shown, filled, with the newest alarm", card, len(rows), note)
	} else {
		t.Logf("monitored report: contributions panel with %d variables over %s alarms (%s)", len(rows), note[1], rows[0])
	}

	// A classifier's report: 3 classes, predictions right 2 times in 3.
	s := kpcaview.NewSeries(kpcaview.Options{Samples: 4000, ZDims: 2, EigDims: 2, Buckets: 50, Width: 100, Thin: true})
	classes := []string{"a", "b", "c"}
	for i := range 3000 {
		y, p := classes[i%3], classes[i%3]
		if i%3 == 1 && i%2 == 0 {
			p = "c"
		}
		s.Add(&kpcaview.Observation{X: int64(i), Seq: uint64(i), Z: []float64{float64(i % 7), float64(i % 5)}, SPE: 0.1 + float64(i%10)/100,
			T2: 1, Label: y, Pred: p, Explained: 0.9, Eigenvalues: []float64{2, 1}, Stored: 20, Basis: uint64(i / 500), Learn: 1e-5, Age: -1})
	}
	rep := &kpcaview.Report{Title: "classifier", Generated: "test", Rows: 3000, View: &kpcaview.KeyView{Pipeline: "replay", Key: "classifier",
		Learner: "ikpca", Dim: 2, Components: 2, Budget: 20, View: s.View(0.99, kpcaview.DefaultDrift)}}
	f, err := os.Create(filepath.Join(dir, "classifier.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := kpcaview.WriteReport(f, rep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom, logs = dumpDOM(t, chrome, "file://"+f.Name(), 1400)
	charts := pageProblems(t, "classifier report", dom, logs)
	if charts["acc"] <= 0 || charts["conf"] != 3000 {
		t.Errorf("classifier report: accuracy chart %d points, confusion of %d samples (want 3000)", charts["acc"], charts["conf"])
	}
	// 1,000 of the 3,000 samples are of class b, 500 of them predicted c.
	if !strings.Contains(dom, "2500 of 3000 right (83.3%)") || !strings.Contains(dom, `<td class="off">500</td>`) {
		t.Errorf("classifier report: the confusion note does not say 2500 of 3000 right, or no cell of 500 wrong: %.300s", regexp.MustCompile(`<small id="conf-note">[^<]*`).FindString(dom))
	}
}

// TestChartSelfCheckFails: the self-check that the page and report tests
// rely on reports a chart without data, without axis titles, with a series
// left out of its legend, and with a legend entry past the canvas's edge
// (a harness page drawing such charts with charts.js); and the pointer
// over a chart shows the values there.
func TestChartSelfCheckFails(t *testing.T) {
	chrome := needChromium(t)
	js, err := fs.ReadFile(kpcaview.Assets(), "charts.js")
	if err != nil {
		t.Fatal(err)
	}
	page := `<!doctype html><html><head><meta charset="utf-8"></head><body>
<canvas id="a" style="width:400px;height:190px"></canvas><canvas id="b" style="width:400px;height:190px"></canvas>
<canvas id="c" style="width:400px;height:190px"></canvas><canvas id="d" style="width:400px;height:190px"></canvas>
<script>` + string(js) + `</script><script>
var s = [{x: [1, 2, 3], y: [1, 2, 3], color: "#000", label: "one"}];
KC.line(document.getElementById("a"), {series: [{x: [], y: [], label: "none"}], xtitle: "row", ytitle: "y"});
KC.line(document.getElementById("b"), {series: s});
KC.line(document.getElementById("c"), {series: s, xtitle: "row", ytitle: "y"});
document.getElementById("c")._kc.legend = [];
KC.line(document.getElementById("d"), {series: s, xtitle: "row", ytitle: "y"});
document.getElementById("d")._kc.legend[0].x = 395;
document.documentElement.setAttribute("data-selfcheck", JSON.stringify(KC.check(Array.prototype.slice.call(document.querySelectorAll("canvas")))));
var cv = document.getElementById("c"), r = cv.getBoundingClientRect(), f = cv._kc.f;
cv.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + f.sx(2), clientY: r.top + f.sy(2), bubbles: true}));
var tip = document.querySelector(".kc-tip");
document.documentElement.setAttribute("data-tip", tip && !tip.hidden ? tip.textContent : "");
</script></body></html>`
	path := filepath.Join(t.TempDir(), "harness.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := dumpDOM(t, chrome, "file://"+path, 900)
	var problems []string
	if err := json.Unmarshal([]byte(htmlAttr(dom, "data-selfcheck")), &problems); err != nil {
		t.Fatalf("harness: %v: %.500s", err, dom)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{"a: empty chart", "b: no x axis title", "b: no y axis title", `c: series "one" not in the legend`, `d: legend entry "one" cut`} {
		if !strings.Contains(got, want) {
			t.Errorf("the self-check missed %q; it reported:\n%s", want, got)
		}
	}
	// Hover: the pointer over x = 2 shows the series' value there.
	if tip := htmlAttr(dom, "data-tip"); tip != "row 2one: 2" {
		t.Errorf("hover at x = 2 shows %q, want the row and the series' value (\"row 2\", \"one: 2\")", tip)
	}
}

// headCSV writes the header and the first n rows of src into dir and
// returns the new file's path.
func headCSV(t *testing.T, src string, n int, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) < n+1 {
		t.Fatalf("%s has %d lines, want %d", src, len(lines), n+1)
	}
	path := filepath.Join(dir, fmt.Sprintf("head%d-%s", n, filepath.Base(src)))
	if err := os.WriteFile(path, []byte(strings.Join(lines[:n+1], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
