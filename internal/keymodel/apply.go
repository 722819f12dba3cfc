package keymodel

import (
	"errors"
	"fmt"
	"math"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// Result is what one message did to a model: the outputs of the ready
// observations, each with the index of its observation in the message,
// the number of observations learned while the learner was warming up,
// and the learner's eigenvalues after the message. A caller keeps one
// Result and passes it to every Apply: its storage is reused.
type Result struct {
	Outs    []codec.Output
	Idx     []int
	Warming int
	Eig     []float64
}

// Check validates every observation of a message against the learner's
// dimension before anything is learned, so that a bad message leaves the
// model untouched.
func Check(obs []codec.Observation, dim int) error {
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

// Apply feeds the observations of one message (stream sequence seq of
// key) to the model in order: Learn, then Score. It is the whole
// per-message computation, with no I/O. Outputs are written to res for
// every observation scored by a ready learner; before the learner is
// ready an observation is only learned and counted as warming. A Learn
// failure (ErrNumerical) stops the message: earlier observations of a
// batch stay learned, as they would on a replay, since learners are
// deterministic. Any other error comes before anything is learned.
//
// With a classifier stage the labels are checked with the vectors, the
// learner learns through the classifier (so its weights follow every
// change of coordinates), and each observation is then predicted (pred and
// scores on its output) before its label is learned. Outputs carry y and
// meta through.
//
// With a monitor each observation goes through monitor.Step instead:
// standardised, learned or not by the learning mode, scored, judged; its
// output carries the limits once they are in force and the alarm, and the
// meter counts it. The classifier stage then sees the standardised vector.
func (m *Model) Apply(res *Result, obs []codec.Observation, key string, seq uint64) error {
	if m.zc != nil {
		return errOnZ
	}
	l, cls := m.l, m.cls
	res.Outs, res.Idx, res.Warming = res.Outs[:0], res.Idx[:0], 0
	k := l.Components()
	if cap(res.Eig) < k {
		res.Eig = make([]float64, k)
	}
	res.Eig = res.Eig[:k]
	if err := Check(obs, l.Dim()); err != nil {
		return err
	}
	if cls != nil {
		if err := cls.check(obs); err != nil {
			return err
		}
	}
	if m.mon != nil {
		return m.applyMonitored(res, obs, key, seq, k)
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
			res.Outs = res.Outs[:n]
			return fmt.Errorf("processor: score observation %d: %w", i, err)
		}
		fill(out, l, res.Eig, &obs[i], key, seq, z, nov)
		if err := res.keep(n, i, cls, x, out); err != nil {
			return err
		}
	}
	return nil
}

// applyMonitored is Apply's loop with a monitor.
func (m *Model) applyMonitored(res *Result, obs []codec.Observation, key string, seq uint64, k int) error {
	l, cls, mon := m.l, m.cls, m.mon
	var learn func([]float64) error
	if cls != nil {
		learn = cls.learn
	}
	for i := range obs {
		n, out, z := res.next(k, true)
		r, err := mon.Step(l, learn, m.in, z, obs[i].X)
		if err != nil {
			res.Outs = res.Outs[:n]
			return fmt.Errorf("processor: observation %d: %w", i, err)
		}
		x := mon.Input(m.xs, obs[i].X)
		if !r.Ready {
			if err := res.warm(n, i, cls, x); err != nil {
				return err
			}
			continue
		}
		contrib := out.Contrib[:0] // the slot's storage, kept across fill
		fill(out, l, res.Eig, &obs[i], key, seq, r.Z, r.Novelty)
		out.Warmup = !r.Verdict.InForce
		if v := r.Verdict; v.InForce {
			out.SPELimit, out.T2Limit, out.Alarm = v.SPELimit, v.T2Limit, v.Alarm.String()
			out.LSPE, out.LSPELimit = v.LSPE, v.LSPELimit
			out.LEWMA, out.LEWMALimit = v.LEWMA, v.LEWMALimit
			for _, c := range r.Contrib {
				contrib = append(contrib, codec.Contribution{Var: c.Var, Value: c.Value})
			}
			out.Contrib = contrib
			if mt := m.spec.Meter; mt != nil && v.Alarm != monitor.AlarmNone {
				mt.Alarm(v.Alarm)
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
func (res *Result) warm(n, i int, cls *classifier, x []float64) error {
	res.Outs = res.Outs[:n]
	res.Warming++
	if cls != nil {
		return cls.step(i, x, nil)
	}
	return nil
}

// keep keeps output slot n, out, of observation i: the classifier stage
// (if any) predicts it and learns its label, else it carries no scores.
func (res *Result) keep(n, i int, cls *classifier, x []float64, out *codec.Output) error {
	if cls != nil {
		if err := cls.step(i, x, out); err != nil {
			res.Outs = res.Outs[:n]
			return err
		}
	} else {
		out.Scores = nil
	}
	res.Idx = append(res.Idx, i)
	return nil
}

// next appends an output slot to res, reusing the storage of an earlier
// message, and returns its index, the slot and a projection buffer of k
// (nil when the slot has none, unless alloc).
func (res *Result) next(k int, alloc bool) (int, *codec.Output, []float64) {
	n := len(res.Outs)
	if n < cap(res.Outs) {
		res.Outs = res.Outs[:n+1]
	} else {
		res.Outs = append(res.Outs, codec.Output{})
	}
	out := &res.Outs[n]
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
