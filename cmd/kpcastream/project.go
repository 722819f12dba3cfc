package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/internal/csvin"
	"github.com/kpcastream/kpcastream/internal/modelexport"
)

func init() {
	commands["project"] = command{summary: "apply a model export to a CSV file: one projection per row", run: runProject}
	commands["predict"] = command{summary: "apply a model export's classifier section to a CSV file (project --classify)",
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return runProject(ctx, append([]string{"--classify"}, args...), stdout, stderr)
		}}
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
	m, err := modelexport.Read(*modelPath)
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
func writeProjections(out io.Writer, m *modelexport.Model, cr *csvin.Reader, withID, classify bool) error {
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
		xp := m.Prepare(xs, x)
		m.Project(z, xp)
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
			pred := m.Classify(scores, xp)
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
