package processor

import (
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// keyMonitor is a key's monitor (pipeline sections monitor: and
// preprocess:) with its scratch and the pipeline's alarm counters; nil
// for a pipeline without them.
type keyMonitor struct {
	m       *monitor.Monitor
	in, xs  []float64
	spe, t2 prometheus.Counter
}

// newKeyMonitor returns the monitor of a key of pl, restored from st when
// not nil (a snapshot's); nil when pl has no monitoring. A snapshot
// without a monitor state (written before the pipeline had one), or with
// one that does not fit the pipeline's monitor settings (changed since),
// starts a fresh monitor: a new warm-up.
func newKeyMonitor(pl *pipeline, st *monitor.State) (*keyMonitor, error) {
	c, ok := pl.cfg.monitorConfig()
	if !ok {
		return nil, nil
	}
	m, err := monitor.New(c)
	if err != nil {
		return nil, fmt.Errorf("processor: pipeline %s: %w", pl.cfg.Name, err)
	}
	if st != nil && m.Restore(st) != nil {
		// The state does not fit the monitor: settings changed since the
		// snapshot (standardize, window, confirm, learn). The monitor's
		// state is rebuilt by a new warm-up, so the key starts a fresh
		// one instead of failing its load (the learner is restored as
		// usual; Restore left m untouched).
		m, _ = monitor.New(c)
	}
	return &keyMonitor{m: m, in: make([]float64, c.Dim), xs: make([]float64, c.Dim), spe: pl.met.alarmSPE, t2: pl.met.alarmT2}, nil
}

// state returns a copy of the monitor's state for a snapshot; nil without one.
func (k *keyMonitor) state() *monitor.State {
	if k == nil {
		return nil
	}
	return k.m.State()
}

// applied is what one message did to a learner: the outputs of the ready
// observations, each with the index of its observation in the message, and
// the number of observations learned while the learner was warming up.
type applied struct {
	outs    []codec.Output
	idx     []int
	warming int
}

// check validates every observation of a message against the learner's
// dimension before anything is learned, so that a bad message leaves the
// learner untouched.
func check(obs []codec.Observation, dim int) error {
	if len(obs) == 0 {
		return fmt.Errorf("processor: %w: no observations", codec.ErrMalformed)
	}
	for i, o := range obs {
		if len(o.X) != dim {
			return fmt.Errorf("processor: observation %d: %w: got %d values, want %d", i, learners.ErrDimension, len(o.X), dim)
		}
		for j, v := range o.X {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("processor: observation %d: %w: element %d is %v", i, learners.ErrNonFinite, j, v)
			}
		}
	}
	return nil
}

// apply feeds the observations of one message (stream sequence seq) to l in
// order: Learn, then Score. It is the whole per-message computation, with
// no I/O. Outputs are appended to res (its slices are reused) for every
// observation scored by a ready learner; before the learner is ready an
// observation is only learned and counted as warming. eig is a scratch
// buffer of length l.Components(). A Learn failure (ErrNumerical) stops the
// message: earlier observations of a batch stay learned, as they would on
// a replay, since learners are deterministic.
//
// With a classifier stage (cls not nil, see classifier.go) the labels are
// checked with the vectors, the learner learns through the classifier (so
// its weights follow every change of coordinates), and each observation is
// then predicted (pred and scores on its output) before its label is
// learned. Outputs carry y and meta through.
//
// With a monitor (mon not nil) each observation goes through
// monitor.Step instead: standardised, learned or not by the learning
// mode, scored, judged; its output carries the limits once they are in
// force and the alarm, and the alarm counters count it. The classifier
// stage then sees the standardised vector.
func apply(res *applied, l learners.Learner, cls *keyClassifier, mon *keyMonitor, obs []codec.Observation, key string, seq uint64, eig []float64) error {
	res.outs, res.idx, res.warming = res.outs[:0], res.idx[:0], 0
	if err := check(obs, l.Dim()); err != nil {
		return err
	}
	if cls != nil {
		if err := cls.check(obs); err != nil {
			return err
		}
	}
	k := l.Components()
	if mon != nil {
		return applyMonitored(res, l, cls, mon, obs, key, seq, eig, k)
	}
	for i := range obs {
		x := obs[i].X
		learn := l.Learn
		if cls != nil {
			learn = cls.learn
		}
		if err := learn(x); err != nil {
			return fmt.Errorf("processor: learn observation %d: %w", i, err)
		}
		n, out, z := res.next(k, false)
		z, nov, err := l.Score(z, x)
		if errors.Is(err, learners.ErrNotReady) {
			if err := res.warm(n, i, cls, x); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			res.outs = res.outs[:n]
			return fmt.Errorf("processor: score observation %d: %w", i, err)
		}
		fill(out, l, eig, &obs[i], key, seq, z, nov)
		if err := res.keep(n, i, cls, x, out); err != nil {
			return err
		}
	}
	return nil
}

