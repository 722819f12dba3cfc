package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/csvin"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

func init() {
	commands["replay"] = command{
		summary: "replay a CSV file through a learner offline (no NATS): projections and model export",
		run:     runReplay,
	}
}

// replayOptions are the flags of kpcastream replay. They are an interface
// other programs rely on: keep names and meanings stable.
type replayOptions struct {
	learner, kernel     string
	gamma, coef0        float64
	degree              int
	components, budget  int
	forget              float64
	passes              int
	shuffleSeed         uint64
	shuffle             bool
	in, out, modelOut   string
	drop                []string
	modelAt             []int64
	seed                uint64
	admission, eviction string
	tolerance           float64
	swapRatio           float64
	refresh             int
	learningRate, decay float64
	rule                string  // kha update rule
	beta                float64 // kha gha β
	progressEvery       time.Duration
	budgetIsSet         bool
	solver              string  // batch: auto|dense|lanczos|fast
	precision           float64 // batch fast rbf: ε
	precisionIsSet      bool
	mon                 monitorOptions // replay_monitor.go
	label               labelOptions   // replay --label (replay_label.go)
	report              reportOptions  // replay_report.go
}

func replayFlags(o *replayOptions, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.learner, "learner", learners.KindIKPCA, "learner: ikpca, kha, window or batch")
	fs.StringVar(&o.kernel, "kernel", learners.KernelRBF, "kernel: rbf, poly, linear, sigmoid or laplacian")
	fs.Float64Var(&o.gamma, "gamma", 0, "kernel gamma (default 1/d, as scikit-learn)")
	fs.IntVar(&o.degree, "degree", 3, "degree of the poly kernel")
	fs.Float64Var(&o.coef0, "coef0", 0, "coef0 of the poly and sigmoid kernels (as learner.kernel.coef0 in the config)")
	fs.IntVar(&o.components, "components", 2, "number k of components")
	fs.IntVar(&o.budget, "budget", learners.DefaultBudget, "budget B: dictionary size (ikpca, kha), window length W (window), rows kept (batch: default all)")
	fs.Float64Var(&o.forget, "forget", 1, "forgetting factor f in (0,1] per observation (ikpca)")
	fs.IntVar(&o.passes, "passes", 1, "number of passes over the file")
	fs.Func("shuffle-seed", "shuffle the rows of every pass with this seed (default: file order)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want a non-negative integer: %w", err)
		}
		o.shuffleSeed, o.shuffle = v, true
		return nil
	})
	fs.StringVar(&o.in, "in", "", "input CSV file with a header line (required; - for stdin)")
	fs.Func("drop", "comma-separated columns to ignore, by header name or 0-based index (e.g. label,phase)", func(s string) error {
		for _, c := range strings.Split(s, ",") {
			if c = strings.TrimSpace(c); c != "" {
				o.drop = append(o.drop, c)
			}
		}
		return nil
	})
	fs.StringVar(&o.out, "out", "", "write each row's projection to this CSV file")
	fs.StringVar(&o.modelOut, "model-out", "", "write the model export (JSON) here at the end (required)")
	fs.Func("model-at", "also export the model after these row counts, as NAME.<count>.json beside --model-out (e.g. 10000,20000)", func(s string) error {
		for _, c := range strings.Split(s, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(c), 10, 64)
			if err != nil || v < 1 {
				return fmt.Errorf("want positive row counts, got %q", c)
			}
			o.modelAt = append(o.modelAt, v)
		}
		slices.Sort(o.modelAt)
		return nil
	})
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the learner's random generator")
	fs.StringVar(&o.admission, "admission", "", "dictionary admission: ald (default) or coherence (ikpca)")
	fs.StringVar(&o.eviction, "eviction", "", "dictionary eviction: centroid (default), lli, fifo or contribution (ikpca)")
	fs.Float64Var(&o.tolerance, "tolerance", 0, "ALD threshold ν relative to k(x,x) (default 1e-3)")
	fs.Float64Var(&o.swapRatio, "swap-ratio", 0, "lli eviction hysteresis: swap a member only for a point more than this many times as independent, ≥ 1 (default 2; ikpca)")
	fs.IntVar(&o.refresh, "refresh", 0, "observations between refreshes of the published components (default: learner's)")
	fs.Float64Var(&o.learningRate, "learning-rate", 0, "kha: η₀ of η_t = η₀·t₀/(t+t₀) (default 0.1)")
	fs.Float64Var(&o.decay, "decay", 0, "kha: t₀ of the learning-rate schedule (default 1000)")
	fs.StringVar(&o.rule, "rule", "", "kha: update rule gha (default), oja or apex (Kashima 2001)")
	fs.Float64Var(&o.beta, "beta", 0, "kha rule gha: β of Kashima's eq. (12), > 0 (default 1: Sanger; 2: Oja's SGA)")
	fs.DurationVar(&o.progressEvery, "progress", 2*time.Second, "interval of the progress line on stderr (0 disables)")
	fs.StringVar(&o.solver, "solver", "auto", "batch: eigensolver auto, dense, lanczos or fast (README: batch solvers)")
	fs.Float64Var(&o.precision, "precision", learners.DefaultPrecision, "batch, --solver fast (or auto above the Gram cap), rbf: precision ε in (0, 0.1] of the fast Gauss transform; each covariance eigenvalue is within ε of the exact one")
	labelFlags(fs, &o.label)
	monitorFlags(fs, &o.mon)
	reportFlags(fs, &o.report)
	return fs
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o replayOptions
	fs := replayFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "budget":
			o.budgetIsSet = true
		case "precision":
			o.precisionIsSet = true
		}
		if monitorFlagNames[f.Name] {
			o.mon.set = true
		}
		if f.Name == "freeze" {
			o.mon.freezeSet = true
		}
	})
	var problems []string
	if o.in == "" {
		problems = append(problems, "--in is required")
	}
	if o.modelOut == "" {
		problems = append(problems, "--model-out is required")
	}
	if o.passes < 1 {
		problems = append(problems, fmt.Sprintf("--passes must be ≥ 1, got %d", o.passes))
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	problems = append(problems, labelProblems(&o)...)
	problems = append(problems, monitorProblems(&o)...)
	problems = append(problems, o.solverProblems()...)
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "kpcastream replay: %s\n", strings.Join(problems, "; "))
		return errUsage
	}
	if o.label.column != "" {
		return replayLabelled(ctx, &o, stdout, stderr)
	}
	return replay(ctx, &o, stderr)
}

