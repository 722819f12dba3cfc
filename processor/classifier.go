package processor

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/fielderr"
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
	c.Ridge, c.Forget = cc.Ridge, cc.Forget
	return c
}

// model returns the lclassify.Config of c for a learner budget b.
func (c ClassifierConfig) model(b int) lclassify.Config {
	return lclassify.Config{Classes: len(c.Classes), Dim: b, Ridge: c.Ridge, Forget: c.Forget}
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
var errLabel = errors.New("processor: label is not one of the classifier's classes")

// classes maps labels to class indices and back, for one pipeline.
type classes struct {
	names []string
	index map[string]int
	pred  []codec.Scalar // the pred value of each class
}

func newClasses(names []string) *classes {
	c := &classes{names: names, index: make(map[string]int, len(names)), pred: make([]codec.Scalar, len(names))}
	for i, n := range names {
		c.index[n] = i
		c.pred[i] = codec.String(n)
		if f, err := strconv.ParseFloat(n, 64); err == nil && !math.IsInf(f, 0) && codec.Number(f).Text() == n {
			c.pred[i] = codec.Number(f)
		}
	}
	return c
}

// of returns the class index of label y, −1 when y is absent, or errLabel.
func (c *classes) of(y codec.Scalar) (int, error) {
	if y.Kind == codec.ScalarNone {
		return -1, nil
	}
	if i, ok := c.index[y.Text()]; ok {
		return i, nil
	}
	return -1, fmt.Errorf("%w: %q (classes %q)", errLabel, y.Text(), c.names)
}

// stage is a pipeline's classifier stage: its classes and metrics.
type stage struct {
	cfg     ClassifierConfig
	classes *classes
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
	s := &stage{cfg: cfg, classes: newClasses(cfg.Classes), acc: m.clsAccuracy.WithLabelValues(pc.Name)}
	for _, n := range cfg.Classes {
		s.labels = append(s.labels, m.clsLabels.WithLabelValues(pc.Name, n))
		s.hits = append(s.hits, m.clsPredictions.WithLabelValues(pc.Name, n, "correct"))
		s.misses = append(s.misses, m.clsPredictions.WithLabelValues(pc.Name, n, "wrong"))
		s.blind = append(s.blind, m.clsPredictions.WithLabelValues(pc.Name, n, "unlabelled"))
	}
	return s
}

// keyClassifier is one key's classifier on its learner's coordinates,
// with the labels of the message being applied and the key's accuracy
// window (not part of the snapshot: a restored key starts a new window).
type keyClassifier struct {
	st     *stage
	ob     *lclassify.OnBasis
	ys     []int  // class of each observation of the message, −1: none
	ring   []bool // hits of the last labelled predictions
	next   int
	filled int
	nhit   int
}

// newKeyClassifier returns the classifier of a key whose learner is l,
// restored from saved (nil: untrained), or nil when the pipeline has no
// classifier stage. A learner without dictionary coordinates, or a saved
// state that does not fit, is an error wrapping learners.ErrState (the
// snapshot is refused like a corrupt one).
func newKeyClassifier(st *stage, l learners.Learner, saved *lclassify.State) (*keyClassifier, error) {
	if st == nil {
		return nil, nil
	}
	b, ok := l.(lclassify.Basis)
	if !ok {
		return nil, fmt.Errorf("%w: learner %q has no dictionary coordinates for the classifier", learners.ErrConfig, l.Kind())
	}
	ob, err := lclassify.NewOnBasis(b, st.cfg.model(b.Budget()))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", learners.ErrConfig, err)
	}
	if saved != nil {
		if err := ob.Classifier().Restore(saved); err != nil {
			return nil, fmt.Errorf("%w: classifier: %w", learners.ErrState, err)
		}
	}
	return &keyClassifier{st: st, ob: ob, ring: make([]bool, max(st.cfg.Window, 1))}, nil
}

