package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/csvin"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
)

// labelOptions are the flags of replay --label: a prequential run of the
// classifier stage over a labelled CSV file.
type labelOptions struct {
	column      string   // --label: the label column ("" = off)
	classes     []string // --classes: class order (default: the labels found, sorted)
	standardize bool     // --standardize: z-score the feature columns over the file
	ridge       float64  // --ridge
	forget      float64  // --classifier-forget
	on          string   // --classify-on: coords (basis-aware) or z (the published components)
}

// labelFlags registers the flags of replay --label on fs.
func labelFlags(fs *flag.FlagSet, o *labelOptions) {
	fs.StringVar(&o.column, "label", "", "label column (header name or 0-based index): run the classifier stage prequentially, print its accuracy, write predictions to --out (ikpca)")
	fs.Func("classes", "with --label: comma-separated class names, the order of the scores (default: the labels in the file, sorted)", func(s string) error {
		o.classes = strings.Split(s, ",")
		return nil
	})
	fs.BoolVar(&o.standardize, "standardize", false, "scale every feature column to mean 0 and standard deviation 1: running statistics of the learned rows (with --label: over the whole file first); recorded in the model export's preprocess section")
	fs.Float64Var(&o.ridge, "ridge", 0, "with --label: classifier ridge λ (default 0.1)")
	fs.Float64Var(&o.forget, "classifier-forget", 0, "with --label: classifier forgetting factor in (0,1] (default 1)")
	fs.StringVar(&o.on, "classify-on", "coords", "with --label: coords (the learner's dictionary coordinates, basis-aware) or z (the published components, as a consumer of the outputs sees them; for comparison)")
}

// labelProblems checks the --label flags against the others.
func labelProblems(o *replayOptions) []string {
	var p []string
	if o.label.column == "" {
		if o.label.classes != nil || o.label.ridge != 0 || o.label.forget != 0 || o.label.on != "coords" {
			p = append(p, "--classes, --ridge, --classifier-forget and --classify-on need --label")
		}
		return p
	}
	if o.learner != learners.KindIKPCA && o.learner != learners.KindKHA {
		p = append(p, fmt.Sprintf("--label needs --learner ikpca or kha (their dictionary coordinates), got %q", o.learner))
	}
	if len(o.modelAt) > 0 {
		p = append(p, "--model-at is not available with --label")
	}
	if o.label.on != "coords" && o.label.on != "z" {
		p = append(p, fmt.Sprintf("--classify-on must be coords or z, got %q", o.label.on))
	}
	if slices.Contains(o.drop, o.label.column) {
		p = append(p, fmt.Sprintf("--label column %q is also in --drop", o.label.column))
	}
	return p
}