// replay feeds the file through the learner. Single-pass, in-order replays
// of the online learners stream the file row by row; shuffled, multi-pass
// and batch replays load it into memory.
// eachRow calls f with every row index of every pass over n rows held in
// memory: in file order, or with --shuffle in a new random order each
// pass (seeded by --shuffle-seed). It stops at f's first error or when ctx
// ends.
func (o *replayOptions) eachRow(ctx context.Context, n int, f func(idx, pass int) error) error {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(o.shuffleSeed, 0x6b7063))
	for pass := 1; pass <= o.passes; pass++ {
		if o.shuffle {
			rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, idx := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := f(idx, pass); err != nil {
				return err
			}
		}
	}
	return nil
}

// learnerConfig is the learner configuration of the flags for rows of d
// values (a kernel parameter the kernel does not use is left at zero).
func (o *replayOptions) learnerConfig(d int) learners.Config {
	cfg := learners.Config{
		Learner: o.learner, Dim: d, Components: o.components, Budget: o.budget,
		Kernel: learners.Kernel{Name: o.kernel, Gamma: o.gamma, Degree: o.degree, Coef0: o.coef0},
		Forget: o.forget, Admission: o.admission, Eviction: o.eviction, Tolerance: o.tolerance, SwapRatio: o.swapRatio,
		Refresh: o.refresh, LearningRate: o.learningRate, Decay: o.decay, Seed: o.seed,
		Rule: o.rule, Beta: o.beta,
	}
	if o.kernel != learners.KernelPoly {
		cfg.Kernel.Degree = 0
	}
	if o.kernel != learners.KernelPoly && o.kernel != learners.KernelSigmoid {
		cfg.Kernel.Coef0 = 0
	}
	return cfg
}