// state returns a copy of the classifier's state for a snapshot (nil
// without a classifier).
func (k *keyClassifier) state() *lclassify.State {
	if k == nil {
		return nil
	}
	return k.ob.Classifier().State()
}

// check maps the labels of a message to classes before anything is
// learned: a label that is no class fails the message (errLabel).
func (k *keyClassifier) check(obs []codec.Observation) error {
	var err error
	k.ys, err = k.st.classes.labels(k.ys[:0], obs)
	return err
}

// labels appends the class of each observation's label to dst (−1: no
// label); a label that is no class fails (errLabel, naming the
// observation).
func (c *classes) labels(dst []int, obs []codec.Observation) ([]int, error) {
	for i := range obs {
		y, err := c.of(obs[i].Y)
		if err != nil {
			return dst, fmt.Errorf("processor: observation %d: %w", i, err)
		}
		dst = append(dst, y)
	}
	return dst, nil
}

// learn has the learner learn x, the classifier's weights following its
// change of coordinates.
func (k *keyClassifier) learn(x []float64) error { return k.ob.Learn(x) }

// step predicts observation i (x) and learns its label, if any; out (nil
// while the learner warms up) gets pred and scores. Prequential: the
// prediction is made before the label is learned.
func (k *keyClassifier) step(i int, x []float64, out *codec.Output) error {
	var dst []float64
	if out != nil {
		dst = out.Scores
		if cap(dst) >= k.st.classes.len() {
			dst = dst[:k.st.classes.len()]
		} else {
			dst = nil
		}
	}
	// The learner has learned x by now: a failure here is numerical
	// (ErrNumerical: the message counts as applied and is dead-lettered,
	// as a learner's own numerical failure is), never "untouched".
	pred, scores, err := k.ob.Predict(dst, x)
	if err != nil {
		return fmt.Errorf("processor: classify observation %d: %w: %w", i, learners.ErrNumerical, err)
	}
	y := k.ys[i]
	if out != nil {
		out.Pred, out.Scores = k.st.classes.pred[pred], scores
		k.count(pred, y)
	}
	if y >= 0 {
		k.st.labels[y].Inc()
		if err := k.ob.Teach(y); err != nil {
			return fmt.Errorf("processor: classifier learn observation %d: %w: %w", i, learners.ErrNumerical, err)
		}
	}
	return nil
}

func (c *classes) len() int { return len(c.names) }

// count records a published prediction pred of a message with class y
// (−1: unlabelled) in the metrics and the accuracy window.
func (k *keyClassifier) count(pred, y int) {
	if y < 0 {
		k.st.blind[pred].Inc()
		return
	}
	hit := pred == y
	if hit {
		k.st.hits[pred].Inc()
	} else {
		k.st.misses[pred].Inc()
	}
	if k.filled == len(k.ring) {
		if k.ring[k.next] {
			k.nhit--
		}
	} else {
		k.filled++
	}
	k.ring[k.next] = hit
	if hit {
		k.nhit++
	}
	k.next = (k.next + 1) % len(k.ring)
	k.st.acc.Set(float64(k.nhit) / float64(k.filled))
}

// Accuracy returns the key's prequential accuracy over its window and the
// number of labelled predictions it holds.
func (k *keyClassifier) accuracy() (float64, int) {
	if k == nil || k.filled == 0 {
		return 0, 0
	}
	return float64(k.nhit) / float64(k.filled), k.filled
}

// export adds the classifier section to the key's model export (nothing
// without a classifier). The model's points are the learner's dictionary
// in order, which the section's alpha rows follow.
func (k *keyClassifier) export(m *learners.Model) error {
	if k == nil {
		return nil
	}
	c, err := k.ob.Export(k.st.cfg.Classes)
	if err != nil {
		return err
	}
	if len(c.Alpha) != len(m.Points) {
		return fmt.Errorf("processor: classifier export has %d rows for %d points", len(c.Alpha), len(m.Points))
	}
	m.Classifier = c
	return nil
}
