package replay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// keyModel is everything a replay learns for its one key: the learner and,
// as the flags ask, its monitor (limits, gated learning, running
// standardisation), the classifier stage and a fixed preprocessing. It is
// built in one place (newKeyModel) and exported in one place (write), so
// that it can become the processor's own key model type later.
type keyModel struct {
	cfg learners.Config
	l   learners.Learner
	// fitter is the batch learner's Fit (nil for an online learner).
	fitter interface{ Fit() error }
	// mon is the monitor of an online learner without a label (else nil);
	// monSet tells whether its sections go into the export.
	mon    *monitor.Monitor
	monSet bool
	// ob is the classifier on the learner's coordinates (--label), onZ the
	// one on the published components (--classify-on z), classes their
	// names; exportClassifier tells whether ob's section is exported.
	ob               *classify.OnBasis
	onZ              *classify.Classifier
	classes          []string
	exportClassifier bool
	// pre is the standardisation of a labelled file, measured over it.
	pre *learners.ModelPreprocess
}

// newKeyModel builds the key model of c for rows of d values; classes is
// nil without a label column.
func newKeyModel(c *Config, d int, classes []string, stderr io.Writer) (*keyModel, error) {
	m := &keyModel{cfg: c.learnerConfig(d), classes: classes}
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
	if classes != nil {
		return m, m.classifier(c)
	}
	if m.fitter == nil {
		if m.mon, err = newMonitor(&c.Monitor, m.cfg, c.Label.Standardize); err != nil {
			return nil, err
		}
		m.monSet = c.Monitor.Set
	}
	return m, nil
}

// classifier adds the classifier stage of --label.
func (m *keyModel) classifier(c *Config) error {
	basis, ok := m.l.(classify.Basis)
	if !ok {
		return fmt.Errorf("learner %q has no dictionary coordinates for the classifier", m.l.Kind())
	}
	ccfg := classify.Config{Classes: len(m.classes), Ridge: c.Label.Ridge, Forget: c.Label.Forget}
	var err error
	if m.ob, err = classify.NewOnBasis(basis, ccfg); err != nil {
		return fmt.Errorf("classifier settings: %w", err)
	}
	m.exportClassifier = c.Label.On == "coords"
	if c.Label.On == "z" {
		ccfg.Dim = c.Components
		if m.onZ, err = classify.New(ccfg); err != nil {
			return fmt.Errorf("classifier settings: %w", err)
		}
	}
	return nil
}

// newMonitor returns the replay's monitor for the learner configuration cfg.
func newMonitor(o *MonitorConfig, cfg learners.Config, standardize bool) (*monitor.Monitor, error) {
	freeze := o.Freeze
	if !o.FreezeSet {
		freeze = standardize && monitor.DefaultFreeze(cfg.Forget)
	}
	c := monitor.Config{Level: o.Level, Learn: o.Learn, Warmup: o.Warmup, AcceptAfter: o.AcceptAfter,
		Confirm: o.Confirm, Window: o.Window, Trend: o.Trend, TrendLambda: o.TrendLambda, Forget: cfg.Forget, Standardize: standardize, Freeze: freeze, Dim: cfg.Dim,
		Excursion: o.Excursion, Linear: o.Linear}
	if o.Linear {
		c.LinearComponents = min(cfg.Components, cfg.Dim-1)
	}
	mon, err := monitor.New(c.WithDefaults(cfg.Budget))
	if err != nil {
		return nil, fmt.Errorf("monitor settings: %w", err)
	}
	return mon, nil
}

// syncer is a learner that can catch up on deferred work on demand.
type syncer interface{ Sync(maxIter int) error }

// syncedModel is the model export of l after catching up deferred work
// (Sync) on a copy, so that an export does not perturb the replay.
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

// export is the key model's export: the learner's (synced on a copy) with
// the sections of the monitor, the classifier and the preprocessing.
func (m *keyModel) export() (*learners.Model, error) {
	e, err := syncedModel(m.l)
	if err != nil {
		return nil, fmt.Errorf("model export: %w", err)
	}
	if m.mon != nil && m.monSet {
		m.mon.Export(e)
	}
	if m.ob != nil {
		if m.exportClassifier {
			if e.Classifier, err = m.ob.Export(m.classes); err != nil {
				return nil, fmt.Errorf("model export: %w", err)
			}
		}
		e.Preprocess = m.pre
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
