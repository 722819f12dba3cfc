package monitor

import (
	"errors"

	"github.com/kpcastream/kpcastream/learners"
)

// Scorer is what Step needs of a learner.
type Scorer interface {
	Learn(x []float64) error
	Score(dst, x []float64) ([]float64, learners.Novelty, error)
}

// Result is what Step did with one observation.
type Result struct {
	// Z is the projection (Score's dst) and Novelty its statistics, valid
	// when Ready.
	Z       []float64
	Novelty learners.Novelty
	// Ready tells whether the learner could score the observation.
	Ready bool
	// Learned tells whether the observation was learned.
	Learned bool
	// Verdict is the judgement of the statistics (no alarm when not Ready).
	Verdict Verdict
	// Accepted tells whether this observation made the monitor accept a
	// new regime (see Config.AcceptAfter).
	Accepted bool
}

// Step runs the raw observation x through l under the monitor: standardise,
// then with LearnAlways learn and score, with LearnNormal score, judge and
// learn only if admitted; then Record. learn replaces l.Learn when not nil
// (a classifier stage that learns through the learner). in is scratch of
// length d for the standardised vector (unused without Standardize), z is
// Score's dst. On a Learn error the monitor and the learner are unchanged;
// a Score error other than learners.ErrNotReady is returned after the
// observation was learned (as the plain path does).
func (m *Monitor) Step(l Scorer, learn func([]float64) error, in, z, x []float64) (Result, error) {
	if learn == nil {
		learn = l.Learn
	}
	var r Result
	score := func(xi []float64) error {
		zz, nov, err := l.Score(z, xi)
		if errors.Is(err, learners.ErrNotReady) {
			return nil
		}
		if err != nil {
			return err
		}
		r.Z, r.Novelty, r.Ready = zz, nov, true
		r.Verdict = m.Judge(nov.SPE, nov.T2)
		return nil
	}
	if !m.ScoreFirst() {
		if err := m.learn(learn, in, x); err != nil {
			return r, err
		}
		r.Learned = true
		if err := score(m.Input(in, x)); err != nil {
			return r, err
		}
	} else {
		if err := score(m.Input(in, x)); err != nil {
			return r, err
		}
		if m.Admit(r.Verdict) {
			if err := m.learn(learn, in, x); err != nil {
				return r, err
			}
			r.Learned = true
		}
	}
	r.Accepted = m.Record(r.Novelty.SPE, r.Novelty.T2, r.Ready, r.Learned, r.Verdict)
	return r, nil
}

// learn updates the standardisation with x and learns the standardised
// vector, undoing the update if learn fails.
func (m *Monitor) learn(learn func([]float64) error, in, x []float64) error {
	if !m.cfg.Standardize {
		return learn(x)
	}
	w := m.st.InW
	m.backup = append(append(m.backup[:0], m.st.InMean...), m.st.InM2...)
	m.Observe(x)
	if err := learn(m.Input(in, x)); err != nil {
		d := len(m.st.InMean)
		copy(m.st.InMean, m.backup[:d])
		copy(m.st.InM2, m.backup[d:])
		m.st.InW, m.scaleW = w, -1
		return err
	}
	return nil
}
