package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// reportOptions are replay's flags of the offline report.
type reportOptions struct {
	report string   // --report FILE.html
	plot   string   // --plot DIR
	bucket int      // --report-bucket rows
	window int      // --report-window rows (0: no similarity)
	size   plotSize // --plot-size WxH pixels
}

func reportFlags(fs *flag.FlagSet, o *reportOptions) {
	fs.StringVar(&o.report, "report", "", "write a self-contained HTML report (the live page's plots over the replayed rows) to this file")
	fs.StringVar(&o.plot, "plot", "", "write the report's plots as PNG files into this directory")
	o.size = defaultPlotSize
	fs.Var(&o.size, "plot-size", fmt.Sprintf("size of the --plot PNG files in pixels, WIDTHxHEIGHT (%dx%d to %dx%d)", minPlotW, minPlotH, maxPlotSide, maxPlotSide))
	fs.IntVar(&o.bucket, "report-bucket", 100, "rows per bucket of the report's time series (doubled as often as needed to keep at most 400 buckets)")
	fs.IntVar(&o.window, "report-window", 1000, "report: every window/2 rows, the similarity of the learner's components to batch KPCA of the last window rows (memory ≈ 16·window² bytes, time ≈ one eigendecomposition of window² per window/2 rows: it slows the replay several-fold; 0 disables)")
}

func (o *reportOptions) enabled() bool { return o.report != "" || o.plot != "" }

// replayReport records a replay for the report: a thinned kpcaview.Series
// of every scored row, and the similarity to batch KPCA of the recent
// rows at fixed intervals.
type replayReport struct {
	o     *reportOptions
	title string
	// detection is the detection of a fault column (replay --fault-column), shown in the report.
	detection string
	cfg       learners.Config
	s         *kpcaview.Series
	obs       kpcaview.Observation
	eig       []float64
	last      time.Time
	rows      []float64 // ring of the last window rows (row-major)
	ringN     int       // rows in the ring
	ringAt    int       // next slot
	fed       int64
	sim       kpcaview.Similarity
	simErr    error
	started   time.Time
	own       time.Duration // the report's own work, excluded from the latency
}

func newReplayReport(o *reportOptions, title string, cfg learners.Config) (*replayReport, error) {
	if !o.enabled() {
		return nil, nil
	}
	if o.bucket < 1 || o.window < 0 || (o.window > 0 && o.window < 2*cfg.Components) {
		return nil, fmt.Errorf("--report-bucket must be ≥ 1 and --report-window 0 or ≥ 2 × components, got %d and %d", o.bucket, o.window)
	}
	r := &replayReport{o: o, title: title, cfg: cfg, eig: make([]float64, cfg.Components), started: time.Now(),
		s: kpcaview.NewSeries(kpcaview.Options{Samples: 4000, ZDims: cfg.Components, EigDims: cfg.Components, Buckets: 400,
			Width: int64(o.bucket), Thin: true})}
	r.sim.Window = o.window
	if o.window > 0 {
		r.rows = make([]float64, o.window*cfg.Dim)
	}
	return r, nil
}

