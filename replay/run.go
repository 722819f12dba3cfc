package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	"github.com/kpcastream/kpcastream/internal/csvin"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// Row is one fed row after the key model took it: what a Hook sees. Its
// slices are reused for the next row: a hook that keeps them copies them.
type Row struct {
	// Index is the 0-based data row of the file, Pass the pass over it
	// (from 1), Fed the rows fed so far in this pass loop, this one
	// included (0 in the batch learner's scoring after its fit).
	Index, Pass int
	Fed         int64
	// X is the row as read (standardised over the file with a label);
	// Input the features as the learner saw them (standardised by the
	// monitor with --standardize, else X).
	X, Input []float64
	// Cell is the row's cell of the label or fault column ("" without).
	Cell string
	// Z and Novelty are the row's projection and novelty, valid when Err
	// is nil; Err is learners.ErrNotReady before the learner can score
	// (and always while the batch learner learns).
	Z       []float64
	Novelty learners.Novelty
	Err     error
	// Monitor is the monitor's step of the row (online learners without a
	// label); Verdict its judgement.
	Monitor monitor.Result
	Verdict monitor.Verdict
	// Y is the label's class index (−1: none), Pred the classifier's
	// prediction (−1: none yet) and Scores its scores (with a label).
	Y, Pred int
	Scores  []float64
}

// Hook is told of every row of a pass loop after the key model took it,
// in order; l is the key's learner (read it, never feed it). An error
// stops the replay.
type Hook interface {
	Row(l learners.Learner, r *Row) error
}

// HookFunc is a Hook of a function.
type HookFunc func(l learners.Learner, r *Row) error

// Row calls f.
func (f HookFunc) Row(l learners.Learner, r *Row) error { return f(l, r) }

// step feeds one row to the key model and fills in what it did.
type step func(r *Row) error

// source calls f with every row of every pass, in order; it stops at f's
// first error or when ctx ends. x is reused for the next row.
type source interface {
	each(ctx context.Context, f func(idx, pass int, x []float64, cell string) error) error
}

// passLoop is the one loop over a replay's rows: each row goes through
// the step, then through every hook, in order.
func passLoop(ctx context.Context, src source, l learners.Learner, st step, hooks []Hook, counted bool) error {
	var r Row
	var fed int64
	return src.each(ctx, func(idx, pass int, x []float64, cell string) error {
		r = Row{Index: idx, Pass: pass, X: x, Input: x, Cell: cell, Y: -1, Pred: -1, Err: learners.ErrNotReady, Scores: r.Scores}
		if err := st(&r); err != nil {
			return err
		}
		if counted {
			fed++
			r.Fed = fed
		}
		for _, h := range hooks {
			if err := h.Row(l, &r); err != nil {
				return err
			}
		}
		return nil
	})
}

// streamSource streams a file's rows: one in-order pass.
type streamSource struct {
	cr *csvin.Reader
}

func (s streamSource) each(ctx context.Context, f func(idx, pass int, x []float64, cell string) error) error {
	row := make([]float64, s.cr.Dim())
	for idx := 0; ; idx++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, cell, err := s.cr.Next(row)
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := f(idx, 1, row, cell); err != nil {
			return err
		}
	}
}

// memSource holds a file's n rows of d values (and their cells) in
// memory: passes over them in file order, or with shuffle in a new random
// order each pass (seeded by seed). Pass numbers start after skip.
type memSource struct {
	x       []float64
	cells   []string
	n, d    int
	passes  int
	shuffle bool
	seed    uint64
	skip    int
}

func (s *memSource) each(ctx context.Context, f func(idx, pass int, x []float64, cell string) error) error {
	order := make([]int, s.n)
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(s.seed, 0x6b7063))
	for pass := 1; pass <= s.passes; pass++ {
		if s.shuffle {
			rng.Shuffle(s.n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, idx := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			cell := ""
			if s.cells != nil {
				cell = s.cells[idx]
			}
			if err := f(idx, s.skip+pass, s.x[idx*s.d:(idx+1)*s.d], cell); err != nil {
				return err
			}
		}
	}
	return nil
}

// readAll reads every row of cr into memory, with the trimmed cells of
// its id column when cells; a file without data rows is an error.
func readAll(cr *csvin.Reader, name string, cells bool) (*memSource, error) {
	s := &memSource{d: cr.Dim()}
	row := make([]float64, s.d)
	for {
		r, cell, err := cr.Next(row)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		s.x = append(s.x, r...)
		if cells {
			s.cells = append(s.cells, strings.TrimSpace(cell))
		}
		s.n++
	}
	if s.n == 0 {
		return nil, fmt.Errorf("%s: no data rows", name)
	}
	return s, nil
}

