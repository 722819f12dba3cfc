package replay

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/kpcastream/kpcastream/internal/kpcaplot"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// report records a replay for the report: a thinned kpcaview.Series
// of every scored row, and the similarity to batch KPCA of the recent
// rows at fixed intervals.
type report struct {
	o     *ReportConfig
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

	// monitor is the monitor's summary line (where its warm-up ended), shown in the report.
	monitor string
}

func newReport(o *ReportConfig, title string, cfg learners.Config) (*report, error) {
	if !o.enabled() {
		return nil, nil
	}
	if o.Bucket < 1 || o.Window < 0 || (o.Window > 0 && o.Window < 2*cfg.Components) {
		return nil, fmt.Errorf("--report-bucket must be ≥ 1 and --report-window 0 or ≥ 2 × components, got %d and %d", o.Bucket, o.Window)
	}
	r := &report{o: o, title: title, cfg: cfg, eig: make([]float64, cfg.Components), started: time.Now(),
		s: kpcaview.NewSeries(kpcaview.Options{Samples: 4000, ZDims: cfg.Components, EigDims: cfg.Components, Buckets: 400,
			Width: int64(o.Bucket), Thin: true})}
	r.sim.Window = o.Window
	if o.Window > 0 {
		r.rows = make([]float64, o.Window*cfg.Dim)
	}
	return r, nil
}

// Row records the row.
func (r *report) Row(l learners.Learner, row *Row) error {
	r.obs.Contrib = kpcaview.ContribOf(r.obs.Contrib, row.Monitor.Contrib, func(c monitor.Contribution) (int, float64) { return c.Var, c.Value })
	r.add(l, row.Index, row.Input, row.Z, row.Novelty, row.Err, row.Verdict)
	return nil
}

// add records one fed row (learned, then scored with err from Score).
func (r *report) add(l learners.Learner, idx int, row, z []float64, nov learners.Novelty, err error, v monitor.Verdict) {
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
		r.ringAt = (r.ringAt + 1) % r.o.Window
		r.ringN = min(r.ringN+1, r.o.Window)
		if half := int64(r.o.Window / 2); r.fed%half == 0 && r.ringN == r.o.Window && r.simErr == nil {
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
func (r *report) similarity(l learners.Learner) {
	m, err := syncedModel(l)
	if err == nil {
		var sim float64
		if sim, err = kpcaeval.Similarity(m, r.rows, r.o.Window, r.cfg.Dim); err == nil {
			r.sim.X = append(r.sim.X, r.fed-1)
			r.sim.Sim = append(r.sim.Sim, sim)
			return
		}
	}
	if r.fed > int64(r.o.Window) { // a learner still warming up has no model: not an error
		r.simErr = err
	}
}

// view returns the report's data.
func (r *report) view() *kpcaview.KeyView {
	v := &kpcaview.KeyView{Pipeline: "replay", Key: r.title, Time: time.Now().UnixMilli(), Learner: r.cfg.Learner,
		Dim: r.cfg.Dim, Components: r.cfg.Components, Budget: r.cfg.Budget, View: r.s.View(0.99, kpcaview.DefaultDrift)}
	if len(r.sim.X) > 0 {
		s := r.sim
		v.Similarity = &s
	}
	return v
}

// finish writes the report and the plots.
func (r *report) finish(stderr io.Writer) error {
	if r == nil {
		return nil
	}
	v := r.view()
	if r.simErr != nil {
		fmt.Fprintf(stderr, "kpcastream replay: report: similarity to batch KPCA stopped: %v\n", r.simErr)
	}
	work := "recording"
	if r.o.Window > 0 {
		work += fmt.Sprintf(", similarity to batch KPCA of %d rows every %d rows", r.o.Window, r.o.Window/2)
	}
	fmt.Fprintf(stderr, "kpcastream replay: report: its own work (%s) took %.2fs of the replay's %.2fs; the latency chart leaves it out\n",
		work, r.own.Seconds(), time.Since(r.started).Seconds())
	if r.o.Report != "" {
		rep := &kpcaview.Report{Title: r.title, Generated: time.Now().UTC().Format(time.RFC3339), Rows: r.fed, View: v, Detection: r.detection, Monitor: r.monitor}
		err := writeAtomic(r.o.Report, func(f io.Writer) error {
			w := bufio.NewWriter(f)
			if err := kpcaview.WriteReport(w, rep); err != nil {
				return err
			}
			return w.Flush()
		})
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	if r.o.Plot != "" {
		if err := kpcaplot.Write(r.o.Plot, v, r.fed, kpcaplot.Size{W: r.o.Width, H: r.o.Height}); err != nil {
			return fmt.Errorf("plots: %w", err)
		}
	}
	return nil
}