// add records one fed row (learned, then scored with err from Score).
func (r *replayReport) add(l learners.Learner, idx int, row, z []float64, nov learners.Novelty, err error, v monitor.Verdict) {
	if r == nil {
		return
	}
	r.fed++
	// The learner's time for the row: from the end of the previous add
	// to now, so that the report's own work (the similarity to batch KPCA
	// every window/2 rows, the thinning of its record) is not in it.
	now := time.Now()
	took := now.Sub(r.last)
	defer func() {
		r.last = time.Now()
		r.own += r.last.Sub(now)
	}()
	if r.rows != nil {
		d := r.cfg.Dim
		copy(r.rows[r.ringAt*d:(r.ringAt+1)*d], row)
		r.ringAt = (r.ringAt + 1) % r.o.window
		r.ringN = min(r.ringN+1, r.o.window)
		if half := int64(r.o.window / 2); r.fed%half == 0 && r.ringN == r.o.window && r.simErr == nil {
			r.similarity(l)
		}
	}
	if err != nil {
		return // not ready yet
	}
	sum := l.Summary(r.eig)
	o := &r.obs
	o.X, o.Seq, o.Z, o.SPE, o.T2 = r.fed-1, uint64(idx), z, nov.SPE, nov.T2
	o.SPELimit, o.T2Limit, o.Alarm = v.SPELimit, v.T2Limit, v.Alarm.String()
	o.Explained, o.Eigenvalues, o.Stored, o.Basis = sum.ExplainedVariance, sum.Eigenvalues, sum.Stored, sum.BasisVersion
	o.Swaps, o.Moves, o.Age = sum.SwapsPer1000, sum.MovesPer1000, -1
	o.Learn = 0
	if r.fed > 1 {
		o.Learn = took.Seconds()
	}
	r.s.Add(o)
}

// similarity compares the learner's current components (synced on a copy)
// with batch KPCA of the rows in the ring.
func (r *replayReport) similarity(l learners.Learner) {
	m, err := syncedModel(l)
	if err == nil {
		var sim float64
		if sim, err = kpcaeval.Similarity(m, r.rows, r.o.window, r.cfg.Dim); err == nil {
			r.sim.X = append(r.sim.X, r.fed-1)
			r.sim.Sim = append(r.sim.Sim, sim)
			return
		}
	}
	if r.fed > int64(r.o.window) { // a learner still warming up has no model: not an error
		r.simErr = err
	}
}

// syncedModel is the model export of l after catching up deferred work on
// a copy (as writeModel does).
func syncedModel(l learners.Learner) (*learners.Model, error) {
	if _, ok := l.(syncer); ok {
		c, err := learners.Restore(l.State())
		if err != nil {
			return nil, err
		}
		if err := c.(syncer).Sync(100); err != nil {
			return nil, err
		}
		l = c
	}
	return l.Model()
}

// view returns the report's data.
func (r *replayReport) view() *kpcaview.KeyView {
	v := &kpcaview.KeyView{Pipeline: "replay", Key: r.title, Time: time.Now().UnixMilli(), Learner: r.cfg.Learner,
		Dim: r.cfg.Dim, Components: r.cfg.Components, Budget: r.cfg.Budget, View: r.s.View(0.99, kpcaview.DefaultDrift)}
	if len(r.sim.X) > 0 {
		s := r.sim
		v.Similarity = &s
	}
	return v
}

// finish writes the report and the plots.
func (r *replayReport) finish(stderr io.Writer) error {
	if r == nil {
		return nil
	}
	v := r.view()
	if r.simErr != nil {
		fmt.Fprintf(stderr, "kpcastream replay: report: similarity to batch KPCA stopped: %v\n", r.simErr)
	}
	work := "recording"
	if r.o.window > 0 {
		work += fmt.Sprintf(", similarity to batch KPCA of %d rows every %d rows", r.o.window, r.o.window/2)
	}
	fmt.Fprintf(stderr, "kpcastream replay: report: its own work (%s) took %.2fs of the replay's %.2fs; the latency chart leaves it out\n",
		work, r.own.Seconds(), time.Since(r.started).Seconds())
	if r.o.report != "" {
		rep := &kpcaview.Report{Title: r.title, Generated: time.Now().UTC().Format(time.RFC3339), Rows: r.fed, View: v, Detection: r.detection}
		f, err := os.CreateTemp(filepath.Dir(r.o.report), "."+filepath.Base(r.o.report)+".*")
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		err = kpcaview.WriteReport(w, rep)
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), 0o644)
		}
		if err == nil {
			err = os.Rename(f.Name(), r.o.report)
		}
		if err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("report: %w", err)
		}
	}
	if r.o.plot != "" {
		if err := writePlots(r.o.plot, v, r.fed, r.o.size); err != nil {
			return fmt.Errorf("plots: %w", err)
		}
	}
	return nil
}