func replay(ctx context.Context, o *replayOptions, stderr io.Writer) error {
	in, name, closeIn, err := openInput(o.in)
	if err != nil {
		return err
	}
	defer closeIn()
	cr, err := csvin.NewReader(bufio.NewReaderSize(in, 1<<20), csvin.Options{Name: name, Drop: o.drop, ID: o.mon.faultColumn})
	if err != nil {
		return err
	}
	d := cr.Dim()
	inMemory := o.passes > 1 || o.shuffle || o.learner == learners.KindBatch
	var x []float64
	var n int
	if inMemory {
		if x, n, err = cr.ReadAll(); err != nil {
			return err
		}
		if o.learner == learners.KindBatch && !o.budgetIsSet {
			o.budget = n
		}
	}
	cfg := o.learnerConfig(d)
	l, err := learners.New(cfg)
	if err != nil {
		return fmt.Errorf("learner settings: %w", err)
	}
	fitter, _ := l.(interface{ Fit() error })
	if b, ok := l.(*learners.Batch); ok {
		if err := b.SetFitOptions(o.batchOptions(stderr)); err != nil {
			return fmt.Errorf("learner settings: %w", err)
		}
	}
	rep, err := newReplayReport(&o.report, filepath.Base(name), cfg)
	if err != nil {
		return err
	}

	var out *projWriter
	if o.out != "" {
		if out, err = newProjWriter(o.out, o.components); err != nil {
			return err
		}
		defer out.Close()
	}
	var mon *monitor.Monitor
	if fitter == nil {
		if mon, err = o.mon.monitor(cfg, o.label.standardize); err != nil {
			return err
		}
	}
	prog := newProgress(stderr, o.progressEvery)
	var fed int64
	next := 0 // index into o.modelAt
	checkpoint := func() error {
		for next < len(o.modelAt) && o.modelAt[next] == fed {
			if fitter != nil {
				if err := fitter.Fit(); err != nil {
					return fmt.Errorf("fit after %d rows: %w", fed, err)
				}
			}
			path := modelAtPath(o.modelOut, fed)
			if err := writeModelWith(l, path, o.mon.decorate(mon)); err != nil {
				fmt.Fprintf(stderr, "kpcastream replay: no model after %d rows: %v\n", fed, err)
			}
			next++
		}
		return nil
	}
	z := make([]float64, o.components)
	xin := make([]float64, d)
	var last monitor.Result // the monitor's result of the last row (for --fault-column)
	learn := func(row []float64, idx, pass int) error {
		if mon != nil {
			r, err := mon.Step(l, nil, xin, z, row)
			if err != nil {
				return fmt.Errorf("row %d: %w", idx, err)
			}
			fed++
			last = r
			o.mon.count(r)
			if out != nil || rep != nil {
				err := error(nil)
				if !r.Ready {
					err = learners.ErrNotReady
				}
				if out != nil {
					if err := out.Write(idx, pass, r.Z, r.Novelty, err, r.Verdict); err != nil {
						return err
					}
				}
				rep.add(l, idx, mon.Input(xin, row), r.Z, r.Novelty, err, r.Verdict)
			}
			prog.Update(fed, l)
			return checkpoint()
		}
		if err := l.Learn(row); err != nil {
			return fmt.Errorf("row %d: %w", idx, err)
		}
		fed++
		if (out != nil || rep != nil) && fitter == nil {
			zz, nov, err := l.Score(z, row)
			if out != nil {
				if err := out.Write(idx, pass, zz, nov, err, monitor.Verdict{}); err != nil {
					return err
				}
			}
			rep.add(l, idx, row, zz, nov, err, monitor.Verdict{})
		}
		prog.Update(fed, l)
		return checkpoint()
	}

	if !inMemory {
		row := make([]float64, d)
		for idx := 0; ; idx++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			_, fault, err := cr.Next(row)
			if err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			if err := learn(row, idx, 1); err != nil {
				return err
			}
			if o.mon.faultColumn != "" {
				o.mon.detect.add(idx, faulty(fault), last)
			}
		}
	} else {
		if err := o.eachRow(ctx, n, func(idx, pass int) error { return learn(x[idx*d:(idx+1)*d], idx, pass) }); err != nil {
			return err
		}
	}
	if fitter != nil {
		start := time.Now()
		if err := fitter.Fit(); err != nil {
			return fmt.Errorf("fit: %w", err)
		}
		if b, ok := l.(*learners.Batch); ok {
			fmt.Fprintln(stderr, batchFitLine(b.LastFit(), time.Since(start)))
		}
		if out != nil || rep != nil {
			// The batch learner projects every row with the final fit.
			for idx := range n {
				zz, nov, err := l.Score(z, x[idx*d:(idx+1)*d])
				if out != nil {
					if err := out.Write(idx, o.passes, zz, nov, err, monitor.Verdict{}); err != nil {
						return err
					}
				}
				rep.add(l, idx, x[idx*d:(idx+1)*d], zz, nov, err, monitor.Verdict{})
			}
		}
	}
	prog.Done(fed, l)
	if out != nil {
		if err := out.Close(); err != nil {
			return err
		}
	}
	if fed == 0 {
		return fmt.Errorf("%s: no data rows", name)
	}
	if rep != nil && o.mon.faultColumn != "" {
		rep.detection = o.mon.detect.line(o.mon.faultColumn)
	}
	if err := rep.finish(stderr); err != nil {
		return err
	}
	o.mon.summary(stderr, mon)
	if o.mon.faultColumn != "" {
		o.mon.detect.print(stderr, o.mon.faultColumn)
	}
	return writeModelWith(l, o.modelOut, o.mon.decorate(mon))
}

