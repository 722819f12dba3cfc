package processor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// A key's model — learner, classifier stage, monitor and preprocessing —
// is a keymodel.Model, built from its pipeline's spec in one place
// (internal/keymodel); the shell loads, applies, saves and exports it.

// applied is what one message did to a key's model.
type applied = keymodel.Result

// errIncompatible marks a snapshot whose learner configuration differs from
// the pipeline's.
var errIncompatible = keymodel.ErrIncompatible

// modelSpec returns how the models of pl's keys are built: its learner,
// classifier stage and monitor sections, counted in pl's metrics.
func (pl *pipeline) modelSpec(newLearner func(learners.Config) (learners.Learner, error)) *keymodel.Spec {
	s := &keymodel.Spec{Learner: pl.cfg.Learner, NewLearner: newLearner,
		Meter: pipeMeter{st: pl.cls, spe: pl.met.alarmSPE, t2: pl.met.alarmT2}}
	if st := pl.cls; st != nil {
		s.Classes, s.Classifier, s.Window = st.classes, st.cfg.model(0), st.cfg.Window
	}
	if c, ok := pl.cfg.monitorConfig(); ok {
		s.Monitor = &c
	}
	return s
}

// pipeMeter counts what a pipeline's models do (keymodel.Meter): the
// classifier's labels, predictions and accuracy, the monitor's alarms.
type pipeMeter struct {
	st      *stage // nil without a classifier stage
	spe, t2 prometheus.Counter
}

func (m pipeMeter) Label(class int) { m.st.labels[class].Inc() }

func (m pipeMeter) Prediction(pred, class int, acc float64) {
	switch {
	case class < 0:
		m.st.blind[pred].Inc()
		return
	case pred == class:
		m.st.hits[pred].Inc()
	default:
		m.st.misses[pred].Inc()
	}
	m.st.acc.Set(acc)
}

func (m pipeMeter) Alarm(a monitor.Alarm) {
	if a&monitor.AlarmSPE != 0 {
		m.spe.Inc()
	}
	if a&monitor.AlarmT2 != 0 {
		m.t2.Inc()
	}
}