// replayLabelled runs the classifier stage prequentially over a labelled
// file, as a pipeline does per message: the learner learns x, the
// classifier predicts x's class, then learns its label (rows with an empty
// label are only predicted). It prints the prequential accuracy over the
// whole stream and over its last half on stdout, writes one line per fed
// row to --out (row, pass, label, pred, correct, one score per class) and
// the model export with its classifier section to --model-out.
func replayLabelled(ctx context.Context, o *replayOptions, stdout, stderr io.Writer) error {
	in, name, closeIn, err := openInput(o.in)
	if err != nil {
		return err
	}
	defer closeIn()
	cr, err := csvin.NewReader(bufio.NewReaderSize(in, 1<<20), csvin.Options{Name: name, Drop: o.drop, ID: o.label.column})
	if err != nil {
		return err
	}
	d := cr.Dim()
	var x []float64
	var labels []string
	row := make([]float64, d)
	for {
		r, lab, err := cr.Next(row)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		x = append(x, r...)
		labels = append(labels, strings.TrimSpace(lab))
	}
	n := len(labels)
	if n == 0 {
		return fmt.Errorf("%s: no data rows", name)
	}
	classes := o.label.classes
	if classes == nil {
		classes = labelClasses(labels)
	}
	index := make(map[string]int, len(classes))
	for i, c := range classes {
		if _, dup := index[c]; dup || c == "" {
			return fmt.Errorf("--classes: class %q is empty or repeated", c)
		}
		index[c] = i
	}
	if len(classes) < 2 {
		return fmt.Errorf("%s: the label column holds %d class(es), a classifier needs at least 2", name, len(classes))
	}
	ys := make([]int, n)
	for i, lab := range labels {
		ys[i] = -1
		if lab == "" {
			continue
		}
		c, ok := index[lab]
		if !ok {
			return fmt.Errorf("%s: data row %d: label %q is not one of --classes (%s)", name, i, lab, strings.Join(classes, ","))
		}
		ys[i] = c
	}
	var pre *learners.ModelPreprocess
	if o.label.standardize {
		mean, sd := standardize(x, n, d)
		// The export's preprocess section records it, so that project,
		// predict and the numpy applier apply it to raw rows.
		pre = &learners.ModelPreprocess{Mean: mean, Scale: sd}
		fmt.Fprintf(stderr, "replay: --standardize: the model export's preprocess section holds mean %v and std %v\n", mean, sd)
	}
	cfg := o.learnerConfig(d)
	l, err := learners.New(cfg)
	if err != nil {
		return fmt.Errorf("learner settings: %w", err)
	}
	basis, ok := l.(classify.Basis)
	if !ok {
		return fmt.Errorf("learner %q has no dictionary coordinates for the classifier", l.Kind())
	}
	ccfg := classify.Config{Classes: len(classes), Ridge: o.label.ridge, Forget: o.label.forget}
	ob, err := classify.NewOnBasis(basis, ccfg)
	if err != nil {
		return fmt.Errorf("classifier settings: %w", err)
	}
	var onZ *classify.Classifier
	if o.label.on == "z" {
		ccfg.Dim = o.components
		if onZ, err = classify.New(ccfg); err != nil {
			return fmt.Errorf("classifier settings: %w", err)
		}
	}
	var out *predWriter
	if o.out != "" {
		if out, err = newPredWriter(o.out, classes); err != nil {
			return err
		}
		defer out.Close()
	}
	total := n * o.passes
	var fed, hits, labelled, lateHits, late int
	counts := make([]int, len(classes)) // labelled rows per class
	correct := make([]int, len(classes))
	scores := make([]float64, len(classes))
	z := make([]float64, o.components)
	prog := newProgress(stderr, o.progressEvery)
	err = o.eachRow(ctx, n, func(idx, pass int) error {
		xi, y := x[idx*d:(idx+1)*d], ys[idx]
		pred := -1
		if onZ == nil {
			if err := ob.Learn(xi); err != nil {
				return fmt.Errorf("row %d: %w", idx, err)
			}
			if pred, _, err = ob.Predict(scores, xi); err != nil {
				return fmt.Errorf("row %d: %w", idx, err)
			}
			if y >= 0 {
				if err := ob.Teach(y); err != nil {
					return fmt.Errorf("row %d: %w", idx, err)
				}
			}
		} else {
			if err := l.Learn(xi); err != nil {
				return fmt.Errorf("row %d: %w", idx, err)
			}
			clear(scores)
			if _, err := l.Transform(z, xi); err == nil {
				if pred, _, err = onZ.Predict(scores, z); err != nil {
					return fmt.Errorf("row %d: %w", idx, err)
				}
				if y >= 0 {
					if err := onZ.Learn(z, y); err != nil {
						return fmt.Errorf("row %d: %w", idx, err)
					}
				}
			} else if !errors.Is(err, learners.ErrNotReady) {
				return fmt.Errorf("row %d: %w", idx, err)
			}
		}
		if y >= 0 {
			labelled++
			counts[y]++
			if pred == y {
				hits++
				correct[y]++
			}
			if fed >= total/2 {
				late++
				if pred == y {
					lateHits++
				}
			}
		}
		fed++
		if out != nil {
			if err := out.Write(idx, pass, labels[idx], classes, pred, y, scores); err != nil {
				return err
			}
		}
		prog.Update(int64(fed), l)
		return nil
	})
	if err != nil {
		return err
	}
	prog.Done(int64(fed), l)
	if out != nil {
		if err := out.Close(); err != nil {
			return err
		}
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return math.NaN()
		}
		return float64(a) / float64(b)
	}
	fmt.Fprintf(stdout, "replay: prequential accuracy %.4f over %d labelled rows; last half of the stream %.4f over %d (classifier on %s, %d classes, %s × %s)\n",
		ratio(hits, labelled), labelled, ratio(lateHits, late), late, o.label.on, len(classes), plural(n, "row"), plural(o.passes, "pass"))
	var per []string
	for c, name := range classes {
		per = append(per, fmt.Sprintf("%s %d/%d", name, correct[c], counts[c]))
	}
	fmt.Fprintf(stdout, "replay: correct/labelled per class: %s\n", strings.Join(per, ", "))
	return writeLabelledModel(l, ob, classes, o.label.on == "coords", pre, o.modelOut)
}

