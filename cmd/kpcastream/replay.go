package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kpcastream/kpcastream/internal/kpcaplot"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
	"github.com/kpcastream/kpcastream/replay"
)

func init() {
	commands["replay"] = command{
		summary: "replay a CSV file through a learner offline (no NATS): projections and model export",
		run:     runReplay,
	}
}

// replayOptions are the flags of kpcastream replay: the replay's
// configuration and what only the command reads. They are an interface
// other programs rely on: keep names and meanings stable.
type replayOptions struct {
	replay.Config
	in   string
	size kpcaplot.Size // --plot-size
	// precisionSet tells whether --precision was given.
	precisionSet bool
}

// monitorFlagNames are the flags that ask for the model's monitor section.
var monitorFlagNames = map[string]bool{"learn": true, "level": true, "warmup": true, "accept-after": true,
	"confirm": true, "limit-window": true, "standardize": true, "freeze": true, "trend": true, "trend-lambda": true,
	"excursion": true, "linear": true}

func replayFlags(o *replayOptions, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &o.Config
	fs.StringVar(&c.Learner, "learner", learners.KindIKPCA, "learner: ikpca, kha, window or batch")
	fs.StringVar(&c.Kernel, "kernel", learners.KernelRBF, "kernel: rbf, poly, linear, sigmoid or laplacian")
	fs.Float64Var(&c.Gamma, "gamma", 0, "kernel gamma (default 1/d, as scikit-learn)")
	fs.IntVar(&c.Degree, "degree", 3, "degree of the poly kernel")
	fs.Float64Var(&c.Coef0, "coef0", 0, "coef0 of the poly and sigmoid kernels (as learner.kernel.coef0 in the config)")
	fs.IntVar(&c.Components, "components", 2, "number k of components")
	fs.IntVar(&c.Budget, "budget", learners.DefaultBudget, "budget B: dictionary size (ikpca, kha), window length W (window), rows kept (batch: default all)")
	fs.Float64Var(&c.Forget, "forget", 1, "forgetting factor f in (0,1] per observation (ikpca)")
	fs.IntVar(&c.Passes, "passes", 1, "number of passes over the file")
	fs.Func("shuffle-seed", "shuffle the rows of every pass with this seed (default: file order)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want a non-negative integer: %w", err)
		}
		c.ShuffleSeed, c.Shuffle = v, true
		return nil
	})
	fs.StringVar(&o.in, "in", "", "input CSV file with a header line (required; - for stdin)")
	fs.Func("drop", "comma-separated columns to ignore, by header name or 0-based index (e.g. label,phase)", func(s string) error {
		for _, col := range strings.Split(s, ",") {
			if col = strings.TrimSpace(col); col != "" {
				c.Drop = append(c.Drop, col)
			}
		}
		return nil
	})
	fs.StringVar(&c.Out, "out", "", "write each row's projection to this CSV file")
	fs.StringVar(&c.ModelOut, "model-out", "", "write the model export (JSON) here at the end (required)")
	fs.Func("model-at", "also export the model after these row counts, as NAME.<count>.json beside --model-out (e.g. 10000,20000)", func(s string) error {
		for _, n := range strings.Split(s, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
			if err != nil || v < 1 {
				return fmt.Errorf("want positive row counts, got %q", n)
			}
			c.ModelAt = append(c.ModelAt, v)
		}
		slices.Sort(c.ModelAt)
		return nil
	})
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the learner's random generator")
	fs.StringVar(&c.Admission, "admission", "", "dictionary admission: ald (default) or coherence (ikpca)")
	fs.StringVar(&c.Eviction, "eviction", "", "dictionary eviction: centroid (default), lli, fifo or contribution (ikpca)")
	fs.Float64Var(&c.Tolerance, "tolerance", 0, "ALD threshold ν relative to k(x,x) (default 1e-3)")
	fs.Float64Var(&c.SwapRatio, "swap-ratio", 0, "lli eviction hysteresis: swap a member only for a point more than this many times as independent, ≥ 1 (default 2; ikpca)")
	fs.IntVar(&c.Refresh, "refresh", 0, "observations between refreshes of the published components (default: learner's)")
	fs.Float64Var(&c.LearningRate, "learning-rate", 0, "kha: η₀ of η_t = η₀·t₀/(t+t₀) (default 0.1)")
	fs.Float64Var(&c.Decay, "decay", 0, "kha: t₀ of the learning-rate schedule (default 1000)")
	fs.StringVar(&c.Rule, "rule", "", "kha: update rule gha (default), oja or apex (Kashima 2001)")
	fs.Float64Var(&c.Beta, "beta", 0, "kha rule gha: β of Kashima's eq. (12), > 0 (default 1: Sanger; 2: Oja's SGA)")
	fs.StringVar(&c.Gain, "gain", "", "kha: gain schedule et (default) or smd (stochastic meta-descent; rule gha with β 1), as learner.gain")
	fs.StringVar(&c.Dictionary, "dictionary", "", "kha: memorised set first (default: the first B rows) or kmeans (online k-means centroids), as learner.dictionary")
	fs.DurationVar(&c.Progress, "progress", 2*time.Second, "interval of the progress line on stderr (0 disables)")
	fs.StringVar(&c.Solver, "solver", "auto", "batch: eigensolver auto, dense, lanczos or fast (README: batch solvers)")
	fs.Float64Var(&c.Precision, "precision", learners.DefaultPrecision, "batch, --solver fast (or auto above the Gram cap), rbf: precision ε in (0, 0.1] of the fast Gauss transform; each covariance eigenvalue is within ε of the exact one")
	labelFlags(fs, &c.Label)
	monitorFlags(fs, &c.Monitor)
	reportFlags(fs, o)
	return fs
}