// solverProblems checks --solver and --precision.
func (o *replayOptions) solverProblems() []string {
	var p []string
	switch o.solver {
	case "auto", learners.SolverDense, learners.SolverLanczos, learners.SolverFast:
	default:
		p = append(p, fmt.Sprintf("--solver must be auto, dense, lanczos or fast, got %q", o.solver))
	}
	if !(o.precision > 0 && o.precision <= 0.1) {
		p = append(p, fmt.Sprintf("--precision must be in (0, 0.1], got %v", o.precision))
	}
	if o.learner != learners.KindBatch && (o.solver != "auto" || o.precisionIsSet) {
		p = append(p, "--solver and --precision apply to --learner batch only")
	}
	return p
}

// batchOptions are the batch learner's fit options from the flags; a fit
// on the exact matrix-free product (O(n²d) per product) is announced on
// stderr before it starts.
func (o *replayOptions) batchOptions(stderr io.Writer) learners.BatchOptions {
	return learners.BatchOptions{Solver: o.solver, Precision: o.precision, OnPlan: func(p learners.BatchPlan) {
		if p.Product == learners.ProductBlocked {
			line := fmt.Sprintf("replay: batch fit of %d rows on the exact matrix-free product: O(n²d) per product, this can take long", p.Rows)
			if p.Note != "" {
				line += "; " + p.Note
			}
			fmt.Fprintln(stderr, line)
		}
	}}
}

// batchFitLine describes a batch fit for stderr: solver, product, its
// error bound or why a fast solver fell back, and the time taken.
func batchFitLine(f *learners.BatchFit, took time.Duration) string {
	if f == nil {
		return "replay: batch: no fit"
	}
	line := fmt.Sprintf("replay: batch fit of %d rows: solver %s, product %s", f.N, f.Solver, f.Product)
	switch {
	case f.Product == learners.ProductIFGT:
		line += fmt.Sprintf(" (approximate: each covariance eigenvalue within %.3g)", f.ErrorBound)
	default:
		line += " (exact)"
	}
	if f.Note != "" {
		line += "; " + f.Note
	}
	if f.Products > 0 {
		line += fmt.Sprintf(", %d products", f.Products)
	}
	return line + fmt.Sprintf(", %.2f s", took.Seconds())
}

func openInput(path string) (io.Reader, string, func(), error) {
	if path == "-" {
		return os.Stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", nil, err
	}
	return f, path, func() { f.Close() }, nil
}

// modelAtPath returns model.<count>.json beside model.json.
func modelAtPath(modelOut string, count int64) string {
	ext := filepath.Ext(modelOut)
	return strings.TrimSuffix(modelOut, ext) + "." + strconv.FormatInt(count, 10) + ext
}

// syncer is a learner that can catch up on deferred work on demand.
type syncer interface{ Sync(maxIter int) error }

// writeModel writes l's model export to path. A learner that can catch up
// on deferred work (Sync) is synced on a copy first, so exports at
// --model-at do not perturb the replay itself.
func writeModel(l learners.Learner, path string) error {
	return writeModelWith(l, path, nil)
}

// writeModelWith is writeModel with decorate (when not nil) adding
// sections to the model before it is encoded.
func writeModelWith(l learners.Learner, path string, decorate func(*learners.Model)) error {
	if _, ok := l.(syncer); ok {
		c, err := learners.Restore(l.State())
		if err != nil {
			return fmt.Errorf("model export: %w", err)
		}
		if err := c.(syncer).Sync(100); err != nil {
			return fmt.Errorf("model export: %w", err)
		}
		l = c
	}
	m, err := l.Model()
	if err != nil {
		return fmt.Errorf("model export: %w", err)
	}
	if decorate != nil {
		decorate(m)
	}
	b, err := codec.EncodeModel(m)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// writeFileAtomic writes b to a temporary file beside path and renames it.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	// os.CreateTemp makes the file 0600; a model export is meant to be read
	// by other programs and users, like any file written with os.Create.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// projWriter writes one CSV line per fed row: row (0-based data row of the
// input file), pass, z1…zk, spe, t2, spe_limit, t2_limit, alarm. Rows fed
// before the learner is ready have empty projection and score fields; the
// limits are empty until they are in force (after the monitor's warm-up)
// and alarm is empty without one ("spe", "t2" or "both").
type projWriter struct {
	csvOut
	k int
}

// csvOut is a buffered CSV output file with a line buffer reused per row.
type csvOut struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte
}

