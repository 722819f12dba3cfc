package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
)

// The Python module python/kpcastream.py against the Go implementation:
// the same projections as "kpcastream project", the same predictions as
// learners.Model.Predict, the same decoded outputs as codec.DecodeOutput.

// needPython returns a Python 3 with numpy and msgpack: $KPCASTREAM_PYTHON,
// else the first of python3 in PATH and /usr/bin/python3 (Debian's, where
// python3-numpy and python3-msgpack install) that imports both. Without one
// the test fails in CI (CI=true: .ci/run installs them) and is skipped,
// loudly, elsewhere.
func needPython(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("KPCASTREAM_PYTHON")}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/bin/python3")
	for _, c := range cands {
		if c == "" {
			continue
		}
		if err := exec.Command(c, "-c", "import numpy, msgpack").Run(); err == nil {
			return c
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but no python3 with numpy and msgpack: the Python module's test needs them (.ci/run installs python3-numpy and python3-msgpack)")
	}
	t.Skip("SKIPPED: no python3 with numpy and msgpack, python/kpcastream.py is NOT tested; apt-get install -y python3-numpy python3-msgpack, or set KPCASTREAM_PYTHON")
	return ""
}

// runPython runs python/kpcastream.py with args and returns its stdout.
func runPython(t *testing.T, py string, args ...string) string {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join("..", "..", "python", "kpcastream.py")}, args...)...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("python kpcastream.py %s: %v\n%s", strings.Join(args, " "), err, se.String())
	}
	return so.String()
}

// readCSVFloats parses a CSV with a header into the header and rows of
// numbers (the columns from skip on).
func readCSVFloats(t *testing.T, what, s string, skip int) ([]string, [][]float64, [][]string) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("%s: %v (%d lines)\n%.500s", what, err, len(recs), s)
	}
	var rows [][]float64
	for _, r := range recs[1:] {
		v := make([]float64, len(r)-skip)
		for i := range v {
			if v[i], err = strconv.ParseFloat(r[i+skip], 64); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		rows = append(rows, v)
	}
	return recs[0], rows, recs[1:]
}

// close reports whether a and b agree to 1e-9 relative to the larger of
// their magnitude and scale (the largest value of the column: kernel sums
// of terms of both signs cancel to values far below the terms).
func closeTo(a, b, scale float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(scale, math.Max(math.Abs(a), math.Abs(b))))
}

