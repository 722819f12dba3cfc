package processor

import (
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	lclassify "github.com/kpcastream/kpcastream/learners/classify"
)

// DefaultAccuracyWindow is the default of ClassifierConfig.Window.
const DefaultAccuracyWindow = 1000

// ClassifierConfig configures a pipeline's classifier stage: an online
// classifier per key on the learner's whitened dictionary coordinates,
// trained prequentially (see classify and the README's "Classifier
// stage"). Its memory per key is fixed by the budget B and the number of
// classes C: 8·((B+1)² + (C+2)(B+1) + C) bytes, beside the learner's.
type ClassifierConfig struct {
	// Classes names the classes, in the order of the outputs' scores (at
	// least 2, unique, valid UTF-8, at most 256 bytes each). A label y
	// matches the class whose name equals its text: a string as it is, a
	// number in its shortest form (3, 2.5, -1, 1e+21). The predicted class
	// pred is written as a number when its name is one in that form, else
	// as a string. Required.
	Classes []string `yaml:"classes"`
	// Ridge is the ridge penalty λ > 0 in units of k(x,x) (1 for rbf).
	// Default 0.1.
	Ridge float64 `yaml:"ridge"`
	// Forget is the classifier's forgetting factor β ∈ (0, 1] per
	// labelled observation; 0 means 1 (none).
	Forget float64 `yaml:"forget"`
	// Loss is the classifier's training loss: squared (the default:
	// regularised least squares on the class indicators) or hinge (the
	// one-vs-rest squared hinge on the same recursion; README, "Classifier
	// stage").
	Loss string `yaml:"loss"`
	// Window is the number of labelled predictions of a key over which
	// kpcastream_classifier_accuracy is computed. Default 1000.
	Window int `yaml:"window"`
}

// withDefaults returns c with its optional fields set.
func (c ClassifierConfig) withDefaults() ClassifierConfig {
	if c.Window == 0 {
		c.Window = DefaultAccuracyWindow
	}
	cc := c.model(1).WithDefaults()
	c.Ridge, c.Forget, c.Loss = cc.Ridge, cc.Forget, cc.Loss
	return c
}

// model returns the lclassify.Config of c for a learner budget b.
func (c ClassifierConfig) model(b int) lclassify.Config {
	return lclassify.Config{Classes: len(c.Classes), Dim: b, Ridge: c.Ridge, Forget: c.Forget, Loss: c.Loss}
}

// validate reports every problem of c for a pipeline with learner lc,
// each a *fielderr.Error with a path relative to c ("classes").
func (c ClassifierConfig) validate(lc learners.Config) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, configErr(field, format, args...))
	}
	if len(c.Classes) < 2 {
		bad("classes", "need at least 2 classes, got %d", len(c.Classes))
	}
	seen := map[string]bool{}
	for i, name := range c.Classes {
		switch {
		case name == "":
			bad("classes", "class %d is empty", i)
		case !utf8.ValidString(name):
			bad("classes", "class %d is not valid UTF-8", i)
		case len(name) > codec.DefaultMaxLabel:
			bad("classes", "class %d is longer than %d bytes", i, codec.DefaultMaxLabel)
		case seen[name]:
			bad("classes", "class %q is listed twice", name)
		}
		seen[name] = true
	}
	if c.Window < 0 {
		bad("window", "must be ≥ 0, got %d", c.Window)
	}
	if k := lc.WithDefaults().Learner; k != learners.KindIKPCA && k != learners.KindKHA {
		bad("classes", "a classifier needs the ikpca or kha learner (their dictionary coordinates), the pipeline has %q", k)
	}
	mc := c.model(max(lc.WithDefaults().Budget, 1))
	mc.Classes = max(mc.Classes, 2) // reported above
	return append(errs, fielderr.Prefix(scope, "", mc.Validate())...)
}

// errLabel marks an observation whose label is none of the configured
// classes: the message is dead-lettered (reason "label") before anything
// is learned.
var errLabel = keymodel.ErrLabel

// stage is a pipeline's classifier stage: its classes and metrics.
type stage struct {
	cfg     ClassifierConfig
	classes *keymodel.Classes
	labels  []prometheus.Counter // kpcastream_classifier_labels_total by class
	hits    []prometheus.Counter // kpcastream_classifier_predictions_total by predicted class, result correct
	misses  []prometheus.Counter // … result wrong
	blind   []prometheus.Counter // … result unlabelled
	acc     prometheus.Gauge     // kpcastream_classifier_accuracy
}

// newStage returns the stage of a pipeline, or nil without a classifier.
func newStage(pc PipelineConfig, m *metrics) *stage {
	if pc.Classifier == nil {
		return nil
	}
	cfg := pc.Classifier.withDefaults()
	s := &stage{cfg: cfg, classes: keymodel.NewClasses(cfg.Classes), acc: m.clsAccuracy.WithLabelValues(pc.Name)}
	for _, n := range cfg.Classes {
		s.labels = append(s.labels, m.clsLabels.WithLabelValues(pc.Name, n))
		s.hits = append(s.hits, m.clsPredictions.WithLabelValues(pc.Name, n, "correct"))
		s.misses = append(s.misses, m.clsPredictions.WithLabelValues(pc.Name, n, "wrong"))
		s.blind = append(s.blind, m.clsPredictions.WithLabelValues(pc.Name, n, "unlabelled"))
	}
	return s
}
