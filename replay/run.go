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
	cc := *c // the batch learner's budget may default to the row count
	c = &cc
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
	r, err := newUnlabelled(c, cr, name, stderr, hooks)
	if err != nil {
		return err
	}
	defer r.close()
	if err := passLoop(ctx, r.src, r.m.l, r.m.learnStep(cr.Dim(), c.Components), r.learned, true); err != nil {
		return err
	}
	if r.m.fitter != nil {
		if err := r.fit(ctx); err != nil {
			return err
		}
	}
	return r.finish(name)
}

// unlabelled is a replay without a label column while it runs: its key
// model, source, outputs and the hooks of its passes.
type unlabelled struct {
	c      *Config
	m      *keyModel
	src    source
	mem    *memSource // the rows in memory (nil when streamed)
	rep    *report
	out    *projWriter
	counts *monitorCounts
	det    *detection
	prog   *progress
	stderr io.Writer
	// scored are told of every scored row (for the batch learner, in its
	// scoring pass after the fit); learned of every row learned.
	scored, learned, hooks []Hook
}

func newUnlabelled(c *Config, cr *csvin.Reader, name string, stderr io.Writer, hooks []Hook) (*unlabelled, error) {
	r := &unlabelled{c: c, src: streamSource{cr}, stderr: stderr, hooks: hooks}
	var err error
	if c.Passes > 1 || c.Shuffle || c.Learner == learners.KindBatch {
		if r.mem, err = readAll(cr, name, false); err != nil {
			return nil, err
		}
		r.mem.passes, r.mem.shuffle, r.mem.seed = c.Passes, c.Shuffle, c.ShuffleSeed
		if c.Learner == learners.KindBatch && !c.BudgetSet {
			c.Budget = r.mem.n
		}
		r.src = r.mem
	}
	if r.m, err = newKeyModel(c, cr.Dim(), nil, nil, stderr); err != nil {
		return nil, err
	}
	if r.rep, err = newReport(&c.Report, filepath.Base(name), r.m.cfg); err != nil {
		return nil, err
	}
	if c.Out != "" {
		if r.out, err = newProjWriter(c.Out, c.Components, c.Monitor.Set, r.m.mon != nil && r.m.mon.Config().Linear); err != nil {
			return nil, err
		}
		r.scored = append(r.scored, r.out)
	}
	if r.rep != nil {
		r.scored = append(r.scored, r.rep)
	}
	r.prog = newProgress(stderr, c.Progress)
	if r.m.mon != nil {
		r.counts = &monitorCounts{}
		r.learned = append(append(r.learned, r.counts), r.scored...)
		if c.Monitor.FaultColumn != "" {
			r.det = &detection{}
			r.learned = append(r.learned, r.det)
		}
	}
	r.learned = append(append(r.learned, r.prog, &checkpoint{m: r.m, c: c, stderr: stderr}), hooks...)
	return r, nil
}

// close closes the --out file (a second close does nothing).
func (r *unlabelled) close() {
	if r.out != nil {
		r.out.Close()
	}
}

// fit fits the batch learner and scores every row with the final fit.
func (r *unlabelled) fit(ctx context.Context) error {
	start := time.Now()
	if err := r.m.fitter.Fit(); err != nil {
		return fmt.Errorf("fit: %w", err)
	}
	if b, ok := r.m.l.(*learners.Batch); ok {
		fmt.Fprintln(r.stderr, batchFitLine(b.LastFit(), time.Since(start)))
	}
	if len(r.scored) == 0 && len(r.hooks) == 0 {
		return nil
	}
	scoring := &memSource{x: r.mem.x, n: r.mem.n, d: r.mem.d, passes: 1, skip: r.c.Passes - 1}
	return passLoop(ctx, scoring, r.m.l, r.m.scoreStep(r.c.Components), append(r.scored, r.hooks...), false)
}

// finish closes the outputs, prints the summaries and writes the report,
// the plots and the model export.
func (r *unlabelled) finish(name string) error {
	fed := r.prog.fed
	r.prog.Done(fed, r.m.l)
	if r.out != nil {
		if err := r.out.Close(); err != nil {
			return err
		}
	}
	if fed == 0 {
		return fmt.Errorf("%s: no data rows", name)
	}
	if r.rep != nil && r.det != nil {
		r.rep.detection = r.det.line(r.c.Monitor.FaultColumn)
	}
	if r.rep != nil && r.m.monSet {
		r.rep.monitor = r.counts.line(&r.c.Monitor, r.m.mon)
	}
	if err := r.rep.finish(r.stderr); err != nil {
		return err
	}
	if r.m.monSet {
		r.counts.summary(r.stderr, &r.c.Monitor, r.m.mon)
	}
	if r.det != nil {
		r.det.print(r.stderr, r.c.Monitor.FaultColumn)
	}
	return r.m.writeFinal(r.c.ModelOut, fed)
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
		if err := cp.m.write(modelAtPath(cp.c.ModelOut, r.Fed)); err != nil {
			fmt.Fprintf(cp.stderr, "kpcastream replay: no model after %d rows: %v\n", r.Fed, err)
		}
		cp.next++
	}
	return nil
}

// modelAtPath returns model.<count>.json beside model.json.
func modelAtPath(modelOut string, count int64) string {
	ext := filepath.Ext(modelOut)
	return strings.TrimSuffix(modelOut, ext) + "." + fmt.Sprint(count) + ext
}