// TestPythonProject trains models of every kernel on iris with replay
// (two with the classifier section of --label, one of them with the
// preprocess section of --standardize), applies each with
// "kpcastream project" and with the Python module to the same CSV, and
// compares projections and, for the classifier, the predictions and
// scores of learners.Model.Predict.
func TestPythonProject(t *testing.T) {
	py := needPython(t)
	iris := filepath.Join("..", "..", "testdata", "data", "iris.csv")
	dir := t.TempDir()
	type tc struct {
		name string
		args []string
	}
	cases := []tc{
		{"rbf-classifier", []string{"--kernel", "rbf", "--gamma", "0.5", "--label", "label", "--classes", "0,1,2"}},
		{"rbf-standardized-classifier", []string{"--kernel", "rbf", "--gamma", "0.5", "--label", "label", "--classes", "0,1,2", "--standardize"}},
		{"linear", []string{"--kernel", "linear", "--drop", "label"}},
		{"laplacian", []string{"--kernel", "laplacian", "--gamma", "0.3", "--drop", "label"}},
		{"poly", []string{"--kernel", "poly", "--gamma", "0.1", "--degree", "3", "--coef0", "1", "--drop", "label"}},
		{"sigmoid", []string{"--kernel", "sigmoid", "--gamma", "0.01", "--coef0", "-0.5", "--drop", "label"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := filepath.Join(dir, c.name+".json")
			args := append([]string{"replay", "--learner", "ikpca", "--components", "3", "--budget", "40", "--in", iris,
				"--model-out", model, "--progress", "0"}, c.args...)
			if code, _, stderr := runCmd(t, args...); code != 0 {
				t.Fatalf("replay exit %d: %s", code, stderr)
			}
			code, goOut, stderr := runCmd(t, "project", "--model", model, "--in", iris, "--drop", "label")
			if code != 0 {
				t.Fatalf("project exit %d: %s", code, stderr)
			}
			pyOut := runPython(t, py, "project", "--model", model, "--in", iris, "--drop", "label")
			sameCSV(t, goOut, pyOut)
			gh, gz, _ := readCSVFloats(t, "go project", goOut, 0)
			ph, pz, _ := readCSVFloats(t, "python project", pyOut, 0)
			if !reflect.DeepEqual(gh, ph) || len(gz) != 150 || len(pz) != len(gz) {
				t.Fatalf("headers %v and %v, %d and %d rows", gh, ph, len(gz), len(pz))
			}
			scale := make([]float64, len(gh))
			for _, r := range gz {
				for i, v := range r {
					scale[i] = math.Max(scale[i], math.Abs(v))
				}
			}
			worst := 0.0
			for i := range gz {
				for j := range gz[i] {
					if !closeTo(gz[i][j], pz[i][j], scale[j]) {
						t.Fatalf("row %d %s: go %v, python %v", i, gh[j], gz[i][j], pz[i][j])
					}
					worst = math.Max(worst, math.Abs(gz[i][j]-pz[i][j])/math.Max(1, scale[j]))
				}
			}
			t.Logf("%d rows × %d components agree, largest difference %.2g (relative to the column's scale)", len(gz), len(gh)-1, worst)

			b, err := os.ReadFile(model)
			if err != nil {
				t.Fatal(err)
			}
			m, err := codec.DecodeModel(b)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(c.name, "standardized") && m.Preprocess == nil {
				t.Fatal("replay --standardize wrote no preprocess section")
			}
			if m.Classifier == nil {
				if strings.HasSuffix(c.name, "classifier") {
					t.Fatal("replay --label wrote no classifier section")
				}
				return
			}
			// The same CSV as "kpcastream predict": the same header and
			// columns (issue 33 row 5: Python wrote row,pred,0,1,2), the
			// numbers to 1e-9 of their column's scale.
			code, goPred, stderr := runCmd(t, "predict", "--model", model, "--in", iris, "--drop", "label")
			if code != 0 {
				t.Fatalf("predict exit %d: %s", code, stderr)
			}
			recs := sameCSV(t, goPred, runPython(t, py, "predict", "--model", model, "--in", iris, "--drop", "label"))
			want := []string{"row", "z1", "z2", "z3", "pred"}
			for _, c := range m.Classifier.Classes {
				want = append(want, "score_"+c)
			}
			if !reflect.DeepEqual(recs[0], want) || len(recs) != 151 {
				t.Fatalf("predict header %v (want %v), %d rows", recs[0], want, len(recs)-1)
			}
			_, x, _ := readCSVFloats(t, "iris", mustRead(t, iris), 0)
			agree := 0
			for i, row := range x {
				s, best := m.Predict(row[:4])
				for j := range s {
					v, err := strconv.ParseFloat(recs[i+1][5+j], 64)
					if err != nil || !closeTo(s[j], v, 1) {
						t.Fatalf("row %d score %s: go %v, python %v", i, m.Classifier.Classes[j], s[j], recs[i+1][5+j])
					}
				}
				if recs[i+1][4] != m.Classifier.Classes[best] {
					t.Errorf("row %d: go predicts %s, python %s", i, m.Classifier.Classes[best], recs[i+1][4])
				}
				if fmt.Sprint(row[4]) == recs[i+1][4] {
					agree++
				}
			}
			if agree < 120 { // the classifier learned something: a check that the section is not trivially empty
				t.Errorf("the exported classifier predicts %d of 150 iris labels", agree)
			}
			t.Logf("classifier: 150 predictions and scores agree; %d of 150 match the labels", agree)
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPythonOutputs encodes outputs in both encodings (every optional
// field, large and tiny numbers, odd strings) plus codec's golden files and
// checks that the Python module decodes each as codec.DecodeOutput does.
func TestPythonOutputs(t *testing.T) {
	py := needPython(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	outs := []codec.Output{
		{ID: "a", Key: "k", Seq: 1, TS: 1.5, Z: []float64{1, -2}, SPE: 0.1, T2: 2, Explained: 0.9, BasisVersion: 3},
		{ID: "ünï \"q\"\n", Key: "vib.sensor-7", Seq: math.MaxUint32 + 7, TS: 1715000000.125, Z: []float64{1e-300, -3.5e-9, 2.5e21},
			SPE: r.Float64(), T2: r.Float64() * 1e6, Explained: 1, BasisVersion: 1 << 40,
			Y: codec.String("cat"), Pred: codec.String("dog"), Scores: []float64{0.25, -1.5},
			Meta: codec.Meta{{Key: "site", Value: codec.String("north")}, {Key: "n", Value: codec.Number(42)}, {Key: "ok", Value: codec.Bool(true)}}},
		{ID: "", Key: "x", Seq: 0, TS: 0, Z: make([]float64, 20), Y: codec.Number(2), Pred: codec.Number(1), Scores: []float64{0, 1, 0}},
	}
	var files []string
	for i := range outs {
		for _, enc := range []codec.Encoding{codec.JSON, codec.Msgpack} {
			b, err := codec.EncodeOutput(nil, enc, &outs[i])
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, fmt.Sprintf("out%d.%v", i, enc))
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	for _, g := range []string{"output_v1.json", "output_v1.msgpack"} {
		files = append(files, filepath.Join("..", "..", "codec", "testdata", g))
	}
	lines := strings.Split(strings.TrimSpace(runPython(t, py, append([]string{"decode"}, files...)...)), "\n")
	if len(lines) != len(files) {
		t.Fatalf("python decoded %d of %d files:\n%s", len(lines), len(files), strings.Join(lines, "\n"))
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		enc := codec.JSON
		if b[0] != '{' {
			enc = codec.Msgpack
		}
		out, err := codec.DecodeOutput(b, enc)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		gb, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := json.Unmarshal(gb, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("%s: python printed %q: %v", f, lines[i], err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s:\n go     %s\n python %s", filepath.Base(f), gb, lines[i])
		}
	}
	t.Logf("%d outputs (%d encoded here in both encodings, 2 golden) decode alike", len(files), 2*len(outs))
}

// TestReadmePython runs the README's Python example as written, from the
// repository root (python3 is the interpreter needPython found), and
// checks what it prints: the projection of iris, predictions of the
// classifier section, and both golden outputs decoded alike.
func TestReadmePython(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the README's commands through go run")
	}
	py := needPython(t)
	bin := t.TempDir()
	if err := os.Symlink(py, filepath.Join(bin, "python3")); err != nil {
		t.Fatal(err)
	}
	lines := readmeBlock(t, "## Python: models and outputs")
	if len(lines) != 2 || !strings.Contains(lines[0], " replay ") || !strings.HasPrefix(lines[1], "python3 python/example.py ") {
		t.Fatalf("the README's Python example is no longer a replay and python/example.py: %q", lines)
	}
	created(t, "iris-model.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	if out, err := shell(ctx, lines[0], env).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}
	out, err := shell(ctx, lines[1], env).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", lines[1], err, out)
	}
	for _, want := range []string{"ikpca model, kernel rbf: 150 rows of 4 -> 3 components", "predicted classes of the first 5 rows: ['0', '0', '0', '0', '0']"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the example printed no %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "key vib.sensor-7 seq 1099511627776 z [ 1.25e-01 -3.50e-09  2.50e+21  0.00e+00] spe 0.0031"); n != 2 {
		t.Errorf("the example decoded the golden outputs %d times alike, want 2:\n%s", n, out)
	}
}

// readCSVFile reads the CSV file at path whole.
func readCSVFile(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// column is the index of the column named name in a CSV header; the test
// fails without one (files are read by column name, as the README says:
// columns may be added at the end).
func column(t *testing.T, header []string, name string) int {
	t.Helper()
	i := slices.Index(header, name)
	if i < 0 {
		t.Fatalf("no column %q in header %q", name, header)
	}
	return i
}

// sameCSV checks that the CSV python wrote has the layout of the one Go
// wrote: the same header, rows and columns, the same text in each cell
// that is no number and numbers that agree to 1e-9 of their column's
// largest magnitude; it returns python's records.
func sameCSV(t *testing.T, goOut, pyOut string) [][]string {
	t.Helper()
	g, err := csv.NewReader(strings.NewReader(goOut)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	p, err := csv.NewReader(strings.NewReader(pyOut)).ReadAll()
	if err != nil {
		t.Fatalf("python's CSV: %v", err)
	}
	if len(g) == 0 || len(p) != len(g) || !reflect.DeepEqual(g[0], p[0]) {
		t.Fatalf("python's CSV has header %v and %d lines, Go's %v and %d", p[0], len(p), g[0], len(g))
	}
	scale := make([]float64, len(g[0]))
	for _, r := range g[1:] {
		for j, c := range r {
			if v, err := strconv.ParseFloat(c, 64); err == nil {
				scale[j] = math.Max(scale[j], math.Abs(v))
			}
		}
	}
	for i := 1; i < len(g); i++ {
		if len(p[i]) != len(g[i]) {
			t.Fatalf("line %d: python %d cells, Go %d", i+1, len(p[i]), len(g[i]))
		}
		for j := range g[i] {
			gv, gerr := strconv.ParseFloat(g[i][j], 64)
			pv, perr := strconv.ParseFloat(p[i][j], 64)
			switch {
			case gerr != nil || perr != nil:
				if g[i][j] != p[i][j] {
					t.Fatalf("line %d column %s: go %q, python %q", i+1, g[0][j], g[i][j], p[i][j])
				}
			case !closeTo(gv, pv, scale[j]):
				t.Fatalf("line %d column %s: go %s, python %s", i+1, g[0][j], g[i][j], p[i][j])
			}
		}
	}
	return p
}

// TestPythonPackage installs python/ as a package ("pip install ./python",
// into a venv that sees the system's numpy and msgpack, with --no-index:
// nothing is downloaded) and runs its kpcastream-py entry point: the same
// CSV as "kpcastream project" (issue 33 item 4).
func TestPythonPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a venv and installs python/ into it")
	}
	py := needPython(t)
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s -m venv fails (.ci/run installs python3-venv): %v\n%s", py, err, out)
		}
		t.Skipf("SKIPPED: %s -m venv fails (apt-get install python3-venv): %v\n%s", py, err, out)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", filepath.Join("..", "..", "python"))
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install --no-index ./python: %v\n%s", err, out)
	}
	iris := filepath.Join("..", "..", "testdata", "data", "iris.csv")
	model := filepath.Join(dir, "model.json")
	if code, _, stderr := runCmd(t, "replay", "--kernel", "rbf", "--gamma", "0.5", "--components", "3", "--budget", "40", "--in", iris,
		"--drop", "label", "--model-out", model, "--progress", "0"); code != 0 {
		t.Fatalf("replay: %d %s", code, stderr)
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	code, goOut, stderr := runCmd(t, "project", "--model", model, "--in", iris, "--drop", "label")
	if code != 0 {
		t.Fatalf("project: %d %s", code, stderr)
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "kpcastream-py"), "project", "--model", model, "--in", abs(iris), "--drop", "label")
	cmd.Dir = dir // not python/: the installed module runs
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("kpcastream-py project: %v\n%s", err, se.String())
	}
	sameCSV(t, goOut, so.String())
	where, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import kpcastream; print(kpcastream.__file__)").Output()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(where)), venv) {
		t.Errorf("the venv imports kpcastream from %q (%v), want the installed package", where, err)
	}
}
