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
	// Learned tells whether the observation was learned, or with
	// LearnNormal after the warm-up accepted for learning (pending its
	// confirmation); an observation held by the trend gate is not.
	Learned bool
	// Verdict is the judgement of the statistics (no alarm when not Ready).
	Verdict Verdict
	// Accepted tells whether this observation made the monitor accept a
	// new regime (see Config.AcceptAfter).
	Accepted bool
	// Contrib holds the variables with the largest contributions to an
	// alarm, largest first (see contributions; at most TopContributions;
	// nil without an alarm). Valid until the next Step.
	Contrib []Contribution
}

// Step runs the raw observation x through l under the monitor. With
// LearnAlways: standardise, learn, score, judge. With LearnNormal: score
// with the current model and judge; during the warm-up learn x; after it,
// an observation without alarm (or with an admitted one, see the package
// comment) joins the pending observations, and the oldest pending ones are
// learned once Confirm newer ones have joined; an alarm that is not
// admitted discards them all. While the trend gate is out (Verdict.Trend)
// an observation without alarm is held among the pending ones (the newest
// Confirm of an episode are kept) and nothing is learned. learn replaces l.Learn when not nil (a
// classifier stage that learns through the learner). in is scratch of
// length d for the standardised vector, z is Score's dst. On a Learn
// error the monitor and the learner are unchanged; a Score error other
// than learners.ErrNotReady is returned (after a LearnAlways observation
// was learned, as the plain path does).
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
		var lspe float64
		if m.lin != nil {
			lspe = m.lin.index(xi)
		}
		r.Verdict = m.judge(nov.SPE, nov.T2, lspe)
		if m.lin != nil {
			m.ewma(&r.Verdict)
		}
		return nil
	}
	alarmed := func() bool { return r.Verdict.Alarm != AlarmNone }
	if !m.st.Settled {
		if err := m.hold(learn, in, x); err != nil {
			return r, err
		}
		r.Learned = true
		m.refreshLimits()
		return r, nil
	}
	switch {
	case !m.ScoreFirst():
		if err := m.learn(learn, in, x); err != nil {
			return r, err
		}
		r.Learned = true
		if err := score(m.Input(in, x)); err != nil {
			return r, err
		}
		if !alarmed() || m.takeToken() {
			m.learned(r.Novelty.SPE, r.Novelty.T2, r.Verdict.LSPE, r.Ready)
		} else {
			m.st.Learned++
		}
	case m.Warm():
		if err := score(m.Input(in, x)); err != nil {
			return r, err
		}
		if err := m.learn(learn, in, x); err != nil {
			return r, err
		}
		r.Learned = true
		m.learned(r.Novelty.SPE, r.Novelty.T2, r.Verdict.LSPE, r.Ready)
	default:
		if err := score(m.Input(in, x)); err != nil {
			return r, err
		}
		if !r.Ready {
			break
		}
		r.Verdict.Trend = m.trend(r.Novelty.SPE, r.Verdict.LSPE)
		if alarmed() && !m.takeToken() {
			m.excursion(x, r)
			break
		}
		learned, err := m.queue(learn, in, x, r)
		if err != nil {
			return r, err
		}
		r.Learned = learned
	}
	if r.Ready && alarmed() {
		r.Contrib = m.contributions(l, m.Input(in, x), r.Verdict)
	}
	r.Accepted = m.judged(r.Verdict)
	m.refreshLimits()
	return r, nil
}

