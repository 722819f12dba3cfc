package replay

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/internal/csvin"
	"github.com/kpcastream/kpcastream/internal/words"
	"github.com/kpcastream/kpcastream/learners"
)

// runLabelled runs the classifier stage prequentially over a labelled
// file, as a pipeline does per message: the learner learns x, the
// classifier predicts x's class, then learns its label (rows with an empty
// label are only predicted). It prints the prequential accuracy over the
// whole stream and over its last half on stdout, writes one line per fed
// row to --out (row, pass, label, pred, correct, one score per class) and
// the model export with its classifier section to --model-out.
func runLabelled(ctx context.Context, c *Config, cr *csvin.Reader, name string, stdout, stderr io.Writer, hooks []Hook) error {
	src, err := readAll(cr, name, true)
	if err != nil {
		return err
	}
	src.passes, src.shuffle, src.seed = c.Passes, c.Shuffle, c.ShuffleSeed
	classes := c.Label.Classes
	if classes == nil {
		classes = labelClasses(src.cells)
	}
	ys, err := classIndices(name, src.cells, classes)
	if err != nil {
		return err
	}
	var pre *learners.ModelPreprocess
	if c.Label.Standardize {
		mean, sd := standardize(src.x, src.n, src.d)
		// The export's preprocess section records it, so that project,
		// predict and the numpy applier apply it to raw rows.
		pre = &learners.ModelPreprocess{Mean: mean, Scale: sd}
		fmt.Fprintf(stderr, "replay: --standardize: the model export's preprocess section holds mean %v and std %v\n", mean, sd)
	}
	m, err := newKeyModel(c, src.d, classes, pre, stderr)
	if err != nil {
		return err
	}
	acc := &accuracy{total: int64(src.n * c.Passes), ys: ys, counts: make([]int, len(classes)), correct: make([]int, len(classes))}
	rowHooks := []Hook{acc}
	if c.Out != "" {
		out, err := newPredWriter(c.Out, classes)
		if err != nil {
			return err
		}
		defer out.Close()
		rowHooks = append(rowHooks, HookFunc(func(_ learners.Learner, r *Row) error {
			return out.Write(r.Index, r.Pass, r.Cell, classes, r.Pred, r.Y, r.Scores)
		}))
		acc.out = out
	}
	prog := newProgress(stderr, c.Progress)
	rowHooks = append(append(rowHooks, prog), hooks...)
	if err := passLoop(ctx, src, m.l, m.labelStep(ys, len(classes)), rowHooks, true); err != nil {
		return err
	}
	prog.Done(prog.fed, m.l)
	if acc.out != nil {
		if err := acc.out.Close(); err != nil {
			return err
		}
	}
	acc.print(stdout, c, classes, src.n)
	return m.write(c.ModelOut)
}

// classIndices maps each row's label to its index in classes (−1 for an
// empty label), after checking classes.
func classIndices(name string, labels, classes []string) ([]int, error) {
	index := make(map[string]int, len(classes))
	for i, c := range classes {
		if _, dup := index[c]; dup || c == "" {
			return nil, fmt.Errorf("--classes: class %q is empty or repeated", c)
		}
		index[c] = i
	}
	if len(classes) < 2 {
		return nil, fmt.Errorf("%s: the label column holds %d class(es), a classifier needs at least 2", name, len(classes))
	}
	ys := make([]int, len(labels))
	for i, lab := range labels {
		ys[i] = -1
		if lab == "" {
			continue
		}
		c, ok := index[lab]
		if !ok {
			return nil, fmt.Errorf("%s: data row %d: label %q is not one of --classes (%s)", name, i, lab, strings.Join(classes, ","))
		}
		ys[i] = c
	}
	return ys, nil
}

// labelStep feeds a labelled row: the learner learns it, the classifier
// predicts its class, then learns its label (if it has one).
func (m *keyModel) labelStep(ys []int, nclasses int) step {
	scores := make([]float64, nclasses)
	return func(r *Row) error {
		r.Y, r.Scores = ys[r.Index], scores
		var err error
		if r.Pred, err = m.LearnLabelled(r.Scores, r.X, r.Y); err != nil {
			return fmt.Errorf("row %d: %w", r.Index, err)
		}
		return nil
	}
}

// accuracy counts the prequential predictions: overall, in the last half
// of the stream and per class.
type accuracy struct {
	total                          int64 // rows to feed
	ys                             []int
	fed                            int64
	hits, labelled, lateHits, late int
	counts, correct                []int // labelled rows and right predictions per class
	out                            *predWriter
}

func (a *accuracy) Row(_ learners.Learner, r *Row) error {
	if y := r.Y; y >= 0 {
		a.labelled++
		a.counts[y]++
		if r.Pred == y {
			a.hits++
			a.correct[y]++
		}
		if a.fed >= a.total/2 {
			a.late++
			if r.Pred == y {
				a.lateHits++
			}
		}
	}
	a.fed++
	return nil
}

// print writes the accuracy lines.
func (a *accuracy) print(w io.Writer, c *Config, classes []string, n int) {
	ratio := func(a, b int) float64 {
		if b == 0 {
			return math.NaN()
		}
		return float64(a) / float64(b)
	}
	fmt.Fprintf(w, "replay: prequential accuracy %.4f over %d labelled rows; last half of the stream %.4f over %d (classifier on %s, %d classes, %s × %s)\n",
		ratio(a.hits, a.labelled), a.labelled, ratio(a.lateHits, a.late), a.late, c.Label.On, len(classes), words.Plural(n, "row"), words.Plural(c.Passes, "pass"))
	var per []string
	for i, name := range classes {
		per = append(per, fmt.Sprintf("%s %d/%d", name, a.correct[i], a.counts[i]))
	}
	fmt.Fprintf(w, "replay: correct/labelled per class: %s\n", strings.Join(per, ", "))
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
