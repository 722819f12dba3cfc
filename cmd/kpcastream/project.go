package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/internal/csvin"
)

func init() {
	commands["project"] = command{summary: "apply a model export to a CSV file: one projection per row", run: runProject}
	commands["predict"] = command{summary: "apply a model export's classifier section to a CSV file (project --classify)",
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runProject(ctx, append([]string{"--classify"}, args...), stdout, stderr)
		}}
}

// exportedModel is the model export as any program reads it: plain JSON
// (README, "The model export format").
type exportedModel struct {
	Format string `json:"format"`
	Kernel struct {
		Name   string   `json:"name"`
		Gamma  *float64 `json:"gamma"`
		Degree *int     `json:"degree"`
		Coef0  *float64 `json:"coef0"`
	} `json:"kernel"`
	Points       [][]float64 `json:"points"`
	Coefficients [][]float64 `json:"coefficients"`
	Offsets      []float64   `json:"offsets"`
	// Preprocess, when present, applies to the raw row first:
	// x'ⱼ = (xⱼ − mean[j]) / scale[j].
	Preprocess *struct {
		Standardize *struct {
			Mean  []float64 `json:"mean"`
			Scale []float64 `json:"scale"`
		} `json:"standardize"`
	} `json:"preprocess"`
	// Classifier, when present: score of class c is
	// Σⱼ alpha[j][c]·k(points[j], x') + bias[c]; the prediction is the
	// class of the largest score (the first on ties).
	Classifier *struct {
		Classes []string    `json:"classes"`
		Alpha   [][]float64 `json:"alpha"`
		Bias    []float64   `json:"bias"`
	} `json:"classifier"`
}

