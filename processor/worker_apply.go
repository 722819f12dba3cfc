package processor

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
)

// dispOf is how the machine disposes of a message that failed with err.
func dispOf(err error) *machine.Fail {
	d := machine.Nak
	switch classifyAction(err) {
	case actTerm:
		d = machine.Reject
	case actFatal:
		d = machine.Fatal
	}
	return &machine.Fail{Disp: d, Err: err}
}

// deliver decodes and checks m — bad input is refused before its key is
// loaded, claimed or created: it costs no learner, no claim, no snapshot,
// and evicts nothing — and steps the machine with it (a fenced machine
// naks it: its new owner applies it).
func (w *worker) deliver(m *inMsg) {
	m.pipe.stats.In.Add(1)
	var f *machine.Fail
	if enc, err := w.decodeSafe(m); err != nil {
		f = dispOf(err)
	} else {
		w.enc = enc
		w.decoded.pipe, w.decoded.key, w.decoded.seq = m.pipe, m.key, m.seq
	}
	w.step(machine.Delivered[inMsg]{Msg: *m, Key: m.key, Seq: m.seq, Fail: f})
}

// decodeSafe is decode, with a panic turned into bad input.
func (w *worker) decodeSafe(m *inMsg) (enc codec.Encoding, err error) {
	defer w.recoverAs(m, &err)
	return w.decode(m)
}

