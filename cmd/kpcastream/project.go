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
// [--out FILE] [--drop a,b] [--id-column C]": one CSV line per data row,
// "row,z1,…,zk" (with the id column first when --id-column is given), by
// the arithmetic of the README's model export section — the same that any
// other program applying an export does.
func runProject(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("project", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelPath := fs.String("model", "", "model export (JSON, as written by replay --model-out or the model endpoint) (required)")
	inPath := fs.String("in", "", "input CSV file (- for stdin; a non-numeric first row is a header) (required)")
	outPath := fs.String("out", "", "output CSV file (default stdout)")
	idCol := fs.String("id-column", "", "column holding each row's id, written first (header name or 0-based index)")
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
	if missingFlags(stderr, fs, "usage: kpcastream project --model model.json --in data.csv [--out FILE] [--drop a,b] [--id-column C]", "model", "in") {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: kpcastream project --model model.json --in data.csv [--out FILE] [--drop a,b] [--id-column C]")
		fs.PrintDefaults()
		return errUsage
	}
	m, err := readExport(*modelPath)
	if err != nil {
		return err
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
	d, k := len(m.Points[0]), len(m.Offsets)
	if cr.Dim() != d {
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
	w := bufio.NewWriterSize(out, 1<<16)
	if *idCol != "" {
		w.WriteString("id,")
	}
	w.WriteString("row")
	for i := range k {
		fmt.Fprintf(w, ",z%d", i+1)
	}
	w.WriteByte('\n')
	x, z := make([]float64, d), make([]float64, k)
	var line []byte
	for row := 0; ; row++ {
		var id string
		x, id, err = cr.Next(x)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		m.project(z, x)
		line = line[:0]
		if *idCol != "" {
			line = append(line, csvField(id)...)
			line = append(line, ',')
		}
		line = strconv.AppendInt(line, int64(row), 10)
		for _, v := range z {
			line = append(line, ',')
			line = strconv.AppendFloat(line, v, 'g', -1, 64)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

// csvField quotes s for CSV when it needs quoting.
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\n\r") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
