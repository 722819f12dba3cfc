package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeGaussCSV writes n rows of d Gaussian columns with a header.
func writeGaussCSV(t *testing.T, path string, n, d int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for j := range d {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "c%d", j)
	}
	b.WriteByte('\n')
	for range n {
		for j := range d {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(rng.NormFloat64()*(1+0.3*float64(j)), 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readProj returns the z columns of a projections file, row-major.
func readProj(t *testing.T, path string, k int) []float64 {
	t.Helper()
	recs := readCSVFile(t, path)
	var z []float64
	for _, r := range recs[1:] {
		for i := range k {
			v, err := strconv.ParseFloat(r[2+i], 64)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			z = append(z, v)
		}
	}
	return z
}

// TestReplayBatchSolvers: --solver fast (exact poly features) and --solver
// dense give the same projections of every row, up to one sign per
// component, and the fit line names the solver and product.
func TestReplayBatchSolvers(t *testing.T) {
	const n, d, k = 600, 4, 3
	dir := t.TempDir()
	data := filepath.Join(dir, "x.csv")
	writeGaussCSV(t, data, n, d, 7)
	var z [][]float64
	for _, solver := range []string{"fast", "dense"} {
		proj := filepath.Join(dir, solver+".csv")
		code, _, stderr := runCmd(t, "replay", "--learner", "batch", "--kernel", "poly", "--coef0", "1",
			"--components", strconv.Itoa(k), "--solver", solver, "--in", data, "--out", proj,
			"--model-out", filepath.Join(dir, solver+".json"), "--progress", "0")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", solver, code, stderr)
		}
		want := map[string]string{"fast": "solver fast, product features (exact)", "dense": "solver dense, product gram (exact)"}[solver]
		if !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", solver, want, stderr)
		}
		z = append(z, readProj(t, proj, k))
	}
	for c := range k {
		var dp, big float64
		for j := range n {
			dp += z[0][j*k+c] * z[1][j*k+c]
			big = math.Max(big, math.Abs(z[1][j*k+c]))
		}
		s := math.Copysign(1, dp)
		var worst float64
		for j := range n {
			worst = math.Max(worst, math.Abs(s*z[0][j*k+c]-z[1][j*k+c]))
		}
		if !(worst <= 1e-8*big) {
			t.Errorf("component %d: fast and dense projections differ by %.3g (largest %.3g)", c, worst, big)
		}
	}
}

func TestReplayBatchSolverFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	os.WriteFile(good, []byte("a,b\n1,2\n3,4\n5,7\n"), 0o644)
	model := filepath.Join(dir, "m.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad_solver", []string{"--learner", "batch", "--solver", "gpu"}, `--solver must be auto, dense, lanczos or fast, got "gpu"`},
		{"zero_precision", []string{"--learner", "batch", "--precision", "0"}, "--precision must be in (0, 0.1], got 0"},
		{"big_precision", []string{"--learner", "batch", "--precision", "0.5"}, "--precision must be in (0, 0.1], got 0.5"},
		{"nan_precision", []string{"--learner", "batch", "--precision", "NaN"}, "--precision must be in (0, 0.1], got NaN"},
		{"solver_not_batch", []string{"--learner", "ikpca", "--solver", "fast"}, "--solver and --precision apply to --learner batch only"},
		{"precision_not_batch", []string{"--learner", "kha", "--precision", "1e-3"}, "--solver and --precision apply to --learner batch only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"replay", "--in", good, "--model-out", model}, tc.args...)
			code, _, stderr := runCmd(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Errorf("a refused replay left a model file: %v", err)
	}
}

// TestReplayBatchFastRBF: --solver fast with an rbf kernel wide enough for
// the expansion fits through it (the fit line states the bound) and its
// projections of every row stay close to the dense solver's.
func TestReplayBatchFastRBF(t *testing.T) {
	const n, d, k = 600, 2, 2
	dir := t.TempDir()
	data := filepath.Join(dir, "x.csv")
	writeGaussCSV(t, data, n, d, 9)
	var z [][]float64
	for _, solver := range []string{"fast", "dense"} {
		proj := filepath.Join(dir, solver+".csv")
		code, _, stderr := runCmd(t, "replay", "--learner", "batch", "--kernel", "rbf", "--gamma", "0.05",
			"--components", strconv.Itoa(k), "--solver", solver, "--precision", "1e-5", "--in", data, "--out", proj,
			"--model-out", filepath.Join(dir, solver+".json"), "--progress", "0")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", solver, code, stderr)
		}
		if solver == "fast" && !strings.Contains(stderr, "product ifgt (approximate: each covariance eigenvalue within 1e-05)") {
			t.Errorf("fast: stderr lacks the ifgt fit line:\n%s", stderr)
		}
		z = append(z, readProj(t, proj, k))
	}
	for c := range k {
		var big, worst float64
		for j := range n {
			big = math.Max(big, math.Abs(z[1][j*k+c]))
			worst = math.Max(worst, math.Abs(math.Abs(z[0][j*k+c])-math.Abs(z[1][j*k+c])))
		}
		if !(worst <= 1e-3*big) {
			t.Errorf("component %d: |projections| of fast and dense differ by %.3g (largest %.3g)", c, worst, big)
		}
	}
}