// applyMonitored is apply's loop with a monitor.
func applyMonitored(res *applied, l learners.Learner, cls *keyClassifier, mon *keyMonitor, obs []codec.Observation, key string, seq uint64, eig []float64, k int) error {
	var learn func([]float64) error
	if cls != nil {
		learn = cls.learn
	}
	for i := range obs {
		n, out, z := res.next(k, true)
		r, err := mon.m.Step(l, learn, mon.in, z, obs[i].X)
		if err != nil {
			res.outs = res.outs[:n]
			return fmt.Errorf("processor: observation %d: %w", i, err)
		}
		x := mon.m.Input(mon.xs, obs[i].X)
		if !r.Ready {
			if err := res.warm(n, i, cls, x); err != nil {
				return err
			}
			continue
		}
		contrib := out.Contrib[:0] // the slot's storage, kept across fill
		fill(out, l, eig, &obs[i], key, seq, r.Z, r.Novelty)
		out.Warmup = !r.Verdict.InForce
		if v := r.Verdict; v.InForce {
			out.SPELimit, out.T2Limit, out.Alarm = v.SPELimit, v.T2Limit, v.Alarm.String()
			out.LSPE, out.LSPELimit = v.LSPE, v.LSPELimit
			for _, c := range r.Contrib {
				contrib = append(contrib, codec.Contribution{Var: c.Var, Value: c.Value})
			}
			out.Contrib = contrib
			if v.Alarm&monitor.AlarmSPE != 0 {
				mon.spe.Inc()
			}
			if v.Alarm&monitor.AlarmT2 != 0 {
				mon.t2.Inc()
			}
		}
		if err := res.keep(n, i, cls, x, out); err != nil {
			return err
		}
	}
	return nil
}

// warm drops output slot n of observation i, scored by a learner not
// ready yet, and counts it as warming; the classifier stage (if any)
// still learns its label.
func (res *applied) warm(n, i int, cls *keyClassifier, x []float64) error {
	res.outs = res.outs[:n]
	res.warming++
	if cls != nil {
		return cls.step(i, x, nil)
	}
	return nil
}

// keep keeps output slot n, out, of observation i: the classifier stage
// (if any) predicts it and learns its label, else it carries no scores.
func (res *applied) keep(n, i int, cls *keyClassifier, x []float64, out *codec.Output) error {
	if cls != nil {
		if err := cls.step(i, x, out); err != nil {
			res.outs = res.outs[:n]
			return err
		}
	} else {
		out.Scores = nil
	}
	res.idx = append(res.idx, i)
	return nil
}

// next appends an output slot to res, reusing the storage of an earlier
// message, and returns its index, the slot and a projection buffer of k
// (nil when the slot has none, unless alloc).
func (res *applied) next(k int, alloc bool) (int, *codec.Output, []float64) {
	n := len(res.outs)
	if n < cap(res.outs) {
		res.outs = res.outs[:n+1]
	} else {
		res.outs = append(res.outs, codec.Output{})
	}
	out := &res.outs[n]
	z := out.Z
	switch {
	case cap(z) >= k:
		z = z[:k]
	case alloc:
		z = make([]float64, k)
	default:
		z = nil
	}
	return n, out, z
}

// fill writes the output of observation o (projection z, statistics nov)
// into out, keeping its scores' storage.
func fill(out *codec.Output, l learners.Learner, eig []float64, o *codec.Observation, key string, seq uint64, z []float64, nov learners.Novelty) {
	sum := l.Summary(eig)
	scores := out.Scores
	*out = codec.Output{
		ID: o.ID, Key: key, Seq: seq, TS: o.TS, Z: z,
		SPE: nov.SPE, T2: nov.T2, Explained: sum.ExplainedVariance, BasisVersion: sum.BasisVersion,
		Y: o.Y, Meta: o.Meta, Scores: scores[:0],
	}
}