// labelClasses returns the distinct non-empty labels, sorted numerically
// when all are numbers, else as strings.
func labelClasses(labels []string) []string {
	seen := map[string]bool{}
	var cs []string
	numeric := true
	for _, l := range labels {
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		cs = append(cs, l)
		if _, err := strconv.ParseFloat(l, 64); err != nil {
			numeric = false
		}
	}
	if numeric {
		slices.SortFunc(cs, func(a, b string) int {
			fa, _ := strconv.ParseFloat(a, 64)
			fb, _ := strconv.ParseFloat(b, 64)
			switch {
			case fa < fb:
				return -1
			case fa > fb:
				return 1
			}
			return strings.Compare(a, b)
		})
	} else {
		slices.Sort(cs)
	}
	return cs
}

// standardize scales the columns of the n×d row-major x to mean 0 and
// (population) standard deviation 1 (a constant column is only centred)
// and returns the means and deviations used.
func standardize(x []float64, n, d int) (means, sds []float64) {
	for j := range d {
		var s float64
		for i := range n {
			s += x[i*d+j]
		}
		mean := s / float64(n)
		var s2 float64
		for i := range n {
			v := x[i*d+j] - mean
			s2 += v * v
		}
		sd := math.Sqrt(s2 / float64(n))
		if sd == 0 {
			sd = 1
		}
		for i := range n {
			x[i*d+j] = (x[i*d+j] - mean) / sd
		}
		means, sds = append(means, mean), append(sds, sd)
	}
	return means, sds
}

// writeLabelledModel writes the learner's model export (synced on a copy,
// as writeModel does) with the classifier section when the classifier ran
// on the coordinates (withClassifier).
func writeLabelledModel(l learners.Learner, ob *classify.OnBasis, classes []string, withClassifier bool, pre *learners.ModelPreprocess, path string) error {
	c, err := learners.Restore(l.State())
	if err != nil {
		return fmt.Errorf("model export: %w", err)
	}
	if s, ok := c.(syncer); ok {
		if err := s.Sync(100); err != nil {
			return fmt.Errorf("model export: %w", err)
		}
	}
	m, err := c.Model()
	if err != nil {
		return fmt.Errorf("model export: %w", err)
	}
	if withClassifier {
		if m.Classifier, err = ob.Export(classes); err != nil {
			return fmt.Errorf("model export: %w", err)
		}
	}
	m.Preprocess = pre
	b, err := codec.EncodeModel(m)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// predWriter writes one CSV line per fed row: row, pass, label, pred,
// correct (1, 0, or empty for an unlabelled row), then one score per class
// (empty before the classifier can predict).
type predWriter struct{ csvOut }

func newPredWriter(path string, classes []string) (*predWriter, error) {
	c, err := createCSV(path)
	if err != nil {
		return nil, err
	}
	p := &predWriter{c}
	p.w.WriteString("row,pass,label,pred,correct")
	for _, c := range classes {
		p.w.WriteString(",score_" + csvField(c))
	}
	p.w.WriteString("\n")
	return p, nil
}

func (p *predWriter) Write(idx, pass int, label string, classes []string, pred, y int, scores []float64) error {
	b := p.buf[:0]
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pass), 10)
	b = append(b, ',')
	b = append(b, csvField(label)...)
	b = append(b, ',')
	if pred >= 0 {
		b = append(b, csvField(classes[pred])...)
	}
	b = append(b, ',')
	switch {
	case y < 0:
	case pred == y:
		b = append(b, '1')
	default:
		b = append(b, '0')
	}
	for _, v := range scores {
		b = append(b, ',')
		if pred >= 0 {
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return p.line(b)
}