// queue puts the judged observation x (no alarm, or one a token admits;
// LearnNormal after the warm-up) among the pending ones and says whether
// it counts as learned: while the trend gate is out it is held (false);
// else, once enough observations without alarm have followed, the oldest
// pending ones are learned first, and an excursion that fills the queue
// is dropped as too long (true).
func (m *Monitor) queue(learn func([]float64) error, in, x []float64, r Result) (bool, error) {
	if r.Verdict.Trend {
		// Held, not learned: the newest Confirm observations of a
		// trend episode wait for its end (see the package comment).
		if m.pend.n == m.pend.cap() {
			m.pend.pop()
			m.st.ExcN = min(m.st.ExcN, int64(m.pend.n))
		}
		m.pend.push(x, r.Novelty.SPE, r.Novelty.T2, r.Verdict.LSPE)
		m.clean()
		return false, nil
	}
	if m.st.Clean+1 >= m.confirmNeed() {
		for m.pend.n >= m.cfg.Confirm {
			px, spe, t2, lspe := m.pend.oldest()
			if err := m.learn(learn, in, px); err != nil {
				return false, err
			}
			m.pend.pop()
			m.learned(spe, t2, lspe, true)
		}
		m.st.ExcN = 0 // the newest Confirm − 1 are clean
	} else if m.pend.n == m.pend.cap() {
		// An excursion that fills the queue is too long.
		m.pend.reset()
		m.st.ExcN, m.st.Long = 0, true
	}
	m.pend.push(x, r.Novelty.SPE, r.Novelty.T2, r.Verdict.LSPE)
	m.clean()
	return true, nil
}

// excursion handles an alarmed observation x that is not admitted by a
// token (LearnNormal after the warm-up): it waits among the pending
// observations as part of an excursion, unless the excursion would hold
// more than Config.Excursion alarmed observations or fill the queue; then
// every pending observation is discarded and alarms are not queued again
// until Confirm observations without alarm have passed (State.Long). See
// the package comment ("Excursions").
func (m *Monitor) excursion(x []float64, r Result) {
	m.st.Clean = 0
	if m.st.Long || m.st.ExcN >= int64(m.cfg.Excursion) || m.pend.n == m.pend.cap() {
		m.pend.reset()
		m.st.ExcN = 0
		m.st.Long = true
		return
	}
	m.pend.push(x, r.Novelty.SPE, r.Novelty.T2, r.Verdict.LSPE)
	m.st.ExcN++
}

// confirmNeed is the number of observations without alarm that confirm
// the pending ones: Confirm, twice that when an excursion's alarms are
// among them (measured on bench/monitor: with Confirm alone, a fault in
// one variable detected by about half its samples was learned in pieces).
func (m *Monitor) confirmNeed() int64 {
	if m.st.ExcN > 0 {
		return 2 * int64(m.cfg.Confirm)
	}
	return int64(m.cfg.Confirm)
}

// clean counts an observation without alarm queued among the pending ones.
func (m *Monitor) clean() {
	m.st.Clean++
	if m.st.Clean >= int64(m.cfg.Confirm) {
		m.st.Long = false
	}
}

// learn updates the standardisation with x and learns the standardised
// vector, undoing the update if learn fails.
func (m *Monitor) learn(learn func([]float64) error, in, x []float64) error {
	if !m.cfg.Standardize {
		if err := learn(x); err != nil {
			return err
		}
		m.addLinear(x)
		return nil
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
	m.addLinear(in)
	return nil
}

// addLinear adds the learned vector v to the linear residual's model.
func (m *Monitor) addLinear(v []float64) {
	if m.lin != nil && !m.linearHeld() {
		m.lin.add(v)
	}
}

// hold keeps x back while the standardisation settles; when ⌊Warmup/2⌋
// are held it learns them in order. On a Learn error the observations
// learned so far stay learned (as a replay would) and the rest stay held.
func (m *Monitor) hold(learn func([]float64) error, in, x []float64) error {
	n := m.holdLen()
	d := m.cfg.Dim
	if len(m.st.Held)/d < n {
		m.Observe(x)
		m.st.Held = append(m.st.Held, x...)
		if len(m.st.Held)/d < n {
			return nil
		}
	}
	for len(m.st.Held) > 0 {
		if err := learn(m.Input(in, m.st.Held[:d])); err != nil {
			return err
		}
		m.addLinear(in)
		m.st.Held = m.st.Held[d:]
		m.st.Learned++
	}
	m.st.Held, m.st.Settled = nil, true
	return nil
}