func createCSV(path string) (csvOut, error) {
	f, err := os.Create(path)
	if err != nil {
		return csvOut{}, err
	}
	return csvOut{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

// line writes b, a row without its newline, and keeps b's storage for the
// next row.
func (c *csvOut) line(b []byte) error {
	b = append(b, '\n')
	c.buf = b
	_, err := c.w.Write(b)
	return err
}

// Close flushes and closes the file; a second Close does nothing.
func (c *csvOut) Close() error {
	if c.f == nil {
		return nil
	}
	err := c.w.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	return err
}

func newProjWriter(path string, k int) (*projWriter, error) {
	c, err := createCSV(path)
	if err != nil {
		return nil, err
	}
	p := &projWriter{csvOut: c, k: k}
	p.w.WriteString("row,pass")
	for i := 1; i <= k; i++ {
		fmt.Fprintf(p.w, ",z%d", i)
	}
	p.w.WriteString(",spe,t2,spe_limit,t2_limit,alarm\n")
	return p, nil
}

func (p *projWriter) Write(idx, pass int, z []float64, nov learners.Novelty, err error, v monitor.Verdict) error {
	b := p.buf[:0]
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pass), 10)
	switch {
	case err == nil:
		for _, v := range z {
			b = append(b, ',')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, ',')
		b = strconv.AppendFloat(b, nov.SPE, 'g', -1, 64)
		b = append(b, ',')
		b = strconv.AppendFloat(b, nov.T2, 'g', -1, 64)
		b = append(b, ',')
		if v.InForce {
			b = strconv.AppendFloat(b, v.SPELimit, 'g', -1, 64)
			b = append(b, ',')
			b = strconv.AppendFloat(b, v.T2Limit, 'g', -1, 64)
		} else {
			b = append(b, ',')
		}
		b = append(b, ',')
		b = append(b, v.Alarm.String()...)
	case errors.Is(err, learners.ErrNotReady):
		for range p.k + 5 {
			b = append(b, ',')
		}
	default:
		return fmt.Errorf("row %d: %w", idx, err)
	}
	return p.line(b)
}

// progress prints a status line on stderr at most every interval.
type progress struct {
	w        io.Writer
	every    time.Duration
	start    time.Time
	last     time.Time
	eig      []float64
	printed  bool
	interval int64
}

func newProgress(w io.Writer, every time.Duration) *progress {
	now := time.Now()
	return &progress{w: w, every: every, start: now, last: now}
}

func (p *progress) Update(fed int64, l learners.Learner) {
	if p.every <= 0 {
		return
	}
	p.interval++
	if p.interval < 256 {
		return
	}
	p.interval = 0
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.print(fed, l)
	}
}

func (p *progress) Done(fed int64, l learners.Learner) {
	if p.every > 0 {
		p.print(fed, l)
	}
	// The budget line is the run's summary, not progress: always printed.
	if line := budgetLine(l.Summary(p.eig)); line != "" {
		fmt.Fprintln(p.w, line)
	}
}

// budgetLine describes how well the budget fits the stream, from the
// learner's Summary; "" for a learner that does not judge it.
func budgetLine(s learners.Summary) string {
	if s.BudgetAdvice == "" {
		return ""
	}
	line := fmt.Sprintf("replay: budget %s: stored %d, outside span %.3f, dropped mass %.3f, swaps %.1f and moves %.1f per 1000 rows",
		s.BudgetAdvice, s.Stored, s.OutsideSpan, s.DroppedMass, s.SwapsPer1000, s.MovesPer1000)
	switch s.BudgetAdvice {
	case learners.AdviceTight:
		line += " (a larger --budget would be safer)"
	case learners.AdviceTooSmall:
		line += " (raise --budget)"
	}
	return line
}

func (p *progress) print(fed int64, l learners.Learner) {
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(fed) / el
	}
	s := l.Summary(p.eig)
	p.eig = s.Eigenvalues
	line := fmt.Sprintf("replay: %d rows, %.0f rows/s, stored %d", fed, rate, s.Stored)
	if s.Ready {
		line += fmt.Sprintf(", explained %.3f, top eigenvalue %.4g", s.ExplainedVariance, s.Eigenvalues[0])
	} else {
		line += ", warming up"
	}
	fmt.Fprintln(p.w, line)
}