// labelFlags registers the flags of replay --label on fs.
func labelFlags(fs *flag.FlagSet, o *replay.LabelConfig) {
	fs.StringVar(&o.Column, "label", "", "label column (header name or 0-based index): run the classifier stage prequentially, print its accuracy, write predictions to --out (ikpca)")
	fs.Func("classes", "with --label: comma-separated class names, the order of the scores (default: the labels in the file, sorted)", func(s string) error {
		o.Classes = strings.Split(s, ",")
		return nil
	})
	fs.BoolVar(&o.Standardize, "standardize", false, "scale every feature column to mean 0 and standard deviation 1: running statistics of the learned rows (with --label: over the whole file first); recorded in the model export's preprocess section")
	fs.Float64Var(&o.Ridge, "ridge", 0, "with --label: classifier ridge λ (default 0.1)")
	fs.Float64Var(&o.Forget, "classifier-forget", 0, "with --label: classifier forgetting factor in (0,1] (default 1)")
	fs.StringVar(&o.Loss, "classifier-loss", "", "with --label: classifier loss squared (default) or hinge, as classifier.loss")
	fs.StringVar(&o.On, "classify-on", "coords", "with --label: coords (the learner's dictionary coordinates, basis-aware) or z (the published components, as a consumer of the outputs sees them; for comparison)")
}

