package replay

import (
	"time"

	"github.com/kpcastream/kpcastream/learners"
)

// Config is what a replay does: the meaning of kpcastream replay's flags
// (named after each field), checked by the command before Run.
type Config struct {
	Learner, Kernel     string  // --learner, --kernel
	Gamma, Coef0        float64 // --gamma, --coef0
	Degree              int     // --degree
	Components, Budget  int     // --components, --budget
	BudgetSet           bool    // --budget was given (batch: else every row)
	Forget              float64 // --forget
	Passes              int     // --passes, ≥ 1
	ShuffleSeed         uint64  // --shuffle-seed
	Shuffle             bool    // --shuffle-seed was given
	Drop                []string
	Seed                uint64
	Admission, Eviction string
	Tolerance           float64
	SwapRatio           float64
	Refresh             int
	LearningRate, Decay float64
	Rule                string  // kha update rule
	Beta                float64 // kha gha β
	Gain                string  // kha gain schedule: et or smd ("" et)
	Dictionary          string  // kha memorised set: first or kmeans ("" first)
	Solver              string  // batch: auto|dense|lanczos|fast
	Precision           float64 // batch fast rbf: ε

	Out      string  // --out: one CSV line per fed row ("" = none)
	ModelOut string  // --model-out: the model export at the end
	ModelAt  []int64 // --model-at: exports after these row counts, ascending
	// Progress is the interval of the progress line on stderr (0: none).
	Progress time.Duration

	Monitor MonitorConfig
	Label   LabelConfig
	Report  ReportConfig
}

// MonitorConfig are the monitoring settings of a replay of an online
// learner (learners/monitor). A replay always runs the monitor (learn
// always, limits at 0.99: the --out columns spe_limit, t2_limit and
// alarm); the model export gains its "monitor" section only when Set,
// and its "preprocess" section with Label.Standardize.
type MonitorConfig struct {
	Learn       string
	Level       float64
	Warmup      int
	AcceptAfter int
	Confirm     int
	Window      int
	Trend       string
	TrendLambda float64
	Excursion   int  // monitor.Config.Excursion (0: default)
	Linear      bool // monitor.Config.Linear for 2 ≤ dim ≤ monitor.MaxLinearDim (off otherwise), with the learner's components (replay's --linear: default true)
	Freeze      bool
	FreezeSet   bool // Freeze was given (else monitor.DefaultFreeze)
	Set         bool // a monitoring setting was given: export and summary
	// FaultColumn marks faulty rows (empty or 0: normal); the detection
	// by the monitor's alarms is printed.
	FaultColumn string
}

// LabelConfig is replay --label: a prequential run of the classifier
// stage over a labelled file.
type LabelConfig struct {
	Column      string   // the label column ("" = off)
	Classes     []string // class order (default: the labels found, sorted)
	Standardize bool     // z-score the feature columns (over the file with a label)
	Ridge       float64
	Forget      float64
	Loss        string // classifier loss: squared or hinge ("" squared)
	On          string // coords (basis-aware) or z (the published components)
}

// ReportConfig are the settings of the offline report.
type ReportConfig struct {
	Report string // an HTML file ("" = none)
	Plot   string // a directory of PNG files ("" = none)
	Bucket int    // rows per bucket
	Window int    // rows of the similarity to batch KPCA (0: none)
	Width  int    // of the PNG files, pixels
	Height int
}

func (o *ReportConfig) enabled() bool { return o.Report != "" || o.Plot != "" }

// learnerConfig is the learner configuration for rows of d values (a
// kernel parameter the kernel does not use is left at zero).
func (c *Config) learnerConfig(d int) learners.Config {
	cfg := learners.Config{
		Learner: c.Learner, Dim: d, Components: c.Components, Budget: c.Budget,
		Kernel: learners.Kernel{Name: c.Kernel, Gamma: c.Gamma, Degree: c.Degree, Coef0: c.Coef0},
		Forget: c.Forget, Admission: c.Admission, Eviction: c.Eviction, Tolerance: c.Tolerance, SwapRatio: c.SwapRatio,
		Refresh: c.Refresh, LearningRate: c.LearningRate, Decay: c.Decay, Seed: c.Seed,
		Rule: c.Rule, Beta: c.Beta, Gain: c.Gain, Dictionary: c.Dictionary,
	}
	if c.Kernel != learners.KernelPoly {
		cfg.Kernel.Degree = 0
	}
	if c.Kernel != learners.KernelPoly && c.Kernel != learners.KernelSigmoid {
		cfg.Kernel.Coef0 = 0
	}
	return cfg
}
