package keymodel

import (
	"errors"
	"fmt"

	"github.com/kpcastream/kpcastream/learners"
	lclassify "github.com/kpcastream/kpcastream/learners/classify"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// ErrIncompatible marks a snapshot whose learner configuration differs
// from the spec's in more than the budget policy.
var ErrIncompatible = errors.New("processor: snapshot does not match the pipeline's learner config")

// ErrNoMonitor marks an Accept on a model without a monitor.
var ErrNoMonitor = errors.New("no monitor")

// Spec is how the models of one pipeline are built: shared by its keys,
// read-only once built.
type Spec struct {
	// Learner is the learner configuration of a new or reset key.
	Learner learners.Config
	// NewLearner builds a learner; nil: learners.New.
	NewLearner func(learners.Config) (learners.Learner, error)
	// Classes are the classifier stage's classes; nil: no classifier.
	Classes *Classes
	// Classifier is the stage's configuration (its Classes and Dim are
	// set from Classes and the learner's budget).
	Classifier lclassify.Config
	// Window is the number of labelled predictions of a key's accuracy.
	Window int
	// Monitor is the monitor's configuration, defaults applied; nil: no
	// monitor (and no preprocessing).
	Monitor *monitor.Config
	// Meter counts labels, predictions and alarms; nil: nothing.
	Meter Meter
}

// Meter counts what the models of a spec do, for the caller's metrics.
type Meter interface {
	// Label counts a label of class learned.
	Label(class int)
	// Prediction counts a published prediction pred of an observation of
	// class (−1: unlabelled), and acc the key's accuracy over its window
	// after it (unchanged for an unlabelled one).
	Prediction(pred, class int, acc float64)
	// Alarm counts a judged observation's alarm (never AlarmNone).
	Alarm(a monitor.Alarm)
}

// State is a model's state as a snapshot holds it: the learner's, and the
// classifier's and monitor's when the model has them.
type State struct {
	Learner    *learners.State
	Classifier *lclassify.State
	Monitor    *monitor.State
}

// Model is one key's model. It is not safe for concurrent use.
type Model struct {
	spec *Spec
	l    learners.Learner
	cls  *classifier
	mon  *monitor.Monitor
	in   []float64 // the monitor's scratch
	xs   []float64
}

// New returns a fresh model of s.
func New(s *Spec) (*Model, error) {
	l, err := s.newLearner(s.Learner)
	if err != nil {
		return nil, err
	}
	return s.build(l, State{})
}

// Restore returns the model saved in st. The budget policy (eviction,
// swap_ratio) is the learner's own: a key keeps its snapshot's until it
// is reset, so that a changed default or setting never refuses existing
// keys, and kept reports that it differs from the spec's. Anything else
// that differs refuses the snapshot (ErrIncompatible). A classifier state
// that does not fit is an error wrapping learners.ErrState; a monitor
// state that does not fit (settings changed since) starts a fresh
// monitor, a new warm-up.
func Restore(s *Spec, st State) (m *Model, kept bool, err error) {
	if st.Learner == nil {
		return nil, false, fmt.Errorf("%w: empty state", learners.ErrState)
	}
	lc := s.Learner
	if got, want := st.Learner.Config.WithDefaults(), s.Learner.WithDefaults(); got != want {
		alt := want
		alt.Eviction, alt.SwapRatio = got.Eviction, got.SwapRatio
		if alt != got {
			return nil, false, fmt.Errorf("%w: snapshot has %+v, pipeline has %+v", ErrIncompatible, got, want)
		}
		lc, kept = alt, true
	}
	l, err := s.newLearner(lc)
	if err != nil {
		return nil, false, err
	}
	if err := l.Restore(st.Learner); err != nil {
		return nil, false, err
	}
	m, err = s.build(l, st)
	return m, kept, err
}

// With returns a model around learner l (built by the caller, say with
// options of its own), with a fresh classifier and monitor of s.
func With(s *Spec, l learners.Learner) (*Model, error) { return s.build(l, State{}) }

func (s *Spec) newLearner(c learners.Config) (learners.Learner, error) {
	if s.NewLearner != nil {
		return s.NewLearner(c)
	}
	return learners.New(c)
}

// build returns the model of learner l, its classifier and monitor
// restored from st (nil parts: fresh).
func (s *Spec) build(l learners.Learner, st State) (*Model, error) {
	m := &Model{spec: s, l: l}
	if s.Classes != nil {
		c, err := newClassifier(s, l, st.Classifier)
		if err != nil {
			return nil, err
		}
		m.cls = c
	}
	if s.Monitor != nil {
		c := *s.Monitor
		mon, err := monitor.New(c)
		if err != nil {
			return nil, fmt.Errorf("keymodel: monitor: %w", err)
		}
		if st.Monitor != nil && mon.Restore(st.Monitor) != nil {
			// The state does not fit the monitor: settings changed since
			// the snapshot (standardize, window, confirm, learn). Restore
			// left mon untouched: the key starts a fresh warm-up instead
			// of failing its load.
			mon, _ = monitor.New(c)
		}
		m.mon, m.in, m.xs = mon, make([]float64, c.Dim), make([]float64, c.Dim)
	}
	return m, nil
}

// Learner returns the model's learner (for its summary and counts; the
// caller changes it only through the model).
func (m *Model) Learner() learners.Learner { return m.l }

// Snapshot returns a copy of the model's state.
func (m *Model) Snapshot() State {
	st := State{Learner: m.l.State(), Classifier: m.cls.state()}
	if m.mon != nil {
		st.Monitor = m.mon.State()
	}
	return st
}

// Reset replaces the model by a fresh one of its spec (the learner with
// the spec's configuration, the budget policy included).
func (m *Model) Reset() error {
	n, err := New(m.spec)
	if err != nil {
		return err
	}
	*m = *n
	return nil
}

// Accept makes the monitor accept the current regime: its control limits
// are cleared and a new warm-up begins (ErrNoMonitor without one).
func (m *Model) Accept() error {
	if m.mon == nil {
		return ErrNoMonitor
	}
	m.mon.Accept()
	return nil
}

// Monitored reports whether the model has a monitor.
func (m *Model) Monitored() bool { return m.mon != nil }

// Accuracy returns the classifier's prequential accuracy over its window
// and the number of labelled predictions it holds (0, 0 without one).
func (m *Model) Accuracy() (float64, int) { return m.cls.accuracy() }

// Export returns the model export: the learner's, with the classifier's
// section and the monitor's and preprocessing's when the model has them.
func (m *Model) Export() (*learners.Model, error) {
	x, err := m.l.Model()
	if err != nil {
		return nil, err
	}
	if err := m.cls.export(x); err != nil {
		return nil, err
	}
	if m.mon != nil {
		m.mon.Export(x)
	}
	return x, nil
}