// monitorFlags registers the monitoring flags of replay on fs.
func monitorFlags(fs *flag.FlagSet, o *replay.MonitorConfig) {
	fs.StringVar(&o.Learn, "learn", monitor.LearnAlways, "always: learn every row (then score it); normal: score first and learn only rows within the control limits, after the warm-up")
	fs.Float64Var(&o.Level, "level", monitor.DefaultLevel, "level of the SPE and T² control limits, in (0,1)")
	fs.IntVar(&o.Warmup, "warmup", 0, "rows known to be normal, learned unconditionally before the limits are in force (default 2 × budget, at least 100, at most 200)")
	fs.IntVar(&o.AcceptAfter, "accept-after", 0, "with --learn normal: accept a new regime after this many consecutive alarmed rows and learn again (0 = never; rows held by the trend gate do not count)")
	fs.IntVar(&o.Excursion, "excursion", 0, "with --learn normal: a run of at most this many alarms is learned as a normal excursion once 2 × confirm rows without alarm follow (default 50; negative: none)")
	fs.BoolVar(&o.Linear, "linear", true, "also monitor a linear residual (a running linear PCA of the learned rows) beside the kernel's: faults in one variable among many (for 2 ≤ dim ≤ 512; --linear=false: off)")
	fs.IntVar(&o.Confirm, "confirm", 0, "with --learn normal: a row within the limits is learned once this many later rows raised no alarm (default 10)")
	fs.IntVar(&o.Window, "limit-window", 0, "recent normal rows whose statistics give the limits (default 10/(1 − level), at least 100)")
	fs.StringVar(&o.Trend, "trend", monitor.DefaultTrend, "with --learn normal: ewma stops learning while the EWMA of the SPE's rank among the recent normal rows is above its limit (slow faults); off learns every row within the limits")
	fs.Float64Var(&o.TrendLambda, "trend-lambda", 0, "with --learn normal: weight in (0,1] of the trend gate's EWMA (default 2/(confirm + 1))")
	fs.StringVar(&o.FaultColumn, "fault-column", "", "column marking faulty rows (empty or 0: normal; anything else: faulty), left out of the features: print the detection by the monitor's alarms on stderr (single in-order pass of an online learner)")
	fs.BoolVar(&o.Freeze, "freeze", false, "with --standardize: stop the standardisation statistics at the end of the warm-up (default: when --forget is 1; --freeze=false keeps them moving)")
}

// reportFlags registers the flags of the offline report on fs.
func reportFlags(fs *flag.FlagSet, o *replayOptions) {
	r := &o.Report
	fs.StringVar(&r.Report, "report", "", "write a self-contained HTML report (the live page's plots over the replayed rows) to this file")
	fs.StringVar(&r.Plot, "plot", "", "write the report's plots as PNG files into this directory")
	o.size = kpcaplot.DefaultSize
	fs.Var(&o.size, "plot-size", fmt.Sprintf("size of the --plot PNG files in pixels, WIDTHxHEIGHT (%dx%d to %dx%d)", kpcaplot.MinW, kpcaplot.MinH, kpcaplot.MaxSide, kpcaplot.MaxSide))
	fs.IntVar(&r.Bucket, "report-bucket", 100, "rows per bucket of the report's time series (doubled as often as needed to keep at most 400 buckets)")
	fs.IntVar(&r.Window, "report-window", 1000, "report: every window/2 rows, the similarity of the learner's components to batch KPCA of the last window rows (memory ≈ 16·window² bytes, time ≈ one eigendecomposition of window² per window/2 rows: it slows the replay several-fold; 0 disables)")
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o replayOptions
	fs := replayFlags(&o, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "budget":
			o.BudgetSet = true
		case "precision":
			o.precisionSet = true
		case "freeze":
			o.Monitor.FreezeSet = true
		}
		if monitorFlagNames[f.Name] {
			o.Monitor.Set = true
		}
	})
	o.Report.Width, o.Report.Height = o.size.W, o.size.H
	if problems := o.problems(fs.Args()); len(problems) > 0 {
		fmt.Fprintf(stderr, "kpcastream replay: %s\n", strings.Join(problems, "; "))
		return errUsage
	}
	// A replay's product is its files: a reader of its messages that has
	// gone ("replay … 2>&1 | head -2") must not kill it before they are
	// written. Writes to the closed pipe fail (and are not retried).
	signal.Ignore(syscall.SIGPIPE)
	in, name, closeIn, err := openInput(o.in)
	if err != nil {
		return err
	}
	defer closeIn()
	return replay.Run(ctx, &o.Config, in, name, stdout, stderr)
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
