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
	// Scratch is the working memory shared by the learners this spec
	// builds (learners.ShareScratch: those that can take it); nil: each
	// learner has its own. The models of a spec with one must all be used
	// from one goroutine: give each worker its own copy (WithScratch).
	Scratch *learners.Scratch
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
	// OnZ puts the classifier stage on the learner's published components
	// (Classifier.Dim of them) instead of its dictionary coordinates: it
	// learns through LearnLabelled only (Apply refuses it) and has no
	// state in a snapshot nor section in the export.
	OnZ bool
	// Preprocess is a fixed preprocessing the caller applied to every
	// observation before the model saw it (a replay's standardisation over
	// its labelled file), exported as the preprocess section (in place of
	// a standardising monitor's); nil: none.
	Preprocess *learners.ModelPreprocess
	// Synced has Export catch up a learner's deferred work (Sync) on a
	// copy first, so that an export leaves the model as it was.
	Synced bool
	// HideMonitor keeps the monitor's sections out of the export (a
	// replay whose monitor runs with its defaults, unasked).
	HideMonitor bool
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
	zc   *lclassify.Classifier // the classifier on z (Spec.OnZ)
	z    []float64             // its input's scratch
	ws   *learners.Scratch     // the working memory the learner shares (UseScratch); nil: its own
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

// WithScratch returns a copy of s whose learners share a new Scratch: the
// spec of one goroutine (a worker) whose keys are used one at a time.
func (s *Spec) WithScratch() *Spec {
	c := *s
	c.Scratch = learners.NewScratch()
	return &c
}

// build returns the model of learner l, its classifier and monitor
// restored from st (nil parts: fresh).
func (s *Spec) build(l learners.Learner, st State) (*Model, error) {
	m := &Model{spec: s, l: l}
	m.UseScratch(s.Scratch)
	switch {
	case s.Classes != nil && s.OnZ:
		cc := s.Classifier
		cc.Classes = s.Classes.Len()
		zc, err := lclassify.New(cc)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", learners.ErrConfig, err)
		}
		m.zc, m.z = zc, make([]float64, cc.Dim)
	case s.Classes != nil:
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
// the spec's configuration, the budget policy included), sharing the
// working memory the model shared (UseScratch).
func (m *Model) Reset() error {
	n, err := New(m.spec)
	if err != nil {
		return err
	}
	n.UseScratch(m.ws)
	*m = *n
	return nil
}

// UseScratch makes the model's learner take its working memory from ws
// (learners.ShareScratch), now and after a Reset; the model must then be
// used from the goroutine that uses ws. A nil ws does nothing.
func (m *Model) UseScratch(ws *learners.Scratch) {
	if ws == nil || m.ws == ws {
		return
	}
	if learners.ShareScratch(m.l, ws) {
		m.ws = ws
	}
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

// Monitor returns the model's monitor (nil without one), for a caller
// that steps it row by row (monitor.Step with Learner) and reports on it.
func (m *Model) Monitor() *monitor.Monitor { return m.mon }

// Export returns the model export: the learner's (synced on a copy with
// Spec.Synced), with the classifier's section and the monitor's and
// preprocessing's when the model has them.
func (m *Model) Export() (*learners.Model, error) {
	x, err := m.learnerModel()
	if err != nil {
		return nil, err
	}
	if err := m.cls.export(x); err != nil {
		return nil, err
	}
	if m.mon != nil && !m.spec.HideMonitor {
		m.mon.Export(x)
	}
	if m.spec.Preprocess != nil {
		x.Preprocess = m.spec.Preprocess
	}
	return x, nil
}

// learnerModel is the learner's model export, synced with Spec.Synced.
func (m *Model) learnerModel() (*learners.Model, error) {
	if m.spec.Synced {
		return SyncedModel(m.l)
	}
	return m.l.Model()
}

// syncer is a learner that can catch up on deferred work on demand.
type syncer interface{ Sync(maxIter int) error }

// SyncedModel is the model export of l after catching up its deferred
// work (Sync) on a copy, so that an export does not perturb l.
func SyncedModel(l learners.Learner) (*learners.Model, error) {
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
