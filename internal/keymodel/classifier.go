package keymodel

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	lclassify "github.com/kpcastream/kpcastream/learners/classify"
)

// ErrLabel marks an observation whose label is none of the configured
// classes: the message is refused before anything is learned.
var ErrLabel = errors.New("processor: label is not one of the classifier's classes")

// Classes maps labels to class indices and back, for one pipeline.
type Classes struct {
	names []string
	index map[string]int
	pred  []codec.Scalar // the pred value of each class
}

// NewClasses returns the classes of names, in the order of the outputs'
// scores.
func NewClasses(names []string) *Classes {
	c := &Classes{names: names, index: make(map[string]int, len(names)), pred: make([]codec.Scalar, len(names))}
	for i, n := range names {
		c.index[n] = i
		c.pred[i] = codec.String(n)
		if f, err := strconv.ParseFloat(n, 64); err == nil && !math.IsInf(f, 0) && codec.Number(f).Text() == n {
			c.pred[i] = codec.Number(f)
		}
	}
	return c
}

// Names returns the class names.
func (c *Classes) Names() []string { return c.names }

// Len returns the number of classes.
func (c *Classes) Len() int { return len(c.names) }

// of returns the class index of label y, −1 when y is absent, or ErrLabel.
func (c *Classes) of(y codec.Scalar) (int, error) {
	if y.Kind == codec.ScalarNone {
		return -1, nil
	}
	if i, ok := c.index[y.Text()]; ok {
		return i, nil
	}
	return -1, fmt.Errorf("%w: %q (classes %q)", ErrLabel, y.Text(), c.names)
}

// Labels appends the class of each observation's label to dst (−1: no
// label); a label that is no class fails (ErrLabel, naming the
// observation).
func (c *Classes) Labels(dst []int, obs []codec.Observation) ([]int, error) {
	for i := range obs {
		y, err := c.of(obs[i].Y)
		if err != nil {
			return dst, fmt.Errorf("processor: observation %d: %w", i, err)
		}
		dst = append(dst, y)
	}
	return dst, nil
}

// classifier is one key's classifier on its learner's coordinates, with
// the labels of the message being applied and the key's accuracy window
// (not part of the snapshot: a restored key starts a new window).
type classifier struct {
	spec   *Spec
	ob     *lclassify.OnBasis
	ys     []int  // class of each observation of the message, −1: none
	ring   []bool // hits of the last labelled predictions
	next   int
	filled int
	nhit   int
}

// newClassifier returns the classifier of a key whose learner is l,
// restored from saved (nil: untrained). A learner without dictionary
// coordinates is an error wrapping learners.ErrConfig, a saved state that
// does not fit one wrapping learners.ErrState (the snapshot is refused
// like a corrupt one).
func newClassifier(s *Spec, l learners.Learner, saved *lclassify.State) (*classifier, error) {
	b, ok := l.(lclassify.Basis)
	if !ok {
		return nil, fmt.Errorf("%w: learner %q has no dictionary coordinates for the classifier", learners.ErrConfig, l.Kind())
	}
	cc := s.Classifier
	cc.Classes, cc.Dim = s.Classes.Len(), b.Budget()
	ob, err := lclassify.NewOnBasis(b, cc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", learners.ErrConfig, err)
	}
	if saved != nil {
		if err := ob.Classifier().Restore(saved); err != nil {
			return nil, fmt.Errorf("%w: classifier: %w", learners.ErrState, err)
		}
	}
	return &classifier{spec: s, ob: ob, ring: make([]bool, max(s.Window, 1))}, nil
}

// state returns a copy of the classifier's state (nil without one).
func (k *classifier) state() *lclassify.State {
	if k == nil {
		return nil
	}
	return k.ob.Classifier().State()
}

// check maps the labels of a message to classes before anything is
// learned: a label that is no class fails the message (ErrLabel).
func (k *classifier) check(obs []codec.Observation) error {
	var err error
	k.ys, err = k.spec.Classes.Labels(k.ys[:0], obs)
	return err
}

// learn has the learner learn x, the classifier's weights following its
// change of coordinates.
func (k *classifier) learn(x []float64) error { return k.ob.Learn(x) }

// step predicts observation i (x) and learns its label, if any; out (nil
// while the learner warms up) gets pred and scores. Prequential: the
// prediction is made before the label is learned.
func (k *classifier) step(i int, x []float64, out *codec.Output) error {
	cs := k.spec.Classes
	var dst []float64
	if out != nil {
		dst = out.Scores
		if cap(dst) >= cs.Len() {
			dst = dst[:cs.Len()]
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
		out.Pred, out.Scores = cs.pred[pred], scores
		k.count(pred, y)
	}
	if y >= 0 {
		if mt := k.spec.Meter; mt != nil {
			mt.Label(y)
		}
		if err := k.ob.Teach(y); err != nil {
			return fmt.Errorf("processor: classifier learn observation %d: %w: %w", i, learners.ErrNumerical, err)
		}
	}
	return nil
}

// count records a published prediction pred of a message with class y
// (−1: unlabelled) in the accuracy window and the meter.
func (k *classifier) count(pred, y int) {
	if y >= 0 {
		hit := pred == y
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
	}
	if mt := k.spec.Meter; mt != nil {
		acc, _ := k.accuracy()
		mt.Prediction(pred, y, acc)
	}
}

// accuracy returns the key's prequential accuracy over its window and the
// number of labelled predictions it holds.
func (k *classifier) accuracy() (float64, int) {
	if k == nil || k.filled == 0 {
		return 0, 0
	}
	return float64(k.nhit) / float64(k.filled), k.filled
}

// export adds the classifier section to the key's model export (nothing
// without a classifier). The model's points are the learner's dictionary
// in order, which the section's alpha rows follow.
func (k *classifier) export(m *learners.Model) error {
	if k == nil {
		return nil
	}
	c, err := k.ob.Export(k.spec.Classes.Names())
	if err != nil {
		return err
	}
	if len(c.Alpha) != len(m.Points) {
		return fmt.Errorf("processor: classifier export has %d rows for %d points", len(c.Alpha), len(m.Points))
	}
	m.Classifier = c
	return nil
}