// readExport reads and checks a model export: its format, kernel, and that
// the arrays agree (p points of d values, p rows of k coefficients, k offsets).
func readExport(path string) (*exportedModel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m exportedModel
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: not a model export: %w", path, err)
	}
	if m.Format != "kpcastream.model/v1" {
		return nil, fmt.Errorf("%s: format %q, want kpcastream.model/v1", path, m.Format)
	}
	k := len(m.Offsets)
	if len(m.Points) == 0 || len(m.Points) != len(m.Coefficients) || k == 0 {
		return nil, fmt.Errorf("%s: %d points, %d coefficient rows, %d offsets: want p ≥ 1 of each, and k ≥ 1 offsets", path, len(m.Points), len(m.Coefficients), k)
	}
	d := len(m.Points[0])
	for j := range m.Points {
		if len(m.Points[j]) != d || len(m.Coefficients[j]) != k {
			return nil, fmt.Errorf("%s: point %d has %d values and %d coefficients, want %d and %d", path, j, len(m.Points[j]), len(m.Coefficients[j]), d, k)
		}
	}
	if pp := m.Preprocess; pp != nil {
		st := pp.Standardize
		if st == nil || len(st.Mean) != d || len(st.Scale) != d {
			return nil, fmt.Errorf("%s: preprocess.standardize needs mean and scale of %d values", path, d)
		}
		for j, v := range st.Scale {
			if !(v > 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: preprocess.standardize.scale[%d] is %v, want > 0", path, j, v)
			}
		}
	}
	if c := m.Classifier; c != nil {
		if len(c.Classes) < 2 || len(c.Alpha) != len(m.Points) || len(c.Bias) != len(c.Classes) {
			return nil, fmt.Errorf("%s: classifier has %d classes, %d alpha rows and %d biases, want ≥ 2, %d and one per class", path, len(c.Classes), len(c.Alpha), len(c.Bias), len(m.Points))
		}
		for j, a := range c.Alpha {
			if len(a) != len(c.Classes) {
				return nil, fmt.Errorf("%s: classifier alpha row %d has %d values, want %d", path, j, len(a), len(c.Classes))
			}
		}
	}
	kn := m.Kernel
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s: kernel %s needs %s", path, kn.Name, what)
		}
		return nil
	}
	switch kn.Name {
	case "linear":
	case "rbf", "laplacian":
		err = need(kn.Gamma != nil, "gamma")
	case "poly":
		err = errors.Join(need(kn.Gamma != nil, "gamma"), need(kn.Degree != nil, "degree"), need(kn.Coef0 != nil, "coef0"))
	case "sigmoid":
		err = errors.Join(need(kn.Gamma != nil, "gamma"), need(kn.Coef0 != nil, "coef0"))
	default:
		err = fmt.Errorf("%s: unknown kernel %q", path, kn.Name)
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// kernel is k(p, x) with scikit-learn's definitions, written out.
func (m *exportedModel) kernel(p, x []float64) float64 {
	dot, sq, abs := 0.0, 0.0, 0.0
	for i := range p {
		dot += p[i] * x[i]
		d := p[i] - x[i]
		sq += d * d
		abs += math.Abs(d)
	}
	kn := m.Kernel
	switch kn.Name {
	case "rbf":
		return math.Exp(-*kn.Gamma * sq)
	case "laplacian":
		return math.Exp(-*kn.Gamma * abs)
	case "poly":
		return math.Pow(*kn.Gamma*dot+*kn.Coef0, float64(*kn.Degree))
	case "sigmoid":
		return math.Tanh(*kn.Gamma*dot + *kn.Coef0)
	}
	return dot // linear
}

// preprocess writes the preprocessed x into dst and returns it (x itself
// without a preprocess section).
func (m *exportedModel) preprocess(dst, x []float64) []float64 {
	if m.Preprocess == nil {
		return x
	}
	st := m.Preprocess.Standardize
	for j, v := range x {
		dst[j] = (v - st.Mean[j]) / st.Scale[j]
	}
	return dst
}

// classify writes the class scores of the preprocessed x into s and
// returns the index of the predicted class.
func (m *exportedModel) classify(s, x []float64) int {
	c := m.Classifier
	copy(s, c.Bias)
	for j, p := range m.Points {
		kv := m.kernel(p, x)
		for i, a := range c.Alpha[j] {
			s[i] += a * kv
		}
	}
	best := 0
	for i, v := range s {
		if v > s[best] {
			best = i
		}
	}
	return best
}

// project writes component i of x into z: Σⱼ coefficients[j][i]·k(points[j], x) − offsets[i].
func (m *exportedModel) project(z, x []float64) {
	for i := range z {
		z[i] = -m.Offsets[i]
	}
	for j, p := range m.Points {
		kv := m.kernel(p, x)
		for i, c := range m.Coefficients[j] {
			z[i] += c * kv
		}
	}
}

// runProject is "kpcastream project --model model.json --in data.csv
// [--out FILE] [--drop a,b] [--id-column C] [--classify]": one CSV line
// per data row, "row,z1,…,zk" (with the id column first when --id-column
// is given; with --classify, or as "kpcastream predict", followed by
// "pred" and one "score_<class>" per class), after the export's
// preprocess section when it has one, by
// the arithmetic of the README's model export section — the same that any
// other program applying an export does.
func runProject(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("project", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelPath := fs.String("model", "", "model export (JSON, as written by replay --model-out or the model endpoint) (required)")
	inPath := fs.String("in", "", "input CSV file (- for stdin; a non-numeric first row is a header) (required)")
	outPath := fs.String("out", "", "output CSV file (default stdout)")
	idCol := fs.String("id-column", "", "column holding each row's id, written first (header name or 0-based index)")
	classify := fs.Bool("classify", false, "also apply the export's classifier section: columns pred and one score_<class> per class after the projection")
	var drop []string
	fs.Func("drop", "comma-separated columns to ignore, by header name or 0-based index (e.g. label)", func(s string) error {
		for _, c := range strings.Split(s, ",") {
			if c = strings.TrimSpace(c); c != "" {
				drop = append(drop, c)
			}
		}
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if missingFlags(stderr, fs, "usage: kpcastream project --model model.json --in data.csv [--out FILE] [--drop a,b] [--id-column C] [--classify]", "model", "in") {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: kpcastream project --model model.json --in data.csv [--out FILE] [--drop a,b] [--id-column C] [--classify]")
		fs.PrintDefaults()
		return errUsage
	}
	m, err := readExport(*modelPath)
	if err != nil {
		return err
	}
	if *classify && m.Classifier == nil {
		return fmt.Errorf("%s has no classifier section (written by replay --label or a pipeline with a classifier stage)", *modelPath)
	}
	in, name, closeIn, err := openInput(*inPath)
	if err != nil {
		return err
	}
	defer closeIn()
	cr, err := csvin.NewReader(bufio.NewReaderSize(in, 1<<20), csvin.Options{Name: name, Drop: drop, ID: *idCol, HeaderOptional: true})
	if err != nil {
		return err
	}
	if d := len(m.Points[0]); cr.Dim() != d {
		return fmt.Errorf("%s has %d columns after --drop/--id-column, the model %d (columns %s)", name, cr.Dim(), d, strings.Join(cr.Header(), ","))
	}
	out := stdout
	var f *os.File
	if *outPath != "" && *outPath != "-" {
		if f, err = os.Create(*outPath); err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	if err := writeProjections(out, m, cr, *idCol != "", *classify); err != nil {
		return err
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

// writeProjections writes the header and one line per row of cr to out:
// the id (withID), the row, z1…zk and, with classify, the prediction and
// one score per class.
func writeProjections(out io.Writer, m *exportedModel, cr *csvin.Reader, withID, classify bool) error {
	d, k := len(m.Points[0]), len(m.Offsets)
	w := bufio.NewWriterSize(out, 1<<16)
	if withID {
		w.WriteString("id,")
	}
	w.WriteString("row")
	for i := range k {
		fmt.Fprintf(w, ",z%d", i+1)
	}
	var scores []float64
	if classify {
		w.WriteString(",pred")
		for _, c := range m.Classifier.Classes {
			w.WriteString("," + csvField("score_"+c))
		}
		scores = make([]float64, len(m.Classifier.Classes))
	}
	w.WriteByte('\n')
	x, z, xs := make([]float64, d), make([]float64, k), make([]float64, d)
	var line []byte
	for row := 0; ; row++ {
		var id string
		var err error
		x, id, err = cr.Next(x)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		xp := m.preprocess(xs, x)
		m.project(z, xp)
		line = line[:0]
		if withID {
			line = append(line, csvField(id)...)
			line = append(line, ',')
		}
		line = strconv.AppendInt(line, int64(row), 10)
		for _, v := range z {
			line = append(line, ',')
			line = strconv.AppendFloat(line, v, 'g', -1, 64)
		}
		if scores != nil {
			pred := m.classify(scores, xp)
			line = append(line, ',')
			line = append(line, csvField(m.Classifier.Classes[pred])...)
			for _, v := range scores {
				line = append(line, ',')
				line = strconv.AppendFloat(line, v, 'g', -1, 64)
			}
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return w.Flush()
}

// csvField quotes s for CSV when it needs quoting.
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\n\r") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
