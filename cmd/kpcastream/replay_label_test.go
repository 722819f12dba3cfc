package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// replay --label on wine (3 passes): prints the prequential accuracy over
// the whole stream and its last half, writes one prediction line per fed
// row, and exports the model with a classifier section that, applied on
// its own to the standardised rows, classifies them.
func TestReplayLabel(t *testing.T) {
	data := filepath.Join("..", "..", "testdata", "data", "wine.csv")
	dir := t.TempDir()
	model, preds := filepath.Join(dir, "model.json"), filepath.Join(dir, "pred.csv")
	code, stdout, stderr := runCmd(t, "replay", "--in", data, "--label", "label", "--standardize", "--components", "16",
		"--budget", "200", "--gamma", "0.02", "--passes", "3", "--shuffle-seed", "1", "--progress", "0",
		"--out", preds, "--model-out", model)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	m := regexp.MustCompile(`prequential accuracy ([0-9.]+) over 534 labelled rows; last half of the stream ([0-9.]+) over 267`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no accuracy line in stdout:\n%s", stdout)
	}
	all, _ := strconv.ParseFloat(m[1], 64)
	last, _ := strconv.ParseFloat(m[2], 64)
	if all < 0.9 || last < 0.95 {
		t.Errorf("wine accuracy %v (last half %v), want ≥ 0.9 (≥ 0.95)", all, last)
	}
	recs := readCSVFile(t, preds)
	if len(recs) != 1+534 || strings.Join(recs[0], ",") != "row,pass,label,pred,correct,score_0,score_1,score_2" {
		t.Fatalf("predictions: %d lines, header %v", len(recs), recs[0])
	}
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := codec.DecodeModel(raw)
	if err != nil {
		t.Fatal(err)
	}
	if mod.Classifier == nil || strings.Join(mod.Classifier.Classes, ",") != "0,1,2" {
		t.Fatalf("model export has no classifier section for classes 0,1,2: %+v", mod.Classifier)
	}
	x, n, d, _, err := learnertest.LoadCSV(data, []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	// The export's preprocess section carries the standardisation: the
	// model applies to the raw rows.
	if mod.Preprocess == nil || len(mod.Preprocess.Mean) != d {
		t.Fatalf("model export has no preprocess section of %d variables: %+v", d, mod.Preprocess)
	}
	hits := 0
	for i := range n {
		_, pred := mod.Predict(x[i*d : (i+1)*d])
		if mod.Classifier.Classes[pred] == recsLabel(t, data, i) {
			hits++
		}
	}
	if acc := float64(hits) / float64(n); acc < 0.95 {
		t.Errorf("the exported classifier classifies %.3f of the rows, want ≥ 0.95", acc)
	}
	// Bad flags are usage errors naming the problem.
	for _, args := range [][]string{
		{"--learner", "window", "--label", "label"},
		{"--label", "label", "--classify-on", "x"},
		{"--standardize", "--warmup", "400"}, // holds back 200 rows of 178 (the default warm-up, at most 200, holds 100)
		{"--label", "label", "--drop", "label"},
		{"--label", "label", "--classifier-loss", "logistic"},
		{"--classifier-loss", "hinge"}, // needs --label
	} {
		full := append([]string{"replay", "--in", data, "--model-out", model}, args...)
		if code, _, stderr := runCmd(t, full...); code == 0 || !strings.Contains(stderr, "kpcastream replay:") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}

// replay --label --classifier-loss hinge runs the stage with the hinge
// loss: the same accuracy line, a different model export (the weights
// differ), and on wine one pass is as good as the squared loss's to two
// rows.
func TestReplayLabelHinge(t *testing.T) {
	data := filepath.Join("..", "..", "testdata", "data", "wine.csv")
	dir := t.TempDir()
	accs, models := map[string]float64{}, map[string]string{}
	for _, loss := range []string{"squared", "hinge"} {
		model := filepath.Join(dir, loss+".json")
		code, stdout, stderr := runCmd(t, "replay", "--in", data, "--label", "label", "--standardize", "--components", "16",
			"--budget", "200", "--shuffle-seed", "1", "--progress", "0", "--classifier-loss", loss, "--model-out", model)
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr:\n%s", loss, code, stderr)
		}
		m := regexp.MustCompile(`prequential accuracy ([0-9.]+) over 178 labelled rows`).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("%s: no accuracy line in stdout:\n%s", loss, stdout)
		}
		accs[loss], _ = strconv.ParseFloat(m[1], 64)
		raw, err := os.ReadFile(model)
		if err != nil {
			t.Fatal(err)
		}
		models[loss] = string(raw)
	}
	if models["squared"] == models["hinge"] {
		t.Error("--classifier-loss hinge wrote the same model as squared: the flag did not reach the classifier")
	}
	if accs["hinge"] < accs["squared"]-2.0/178 || accs["hinge"] < 0.9 {
		t.Errorf("wine, one pass: hinge %.4f, squared %.4f; want hinge ≥ 0.9 and within two rows of squared", accs["hinge"], accs["squared"])
	}
}

// recsLabel returns the label of data row i of a CSV whose last column is the label.
func recsLabel(t *testing.T, path string, i int) string {
	t.Helper()
	recs := readCSVFile(t, path)
	r := recs[i+1]
	return r[len(r)-1]
}