// recoverAs turns a panic while processing m into errPanic in *err.
func (w *worker) recoverAs(m *inMsg, err *error) {
	if r := recover(); r != nil {
		w.log.Error("panic while processing message", zap.String("pipeline", m.pipe.cfg.Name), zap.String("key", m.key),
			zap.Uint64("seq", m.seq), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		*err = fmt.Errorf("%w: %v", errPanic, r)
	}
}

// decode decodes m into w.obs, checks every observation against the
// pipeline (dimension, finiteness, batch size, and with a classifier stage
// the labels) and returns the output encoding. It needs no learner: a bad
// message is refused before its key is touched.
func (w *worker) decode(m *inMsg) (codec.Encoding, error) {
	ct := ""
	if m.header != nil {
		ct = m.header.Get(HeaderContentType)
	}
	obs, enc, err := codec.DecodeObservations(w.obs, m.data, ct, m.pipe.limits)
	w.obs = obs
	if err != nil {
		return 0, err
	}
	if err := keymodel.Check(obs, m.pipe.cfg.Learner.Dim); err != nil {
		return 0, err
	}
	if st := m.pipe.cls; st != nil {
		if w.ys, err = st.classes.Labels(w.ys[:0], obs); err != nil {
			return 0, err
		}
	}
	if m.pipe.outEnc != 0 {
		enc = m.pipe.outEnc
	}
	return enc, nil
}

// apply applies message m (decoded into w.obs) to its key's learner and
// answers the machine with its outputs.
func (w *worker) apply(m *inMsg) {
	ev := machine.Applied[*nats.Msg]{Key: m.key, Result: resultOK}
	defer func() { w.step(ev) }()
	var err error
	defer func() {
		if err != nil {
			ev.Fail = dispOf(err)
		}
	}()
	defer w.recoverAs(m, &err)
	if d := w.decoded; d.pipe != m.pipe || d.key != m.key || d.seq != m.seq {
		// It waited for its key's load while others were decoded: decode
		// it again (it was checked at delivery; the same bytes check the same).
		if w.enc, err = w.decode(m); err != nil {
			return
		}
		w.decoded.pipe, w.decoded.key, w.decoded.seq = m.pipe, m.key, m.seq
	}
	pl, e := m.pipe, w.keys[m.key]
	if _, err = w.model(e); err != nil {
		return // the local tier failed: the partition stops, the message comes back
	}
	start := time.Now()
	err = e.m.Apply(&w.res, w.obs, m.key, m.seq)
	took := time.Since(start)
	pl.met.learnSeconds.Observe(took.Seconds())
	if err != nil && !errors.Is(err, learners.ErrNumerical) {
		return // checked before learning: the learner is untouched
	}
	// A numerical failure may follow learned observations of a batch: the
	// message counts as applied, and is dead-lettered.
	ev.Changed = true
	sum := e.m.Learner().Summary(w.res.Eig)
	pl.met.storedPoints.Add(float64(sum.Stored - e.stored))
	e.stored = sum.Stored
	w.setAdvice(e, sum.BudgetAdvice)
	if w.onApply != nil {
		w.onApply(pl.cfg.Name, w.num, w.epoch, m.key, m.seq)
	}
	if err != nil {
		return
	}
	if n := len(w.res.Outs); n > 0 {
		if ev.Outs, err = w.outputs(e, w.enc, m.tm); err != nil {
			return
		}
		w.setExplained(e, w.res.Outs[n-1].Explained)
		for i := range w.res.Outs {
			pl.met.t2.Observe(w.res.Outs[i].T2)
		}
		w.watchOut(e, start, took)
	} else if w.res.Warming > 0 {
		pl.stats.Warming.Add(1)
		ev.Result = resultWarming
	}
}

// watchOut is the worker's hook: after the outputs of a message of e were
// published, it records them when e's key is watched (ops.Watches). The
// learner started on the message at start and took took (so the hook
// reads no clock). Unwatched, it costs one atomic load.
func (w *worker) watchOut(e *entry, start time.Time, took time.Duration) {
	ws := w.watch
	if !ws.Any() {
		return
	}
	kw := ws.Get(e.pipe.cfg.Name, e.key)
	if kw == nil {
		return
	}
	st := &e.pipe.stats
	// apply and applied left the eigenvalues of the last output in w.res.Eig
	// and the dictionary's fill in e.stored.
	kw.Record(&ops.Sample{At: start.Add(took), Took: took, Learner: e.m.Learner(), Eigenvalues: w.res.Eig, Stored: e.stored,
		In: st.In.Load(), Out: st.Out.Load(), Dead: st.DeadLettered.Load()}, w.res.Outs)
}

// outputs encodes the outputs of the last apply as NATS messages that the
// caller owns (they wait in the key's output queue until acknowledged);
// the encoding goes through a scratch buffer of the worker, so each
// message's payload is allocated at its size.
//
// An observation without ts gets the input message's time (tm: its stream
// timestamp, so a replay stamps the same value), one without id the
// output's message id "<pipeline>/<key>/<seq>[/<i>]", so no output carries
// ts 0 or an empty id.
func (w *worker) outputs(e *entry, enc codec.Encoding, tm int64) ([]*nats.Msg, error) {
	pc := e.pipe.cfg
	if e.subject == "" {
		e.subject = expandShard(pc.Output.Subject, pc.Name, e.key, w.shard)
	}
	msgs := make([]*nats.Msg, len(w.res.Outs))
	batch := len(w.obs) > 1
	ct := enc.ContentType()
	for i := range w.res.Outs {
		out := &w.res.Outs[i]
		id := pc.Name + "/" + e.key + "/" + strconv.FormatUint(out.Seq, 10)
		if batch {
			id += "/" + strconv.Itoa(w.res.Idx[i])
		}
		if out.TS == 0 && tm > 0 {
			out.TS = float64(tm/1e9) + float64(tm%1e9)/1e9 // whole seconds first: exact to the µs
		}
		if out.ID == "" {
			out.ID = id
		}
		data, err := codec.EncodeOutput(w.scratch[:0], enc, out)
		if err != nil {
			return nil, err
		}
		w.scratch = data
		msgs[i] = &nats.Msg{Subject: e.subject, Data: append([]byte(nil), data...),
			Header: nats.Header{jetstream.MsgIDHeader: {id}, HeaderContentType: {ct}}}
	}
	return msgs, nil
}

// setExplained records v as e's explained variance ratio in the pipeline's
// explained-variance series.
func (w *worker) setExplained(e *entry, v float64) {
	band := explainedBand(v)
	e.pipe.met.setExplained(e.evBand-1, e.explained, band, v)
	e.explained, e.evBand = v, band+1
}

// setAdvice moves e between the budget-advice counts ("" leaves them).
func (w *worker) setAdvice(e *entry, advice string) {
	if advice == e.advice {
		return
	}
	pl := e.pipe
	if e.advice != "" {
		w.met.budget.WithLabelValues(pl.cfg.Name, e.advice).Dec()
		pl.adviceCount(e.advice).Add(-1)
	}
	if advice != "" {
		w.met.budget.WithLabelValues(pl.cfg.Name, advice).Inc()
		pl.adviceCount(advice).Add(1)
	}
	e.advice = advice
}

// unmeter takes e out of the pipeline's per-key metrics (dictionary
// points, budget advice, explained variance).
func (w *worker) unmeter(e *entry) {
	e.pipe.met.storedPoints.Sub(float64(e.stored))
	e.stored = 0
	w.setAdvice(e, "")
	if e.evBand > 0 {
		e.pipe.met.setExplained(e.evBand-1, e.explained, -1, 0)
		e.explained, e.evBand = 0, 0
	}
}