// Run replays the CSV rows of in (named name in messages and the report)
// through the key model of c and writes what c asks for: the --out CSV,
// the model exports, the report and plots; a summary on stderr and, with
// a label column, the prequential accuracy on stdout. Single-pass,
// in-order replays of the online learners stream the file row by row;
// shuffled, multi-pass, batch and labelled replays load it into memory.
// hooks are told of every row after the built-in ones.
func Run(ctx context.Context, c *Config, in io.Reader, name string, stdout, stderr io.Writer, hooks ...Hook) error {
	id := c.Monitor.FaultColumn
	if c.Label.Column != "" {
		id = c.Label.Column
	}
	cr, err := csvin.NewReader(bufio.NewReaderSize(in, 1<<20), csvin.Options{Name: name, Drop: c.Drop, ID: id})
	if err != nil {
		return err
	}
	if c.Label.Column != "" {
		return runLabelled(ctx, c, cr, name, stdout, stderr, hooks)
	}
	var src source = streamSource{cr}
	var mem *memSource
	if c.Passes > 1 || c.Shuffle || c.Learner == learners.KindBatch {
		if mem, err = readAll(cr, name, false); err != nil {
			return err
		}
		mem.passes, mem.shuffle, mem.seed = c.Passes, c.Shuffle, c.ShuffleSeed
		if c.Learner == learners.KindBatch && !c.BudgetSet {
			c.Budget = mem.n
		}
		src = mem
	}
	m, err := newKeyModel(c, cr.Dim(), nil, stderr)
	if err != nil {
		return err
	}
	rep, err := newReport(&c.Report, filepath.Base(name), m.cfg)
	if err != nil {
		return err
	}
	var out *projWriter
	if c.Out != "" {
		if out, err = newProjWriter(c.Out, c.Components); err != nil {
			return err
		}
		defer out.Close()
	}
	// What is told of every row: the learning pass and, for the batch
	// learner, the scoring after its fit.
	var scored []Hook
	if out != nil {
		scored = append(scored, out)
	}
	if rep != nil {
		scored = append(scored, rep)
	}
	prog := newProgress(stderr, c.Progress)
	cp := &checkpoint{m: m, c: c, stderr: stderr}
	var learned []Hook
	var counts *monitorCounts
	var det *detection
	if m.mon != nil {
		counts = &monitorCounts{}
		learned = append(learned, counts)
		learned = append(learned, scored...)
		if c.Monitor.FaultColumn != "" {
			det = &detection{}
			learned = append(learned, det)
		}
	}
	learned = append(append(learned, prog, cp), hooks...)
	if err := passLoop(ctx, src, m.l, m.learnStep(cr.Dim(), c.Components), learned, true); err != nil {
		return err
	}
	fed := prog.fed
	if m.fitter != nil {
		start := time.Now()
		if err := m.fitter.Fit(); err != nil {
			return fmt.Errorf("fit: %w", err)
		}
		if b, ok := m.l.(*learners.Batch); ok {
			fmt.Fprintln(stderr, batchFitLine(b.LastFit(), time.Since(start)))
		}
		if len(scored) > 0 || len(hooks) > 0 {
			// The batch learner projects every row with the final fit.
			scoring := &memSource{x: mem.x, n: mem.n, d: mem.d, passes: 1, skip: c.Passes - 1}
			if err := passLoop(ctx, scoring, m.l, m.scoreStep(c.Components), append(scored, hooks...), false); err != nil {
				return err
			}
		}
	}
	prog.Done(fed, m.l)
	if out != nil {
		if err := out.Close(); err != nil {
			return err
		}
	}
	if fed == 0 {
		return fmt.Errorf("%s: no data rows", name)
	}
	if rep != nil && det != nil {
		rep.detection = det.line(c.Monitor.FaultColumn)
	}
	if err := rep.finish(stderr); err != nil {
		return err
	}
	if m.monSet {
		counts.summary(stderr, &c.Monitor, m.mon)
	}
	if det != nil {
		det.print(stderr, c.Monitor.FaultColumn)
	}
	return m.writeFinal(c.ModelOut, fed)
}

// learnStep feeds a row to the learner: under the monitor for an online
// learner (learn, score, judge), else (batch) only learned.
func (m *keyModel) learnStep(d, k int) step {
	if m.mon == nil {
		return func(r *Row) error {
			if err := m.l.Learn(r.X); err != nil {
				return fmt.Errorf("row %d: %w", r.Index, err)
			}
			return nil
		}
	}
	z, xin := make([]float64, k), make([]float64, d)
	return func(r *Row) error {
		res, err := m.mon.Step(m.l, nil, xin, z, r.X)
		if err != nil {
			return fmt.Errorf("row %d: %w", r.Index, err)
		}
		r.Monitor, r.Verdict, r.Z, r.Novelty, r.Err = res, res.Verdict, res.Z, res.Novelty, nil
		if !res.Ready {
			r.Err = learners.ErrNotReady
		}
		r.Input = m.mon.Input(xin, r.X)
		return nil
	}
}

// scoreStep scores a row with the learner as it is (the batch learner
// after its fit).
func (m *keyModel) scoreStep(k int) step {
	z := make([]float64, k)
	return func(r *Row) error {
		r.Z, r.Novelty, r.Err = m.l.Score(z, r.X)
		return nil
	}
}

// checkpoint writes the model exports of --model-at.
type checkpoint struct {
	m      *keyModel
	c      *Config
	stderr io.Writer
	next   int // index into c.ModelAt
}

func (cp *checkpoint) Row(_ learners.Learner, r *Row) error {
	for cp.next < len(cp.c.ModelAt) && cp.c.ModelAt[cp.next] == r.Fed {
		if cp.m.fitter != nil {
			if err := cp.m.fitter.Fit(); err != nil {
				return fmt.Errorf("fit after %d rows: %w", r.Fed, err)
			}
		}
		if err := cp.m.write(ModelAtPath(cp.c.ModelOut, r.Fed)); err != nil {
			fmt.Fprintf(cp.stderr, "kpcastream replay: no model after %d rows: %v\n", r.Fed, err)
		}
		cp.next++
	}
	return nil
}

// ModelAtPath returns model.<count>.json beside model.json.
func ModelAtPath(modelOut string, count int64) string {
	ext := filepath.Ext(modelOut)
	return strings.TrimSuffix(modelOut, ext) + "." + fmt.Sprint(count) + ext
}
