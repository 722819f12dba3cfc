package replay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// keyModel is everything a replay learns for its one key: a
// keymodel.Model, the processor's own key model type, built in one place
// (newKeyModel) from the flags: the learner and, as they ask, its monitor
// (limits, gated learning, running standardisation), the classifier stage
// and a fixed preprocessing. The fields beside it are views of it that
// the replay's steps and summaries read.
type keyModel struct {
	*keymodel.Model
	cfg learners.Config
	l   learners.Learner
	// fitter is the batch learner's Fit (nil for an online learner).
	fitter interface{ Fit() error }
	// mon is the monitor of an online learner without a label (else nil);
	// monSet tells whether its sections go into the export.
	mon    *monitor.Monitor
	monSet bool
}

// newKeyModel builds the key model of c for rows of d values; classes is
// nil without a label column, pre the standardisation of a labelled file
// (measured over it; nil: none).
func newKeyModel(c *Config, d int, classes []string, pre *learners.ModelPreprocess, stderr io.Writer) (*keyModel, error) {
	m := &keyModel{cfg: c.learnerConfig(d)}
	var err error
	if m.l, err = learners.New(m.cfg); err != nil {
		return nil, fmt.Errorf("learner settings: %w", err)
	}
	m.fitter, _ = m.l.(interface{ Fit() error })
	if b, ok := m.l.(*learners.Batch); ok {
		if err := b.SetFitOptions(batchOptions(c, stderr)); err != nil {
			return nil, fmt.Errorf("learner settings: %w", err)
		}
	}
	// The export syncs a copy, so that writing one (--model-at) does not
	// perturb the replay.
	s := &keymodel.Spec{Learner: m.cfg, Synced: true, Preprocess: pre}
	switch {
	case classes != nil:
		if err := classifierSpec(s, c, m.l, classes); err != nil {
			return nil, err
		}
	case m.fitter == nil:
		mc := monitorConfig(&c.Monitor, m.cfg, c.Label.Standardize)
		if err := mc.Validate(); err != nil {
			return nil, fmt.Errorf("monitor settings: %w", err)
		}
		s.Monitor, s.HideMonitor = &mc, !c.Monitor.Set
	}
	if m.Model, err = keymodel.With(s, m.l); err != nil {
		return nil, err
	}
	m.mon, m.monSet = m.Monitor(), m.Monitor() != nil && c.Monitor.Set
	return m, nil
}

// classifierSpec adds the classifier stage of --label to s: on the
// learner's dictionary coordinates, or on its published components with
// --classify-on z (whose classifier is not exported).
func classifierSpec(s *keymodel.Spec, c *Config, l learners.Learner, classes []string) error {
	basis, ok := l.(classify.Basis)
	if !ok {
		return fmt.Errorf("learner %q has no dictionary coordinates for the classifier", l.Kind())
	}
	s.Classes = keymodel.NewClasses(classes)
	s.Classifier = classify.Config{Classes: len(classes), Ridge: c.Label.Ridge, Forget: c.Label.Forget, Loss: c.Label.Loss}
	check := s.Classifier
	check.Dim = basis.Budget()
	if err := check.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("classifier settings: %w", err)
	}
	if s.OnZ = c.Label.On == "z"; s.OnZ {
		s.Classifier.Dim = c.Components
		if err := s.Classifier.WithDefaults().Validate(); err != nil {
			return fmt.Errorf("classifier settings: %w", err)
		}
	}
	return nil
}

// monitorConfig returns the replay's monitor configuration for the
// learner configuration cfg, defaults applied.
func monitorConfig(o *MonitorConfig, cfg learners.Config, standardize bool) monitor.Config {
	freeze := o.Freeze
	if !o.FreezeSet {
		freeze = standardize && monitor.DefaultFreeze(cfg.Forget)
	}
	c := monitor.Config{Level: o.Level, Learn: o.Learn, Warmup: o.Warmup, AcceptAfter: o.AcceptAfter,
		Confirm: o.Confirm, Window: o.Window, Trend: o.Trend, TrendLambda: o.TrendLambda, Forget: cfg.Forget, Standardize: standardize, Freeze: freeze, Dim: cfg.Dim,
		Excursion: o.Excursion, Linear: o.Linear && cfg.Dim >= 2 && cfg.Dim <= monitor.MaxLinearDim}
	if c.Linear {
		c.LinearComponents = min(cfg.Components, cfg.Dim-1)
	}
	return c.WithDefaults(cfg.Budget)
}

// syncedModel is the model export of a learner synced on a copy.
var syncedModel = keymodel.SyncedModel

// export is the key model's export (keymodel.Model.Export): the
// learner's, synced on a copy, with the sections of the monitor, the
// classifier and the preprocessing.
func (m *keyModel) export() (*learners.Model, error) {
	e, err := m.Export()
	if err != nil {
		return nil, fmt.Errorf("model export: %w", err)
	}
	return e, nil
}

// write writes the key model's export to path.
func (m *keyModel) write(path string) error {
	e, err := m.export()
	if err != nil {
		return err
	}
	b, err := codec.EncodeModel(e)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// writeFileAtomic writes b to a temporary file beside path and renames
// it, readable by all (0644) as a file written with os.Create.
func writeFileAtomic(path string, b []byte) error {
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeAtomic writes path through a temporary file beside it, renamed
// once write succeeded.
func writeAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = write(tmp)
	// os.CreateTemp makes the file 0600; an export is meant to be read by
	// other programs and users, like any file written with os.Create.
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// writeFinal writes the export at the end of a replay of fed rows. A
// learner that never became ready because the monitor's standardisation
// still holds back every row (a file shorter than half the warm-up) is
// an error that says so and how to fix it.
func (m *keyModel) writeFinal(path string, fed int64) error {
	err := m.write(path)
	if !errors.Is(err, learners.ErrNotReady) || m.mon == nil {
		return err
	}
	if c := m.mon.Config(); c.Standardize && !m.mon.State().Settled {
		return fmt.Errorf("%w: --standardize holds back the first %d rows (half the warm-up of %d) until its statistics settle, and the file has %d, so none was learned: give --warmup %d or less (e.g. --warmup %d)",
			err, c.Warmup/2, c.Warmup, fed, 2*fed, min(100, 2*fed))
	}
	return err
}
