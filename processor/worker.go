package processor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Header names.
const (
	HeaderError       = "Kpcastream-Error"
	HeaderErrorDetail = "Kpcastream-Error-Detail"
	HeaderSubject     = "Kpcastream-Subject"
	HeaderStreamSeq   = "Kpcastream-Stream-Seq"
	// HeaderPipeline and HeaderKey name the pipeline and key of a dead
	// letter; HeaderInputSubject is the subject the message was published
	// to (HeaderSubject without the partition token a partitioned input
	// stream appends), where "kpcastream dlq republish" sends it back.
	HeaderPipeline     = "Kpcastream-Pipeline"
	HeaderKey          = "Kpcastream-Key"
	HeaderInputSubject = "Kpcastream-Input-Subject"
	HeaderContentType  = "Content-Type"
)

// inMsg is an input message, from JetStream (js set) or core NATS.
type inMsg struct {
	pipe    *pipeline
	key     string
	subject string
	data    []byte
	header  nats.Header
	seq     uint64        // stream sequence (core: a process-local counter)
	js      jetstream.Msg // nil for core NATS
	// tm is the message's time, ns since the epoch: its stream timestamp
	// (the same on every redelivery and replay), or for core NATS the time
	// it was received. It stamps the outputs of observations without ts.
	tm int64
}

// item is what a worker receives: a message (msg.pipe set), a control
// request, or a missing delivery to wait for.
type item struct {
	msg  inMsg
	ctl  *control
	miss *missing
}

// missing is a message of key that the consumer delivered but that never
// arrived (lost with a connection); it comes back after ack_wait.
type missing struct {
	pipe *pipeline
	key  string
	seq  uint64
}

// control is a request from the micro service, answered on reply.
type control struct {
	op    string // "model", "snapshot", "reset", "keys"
	pipe  *pipeline
	key   string // "" with "snapshot": every key of the worker
	reply chan controlReply
}

type controlReply struct {
	data []byte
	n    int
	err  error
}

// entry is one loaded learner, owned by one worker: the core's state of
// the key and what the shell keeps beside it.
type entry struct {
	*keyState
	pipe    *pipeline
	l       learners.Learner
	cls     *keyClassifier // the key's classifier stage, nil without one
	mon     *keyMonitor    // the key's monitor (monitor:, preprocess:), nil without one
	rev     uint64         // KV revision of the last saved or loaded snapshot
	stored  int
	out     outQueue // outputs not yet acknowledged by the output stream (window.go)
	subject string   // output subject of the key (expanded on first use)
	advice  string   // budget advice of the last message (Summary.BudgetAdvice)
	// explained is the explained variance ratio of the last projection and
	// evBand its explainedBand + 1 (0: not counted in the metrics yet).
	explained float64
	evBand    int8
}

// snapJob is a snapshot handed from a worker to its snapshotter.
type snapJob struct {
	e    *entry
	snap *codec.Snapshot
	rev  uint64
	job  job
}

type snapResult struct {
	job *snapJob
	rev uint64
	err error
	dur time.Duration
}

// jobSlots is the number of snapshot jobs a worker may have in flight.
const jobSlots = 8

// pubWait is a JetStream output publish in flight, for the acker.
type pubWait struct {
	e *entry
	f jetstream.PubAckFuture
}

// pubDone is how a publish in flight ended (err nil: acknowledged).
type pubDone struct {
	e   *entry
	err error
}

// worker owns the learners of the keys hashed to it, one snapshotter
// goroutine that saves the snapshots it hands over, and one acker
// goroutine that waits for the acknowledgements of its output publishes
// (window.go).
type worker struct {
	p       *Processor
	part    *partition
	id      int
	log     *zap.Logger
	in      chan item
	jobs    chan *snapJob
	results chan snapResult
	core    *keyCore
	keys    map[string]*entry
	obs     []codec.Observation
	res     applied
	eig     []float64
	scratch []byte // encoding buffer of outputs
	ys      []int  // scratch of decode's label check
	dlLog   deadLetterLog

	win      window
	pubq     chan pubWait  // to the acker; capacity: publishes in flight at most
	stopped  chan struct{} // closed when run returns: the acker stops waiting
	acks     chan pubDone  // from the acker; same capacity, so it never blocks
	inflight int           // publishes in flight
	sendable []*entry      // keys ready to publish, waiting for an in-flight slot
	retrying []*entry      // keys whose head output waits to be published again
	retryT   *time.Timer
	retryAt  time.Time // when retryT fires; zero: stopped
}

func newWorker(pt *partition, id, quota int) *worker {
	p := pt.p
	pc := pt.pipe.cfg
	limit := max(1, pc.Output.Window/p.workersPerPartition(pc))
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &worker{
		p: p, part: pt, id: id, log: pt.log.With(zap.Int("worker", id)),
		in:      make(chan item, p.cfg.QueueSize),
		jobs:    make(chan *snapJob, jobSlots),
		results: make(chan snapResult, jobSlots),
		core:    newKeyCore(pt.track, pc.Snapshot, quota, jobSlots),
		keys:    map[string]*entry{},
		eig:     make([]float64, pc.Learner.Components),
		win:     window{limit: limit},
		pubq:    make(chan pubWait, limit),
		stopped: make(chan struct{}),
		acks:    make(chan pubDone, limit),
		retryT:  t,
	}
}

// run processes the worker's input until it is closed, then writes the
// final snapshots and waits for its snapshotter.
func (w *worker) run(ctx context.Context) error {
	defer close(w.stopped)
	defer w.release()
	tick := time.NewTicker(w.tickEvery())
	defer tick.Stop()
	closing := w.part.closing
	for {
		in := w.in
		if w.win.full() && w.part.fence.ok() && closing != nil {
			// Back-pressure: wait for acknowledgements. Not when fenced (nak
			// what comes until the input closes) or stopping (take the
			// queued input, then finish: the window may stay full).
			in = nil
		}
		select {
		case <-closing:
			closing = nil
		case it, ok := <-in:
			if !ok {
				return w.finish(ctx)
			}
			if it.ctl != nil {
				w.control(ctx, it.ctl)
				continue
			}
			if it.miss != nil {
				w.core.block(it.miss.key, it.miss.seq, true, time.Now())
				continue
			}
			if err := w.handle(ctx, &it.msg); err != nil {
				w.core.closing = true
				close(w.jobs)
				return err
			}
		case r := <-w.results:
			w.landed(r)
		case d := <-w.acks:
			w.acked(d)
		case <-w.retryT.C:
			w.retryDue()
		case <-tick.C:
			w.tick()
		}
	}
}

// waitOne waits for one event that frees a snapshot slot or the window —
// a landed save, a publish acknowledged or failed, a retry due — and
// handles it. It fails when ctx ends, the fence is lost, or deadline
// passes first.
func (w *worker) waitOne(ctx context.Context, deadline time.Time) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-w.results:
		w.landed(r)
	case d := <-w.acks:
		w.acked(d)
	case <-w.retryT.C:
		w.retryDue()
	case <-ctx.Done():
		return ctx.Err()
	case <-w.part.fence.lostCh():
		return errFenced
	case <-t.C:
		return fmt.Errorf("processor: %w: outputs or snapshots not acknowledged within %v", errStalled, w.p.cfg.SnapshotTimeout)
	}
	return nil
}

func (w *worker) tickEvery() time.Duration {
	d := time.Second
	if e := w.part.pipe.cfg.Snapshot.Every; e > 0 {
		d = min(d, max(e/2, 10*time.Millisecond))
	}
	return d
}

// handle processes one message; it returns an error only when Run must stop.
func (w *worker) handle(ctx context.Context, m *inMsg) (fatal error) {
	pl := m.pipe
	name := pl.cfg.Name
	pl.stats.In.Add(1)
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("panic while processing message", zap.String("pipeline", name), zap.String("key", m.key),
				zap.Uint64("seq", m.seq), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			w.reject(ctx, m, fmt.Errorf("%w: %v", errPanic, r))
		}
	}()
	if !w.part.fence.ok() {
		// The partition is stopping: its new owner applies m.
		return w.fail(ctx, m, errFenced)
	}
	// Bad input is refused before its key is loaded, claimed or created: it
	// costs no learner, no claim, no snapshot, and evicts nothing.
	enc, err := w.decode(m)
	if err != nil {
		return w.fail(ctx, m, err)
	}
	if wait, first := w.core.waits(m.key, m.seq, time.Now()); wait {
		return w.fail(ctx, m, fmt.Errorf("%w: key %q: sequence %d before %d", errWaiting, m.key, first, m.seq))
	}
	e, err := w.entry(ctx, pl, m.key)
	if err != nil {
		w.core.loadFailed(m.key, m.seq, classifyAction(err) == actNak, time.Now())
		return w.fail(ctx, m, err)
	}
	w.core.touch(e.keyState)
	if w.core.admit(e.keyState, m.seq) == vSkip {
		w.ack(m, resultSkipped)
		return nil
	}
	start := time.Now()
	err = apply(&w.res, e.l, e.cls, e.mon, w.obs, m.key, m.seq, w.eig)
	took := time.Since(start)
	pl.met.learnSeconds.Observe(took.Seconds())
	if err != nil && !errors.Is(err, learners.ErrNumerical) {
		// Checked before learning: the learner is untouched.
		return w.fail(ctx, m, err)
	}
	w.applied(e, m.seq)
	if w.p.onApply != nil {
		w.p.onApply(pl.cfg.Name, w.part.num, w.part.epoch, m.key, m.seq)
	}
	if err != nil {
		// A numerical failure may follow learned observations of a batch:
		// the message counts as applied, and is dead-lettered.
		return w.fail(ctx, m, err)
	}
	if n := len(w.res.outs); n > 0 {
		msgs, err := w.outputs(e, enc, m.tm)
		if err != nil {
			return w.fail(ctx, m, err)
		}
		w.setExplained(e, w.res.outs[n-1].Explained)
		for i := range w.res.outs {
			pl.met.t2.Observe(w.res.outs[i].T2)
		}
		w.watchOut(e, start, took)
		// Published through the window (window.go); m is acknowledged with
		// its last output.
		if w.win.push(&e.out, &outGroup{seq: m.seq, msgs: msgs, in: *m, result: resultOK}) {
			w.trySend(e)
		}
		w.maybeSnapshot(e, false)
		return nil
	}
	if w.res.warming > 0 && len(w.res.outs) == 0 {
		pl.stats.Warming.Add(1)
		w.ack(m, resultWarming)
	} else {
		w.ack(m, resultOK)
	}
	w.maybeSnapshot(e, false)
	return nil
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
	if err := check(obs, m.pipe.cfg.Learner.Dim); err != nil {
		return 0, err
	}
	if st := m.pipe.cls; st != nil {
		if w.ys, err = st.classes.labels(w.ys[:0], obs); err != nil {
			return 0, err
		}
	}
	if m.pipe.outEnc != 0 {
		enc = m.pipe.outEnc
	}
	return enc, nil
}

// applied records that message seq changed e.
func (w *worker) applied(e *entry, seq uint64) {
	w.core.applied(e.keyState, seq, time.Now())
	sum := e.l.Summary(w.eig)
	e.pipe.met.storedPoints.Add(float64(sum.Stored - e.stored))
	e.stored = sum.Stored
	w.setAdvice(e, sum.BudgetAdvice)
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
		w.p.met.budget.WithLabelValues(pl.cfg.Name, e.advice).Dec()
		pl.adviceCount(e.advice).Add(-1)
	}
	if advice != "" {
		w.p.met.budget.WithLabelValues(pl.cfg.Name, advice).Inc()
		pl.adviceCount(advice).Add(1)
	}
	e.advice = advice
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
		e.subject = expand(pc.Output.Subject, pc.Name, e.key)
	}
	msgs := make([]*nats.Msg, len(w.res.outs))
	batch := len(w.obs) > 1
	ct := enc.ContentType()
	for i := range w.res.outs {
		out := &w.res.outs[i]
		id := pc.Name + "/" + e.key + "/" + strconv.FormatUint(out.Seq, 10)
		if batch {
			id += "/" + strconv.Itoa(w.res.idx[i])
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

// sent counts n published outputs of e.
func (w *worker) sent(e *entry, n int) {
	e.pipe.stats.Out.Add(int64(n))
	e.pipe.met.outputs.Add(float64(n))
}

// trySend publishes the head output of e's queue (it must be ready): with
// JetStream when a stream captures the output subject (asynchronously: the
// acker reports the PubAck), else with core NATS (done when written to the
// connection, so e's next outputs follow at once). With every in-flight
// slot taken, e waits for one (sendable).
func (w *worker) trySend(e *entry) {
	if !e.pipe.outJS {
		for e.out.ready(time.Now()) && w.part.fence.ok() {
			if err := w.p.conn.PublishMsg(e.out.send()); err != nil {
				w.pubFailed(e, err)
				return
			}
			w.pubAcked(e)
		}
		return
	}
	if w.inflight >= cap(w.pubq) {
		w.sendable = append(w.sendable, e)
		return
	}
	if !w.part.fence.ok() {
		// Fenced: nothing more is published; the partition stops and its
		// new owner replays what is not acknowledged.
		return
	}
	f, err := w.p.pubJS.PublishMsgAsync(e.out.send())
	if err != nil {
		w.pubFailed(e, err)
		return
	}
	w.inflight++
	w.pubq <- pubWait{e: e, f: f}
}

// acked handles the end of a JetStream publish in flight.
func (w *worker) acked(d pubDone) {
	w.inflight--
	if d.err != nil {
		w.pubFailed(d.e, d.err)
	} else {
		w.pubAcked(d.e)
		if d.e.out.ready(time.Time{}) {
			w.trySend(d.e)
		}
	}
	for w.inflight < cap(w.pubq) && len(w.sendable) > 0 {
		e := w.sendable[0]
		w.sendable = w.sendable[1:]
		if e.out.ready(time.Time{}) {
			w.trySend(e)
		}
	}
}

// pubAcked records that e's output in flight is in the output stream:
// its input is acknowledged with its last output, and snapshots held for
// it are handed to the snapshotter.
func (w *worker) pubAcked(e *entry) {
	done, saves := w.win.acked(&e.out)
	w.sent(e, 1)
	if done != nil {
		w.ack(&done.in, done.result)
	}
	for _, j := range saves {
		w.jobs <- j // counted in the core's snapshot slots: never blocks
	}
}

// pubFailed records a failed publish of e's head output: it is published
// again after a backoff, before anything later of the key.
func (w *worker) pubFailed(e *entry, err error) {
	w.p.met.publishErrors.WithLabelValues(e.pipe.cfg.Name).Inc()
	at := e.out.failed(time.Now(), !transientJS(err))
	if n := e.out.tries; n == 1 || n%20 == 0 {
		g := e.out.groups[0]
		w.log.Warn("output publish failed; retrying it before the key's later outputs", zap.String("key", e.key),
			zap.Uint64("seq", g.seq), zap.String("subject", e.subject), zap.Int("attempt", n), zap.Error(err))
	}
	w.retrying = append(w.retrying, e)
	if w.retryAt.IsZero() || at.Before(w.retryAt) {
		w.retryAt = at
		w.retryT.Reset(time.Until(at))
	}
}

// retryDue publishes again the outputs whose retry is due.
func (w *worker) retryDue() {
	now := time.Now()
	w.retryAt = time.Time{}
	keep := w.retrying[:0]
	var due []*entry
	for _, e := range w.retrying {
		switch {
		case e.out.flying || len(e.out.groups) == 0:
		case e.out.ready(now):
			due = append(due, e)
		default:
			keep = append(keep, e)
			if w.retryAt.IsZero() || e.out.retryAt.Before(w.retryAt) {
				w.retryAt = e.out.retryAt
			}
		}
	}
	w.retrying = keep
	if !w.retryAt.IsZero() {
		w.retryT.Reset(time.Until(w.retryAt))
	}
	for _, e := range due {
		w.trySend(e)
	}
}

// acker waits for the acknowledgement of each JetStream publish in flight,
// in publish order, and reports it to the worker, until the worker stops
// (what is still in flight then no longer matters: its inputs are not
// acknowledged, and the partition's next owner replays them). The
// JetStream context times an attempt out (publishAttempt); the timer here
// only guards against a future that is never resolved.
func (w *worker) acker(ctx context.Context) error {
	guard := 2*w.p.publishAttempt() + time.Second
	for {
		var pw pubWait
		select {
		case pw = <-w.pubq:
		case <-w.stopped:
			return nil
		}
		d := pubDone{e: pw.e}
		t := time.NewTimer(guard)
		select {
		case <-pw.f.Ok():
		case err := <-pw.f.Err():
			d.err = err
		case <-t.C:
			d.err = jetstream.ErrAsyncPublishTimeout
		case <-ctx.Done():
			d.err = ctx.Err()
		case <-w.stopped:
			t.Stop()
			return nil
		}
		t.Stop()
		w.acks <- d
	}
}

// expireBlocks forgets blocks older than blockExpiry: their message did not
// come back (deleted from the stream by its limits, say), and the key must
// not wait forever.
func (w *worker) expireBlocks() {
	for _, x := range w.core.expire(time.Now(), blockExpiry(w.part.pipe.cfg)) {
		w.log.Error("gave up waiting for a message of a key; later messages go on without it",
			zap.String("key", x.key), zap.Uint64("seq", x.seq), zap.Duration("waited", x.waited))
	}
}

// blockExpiry is how long a key waits for an unapplied message.
func blockExpiry(pc PipelineConfig) time.Duration {
	return max(3*pc.Input.AckWait, time.Minute)
}

// ack acknowledges a handled message.
func (w *worker) ack(m *inMsg, result string) {
	w.core.settled(m.key, m.seq)
	if m.js != nil {
		if err := m.js.Ack(); err != nil {
			w.log.Warn("ack", zap.String("pipeline", m.pipe.cfg.Name), zap.Uint64("seq", m.seq), zap.Error(err))
		}
		w.part.track.release(m.seq)
	}
	if result == resultSkipped {
		m.pipe.stats.Skipped.Add(1)
	}
	m.pipe.met.result(w.p.met, m.pipe.cfg.Name, result).Inc()
}

// fail handles a processing error as classify says.
func (w *worker) fail(ctx context.Context, m *inMsg, err error) error {
	act, reason := classify(err)
	name := m.pipe.cfg.Name
	switch act {
	case actTerm:
		w.reject(ctx, m, err)
	case actNak:
		level := w.log.Warn
		switch reason {
		case "corrupt_snapshot":
			level = w.log.Error
		case "waiting", "fenced":
			// Fenced: the partition logs its fence loss once; each message
			// it naks meanwhile goes to the new owner.
			level = w.log.Debug
		}
		level("message refused, will be redelivered", zap.String("pipeline", name), zap.String("key", m.key),
			zap.Uint64("seq", m.seq), zap.String("reason", reason), zap.Error(err))
		m.pipe.stats.Naks.Add(1)
		w.p.met.messages.WithLabelValues(name, resultNak).Inc()
		if m.js != nil {
			w.part.track.nak(m.seq)
			if nerr := m.js.NakWithDelay(m.pipe.cfg.Input.NakDelay); nerr != nil {
				w.log.Warn("nak", zap.Error(nerr))
			}
		}
	case actFatal:
		w.log.Error("fatal", zap.String("pipeline", name), zap.Error(err))
		if m.js != nil {
			w.part.track.nak(m.seq)
			_ = m.js.Nak()
		}
		return err
	}
	return nil
}

// reject dead-letters m with the reason of err and terminates it. The
// dead letter is published with JetStream when a stream stores the
// dead-letter subject (retried like an output, deduplicated by the input
// sequence), else with core NATS; a failure to publish it is logged and
// the input is terminated all the same.
func (w *worker) reject(ctx context.Context, m *inMsg, err error) {
	_, reason := classify(err)
	pc := m.pipe.cfg
	if !w.part.fence.ok() {
		// Dead letters are fenced like outputs: a partition that may no
		// longer own the message leaves it to the new owner.
		if m.js != nil {
			w.part.track.nak(m.seq)
			_ = m.js.Nak()
		}
		return
	}
	w.dlLog.add(w.log, time.Now(), m.key, m.subject, m.seq, reason, err) // w.log names the pipeline
	dl := nats.NewMsg(expand(pc.DeadLetter, pc.Name, m.key))
	dl.Data = m.data
	for k, v := range m.header {
		if k != jetstream.MsgIDHeader {
			dl.Header[k] = v
		}
	}
	dl.Header.Set(HeaderError, reason)
	dl.Header.Set(HeaderErrorDetail, err.Error())
	dl.Header.Set(HeaderSubject, m.subject)
	dl.Header.Set(HeaderInputSubject, inputSubject(m.subject, pc.Partitions))
	dl.Header.Set(HeaderStreamSeq, strconv.FormatUint(m.seq, 10))
	dl.Header.Set(HeaderPipeline, pc.Name)
	dl.Header.Set(HeaderKey, m.key)
	var perr error
	if m.pipe.dlJS {
		if m.js != nil {
			dl.Header.Set(jetstream.MsgIDHeader, "dlq/"+pc.Name+"/"+strconv.FormatUint(m.seq, 10))
		}
		perr = w.publishJS(ctx, dl)
	} else {
		perr = w.p.conn.PublishMsg(dl)
	}
	if perr != nil {
		w.log.Error("publish dead letter", zap.String("pipeline", pc.Name), zap.Uint64("seq", m.seq), zap.Error(perr))
	}
	w.core.settled(m.key, m.seq)
	if m.js != nil {
		if terr := m.js.TermWithReason(reason); terr != nil {
			w.log.Warn("term", zap.Error(terr))
		}
		w.part.track.release(m.seq)
	}
	m.pipe.stats.DeadLettered.Add(1)
	w.p.met.messages.WithLabelValues(pc.Name, resultDeadLetter).Inc()
	w.p.met.deadLetters.WithLabelValues(pc.Name, reason).Inc()
}

// inputSubject is the subject a message stored as subject was published
// to: a partitioned input stream appends the partition as a last token.
func inputSubject(subject string, partitions int) string {
	if partitions > 1 {
		if i := strings.LastIndexByte(subject, '.'); i >= 0 {
			return subject[:i]
		}
	}
	return subject
}

// deadLetterLogEvery is the shortest interval between two warn lines
// about dead letters of one worker.
var deadLetterLogEvery = 10 * time.Second

// deadLetterLog keeps a flood of dead letters from writing one warn line
// per message: the first dead letter is logged with its details at once,
// the next ones within deadLetterLogEvery are counted by reason, and the
// count is logged (with the last one's details) when the interval is over
// — by the next dead letter or by the worker's tick.
type deadLetterLog struct {
	last     time.Time
	n        int
	byReason map[string]int
	sample   []zap.Field
}

func (d *deadLetterLog) add(log *zap.Logger, now time.Time, key, subject string, seq uint64, reason string, err error) {
	fields := []zap.Field{zap.String("key", key), zap.String("subject", subject),
		zap.Uint64("seq", seq), zap.String("reason", reason), zap.Error(err)}
	if !d.last.IsZero() && now.Sub(d.last) < deadLetterLogEvery {
		d.n++
		if d.byReason == nil {
			d.byReason = map[string]int{}
		}
		d.byReason[reason]++
		d.sample = fields
		return
	}
	if d.n > 0 {
		fields = append(fields, zap.Int("suppressed", d.n), zap.Any("suppressed_by_reason", d.byReason))
	}
	log.Warn("dead-lettered", fields...)
	d.last, d.n, d.byReason, d.sample = now, 0, nil, nil
}

// flush logs the dead letters counted since the last line, once the
// interval is over.
func (d *deadLetterLog) flush(log *zap.Logger, now time.Time) {
	if d.n == 0 || now.Sub(d.last) < deadLetterLogEvery {
		return
	}
	log.Warn("dead-lettered (more)", append(d.sample, zap.Int("count", d.n), zap.Any("by_reason", d.byReason),
		zap.Duration("within", now.Sub(d.last)))...)
	d.last, d.n, d.byReason, d.sample = now, 0, nil, nil
}

// entry returns the loaded learner of key, loading its snapshot (or
// creating a fresh learner) on first use and unloading the least recently
// used learner when the worker's quota is full.
func (w *worker) entry(ctx context.Context, pl *pipeline, key string) (*entry, error) {
	return w.entryOf(ctx, pl, key, true)
}

// entryOf is entry; with create false, a key with neither a loaded learner
// nor a snapshot gives errNoKey instead of a fresh learner (read-only
// requests never create learners).
func (w *worker) entryOf(ctx context.Context, pl *pipeline, key string, create bool) (*entry, error) {
	return w.entryFor(ctx, pl, key, create, false)
}

// entryFor is entryOf; with replaceCorrupt a corrupt snapshot of a key not
// loaded yet gives a fresh learner whatever on_corrupt_snapshot says (the
// reset request: it replaces the state anyway, so it must not need to
// decode it). The fresh learner is claimed like any loaded key, by
// compare-and-set on the corrupt entry's revision, so the reset stays
// fenced.
func (w *worker) entryFor(ctx context.Context, pl *pipeline, key string, create, replaceCorrupt bool) (*entry, error) {
	if e, ok := w.keys[key]; ok {
		if w.core.revive(e.keyState) {
			w.live(pl, 1)
		}
		return e, nil
	}
	for w.core.full() {
		if err := w.evict(ctx, pl); err != nil {
			return nil, err
		}
	}
	e, err := w.load(ctx, pl, key, create, replaceCorrupt)
	if err != nil {
		return nil, err
	}
	w.keys[key] = e
	w.core.add(e.keyState)
	w.live(pl, 1)
	return e, nil
}

func (w *worker) live(pl *pipeline, d int) {
	pl.stats.Live.Add(int64(d))
	pl.met.activeLearners.Add(float64(d))
}

// load reads key's snapshot, or builds a fresh learner if there is none
// (errNoKey when !create). In a JetStream partition it then fences the
// key: a snapshot written by a newer epoch means this instance no longer
// owns the partition (errFenced, and the partition stops); a missing one,
// or one written by an older epoch, is claimed — written back with this
// partition's epoch by compare-and-set on the revision read — before the
// key applies anything, so a stale owner's later save of the key fails its
// compare-and-set instead of overwriting acked work. A snapshot that names
// another pipeline or key is refused as corrupt.
func (w *worker) load(ctx context.Context, pl *pipeline, key string, create, replaceCorrupt bool) (*entry, error) {
	for attempt := 1; ; attempt++ {
		e, claim, err := w.read(ctx, pl, key, create, replaceCorrupt)
		if err != nil || !claim {
			return e, err
		}
		err = w.claim(ctx, e)
		if errors.Is(err, snapshot.ErrConflict) && attempt < 3 {
			// Written meanwhile (by a stale owner finishing, or a retried
			// claim that landed): read it again.
			pl.met.storedPoints.Sub(float64(e.stored))
			continue
		}
		if err != nil {
			pl.met.storedPoints.Sub(float64(e.stored))
			return nil, err
		}
		return e, nil
	}
}

// read loads key's snapshot into a new entry (or a fresh learner), and
// says whether the entry must be claimed for this partition's epoch.
func (w *worker) read(ctx context.Context, pl *pipeline, key string, create, replaceCorrupt bool) (*entry, bool, error) {
	pc := pl.cfg
	fenced := w.part.fence != nil
	lctx, cancel := context.WithTimeout(ctx, w.p.cfg.SnapshotTimeout)
	defer cancel()
	snap, rev, err := w.p.store.Load(lctx, snapshot.JoinKey(pc.Name, key))
	if err == nil && (snap.Pipeline != pc.Name || snap.Key != key) {
		err = fmt.Errorf("%w: the snapshot stored for pipeline %q key %q holds pipeline %q key %q (copied from another key?)",
			snapshot.ErrCorrupt, pc.Name, key, snap.Pipeline, snap.Key)
	}
	if err == nil && fenced && snap.Epoch > w.part.epoch && !w.part.stillOwned(lctx) {
		w.part.fence.revoke()
		return nil, false, fmt.Errorf("%w: key %q of pipeline %s has a snapshot written by epoch %d, this owner has epoch %d",
			errFenced, key, pc.Name, snap.Epoch, w.part.epoch)
	}
	e := &entry{pipe: pl, keyState: &keyState{key: key}, rev: rev}
	switch {
	case errors.Is(err, snapshot.ErrNoSnapshot):
		if !create {
			return nil, false, fmt.Errorf("%w: pipeline %s has no learner for key %q", errNoKey, pc.Name, key)
		}
		e.rev = 0
	case err == nil:
		e.l, err = w.restore(pc, snap)
		if err == nil {
			e.cls, err = newKeyClassifier(pl.cls, e.l, snap.Classifier)
		}
		if err == nil {
			e.mon, err = newKeyMonitor(pl, snap.Monitor)
		}
		if err == nil {
			e.lastSeq = snap.LastSeq
			e.stored = e.l.Summary(w.eig).Stored
			pl.met.storedPoints.Add(float64(e.stored))
			w.log.Debug("restored", zap.String("key", key), zap.Uint64("last_seq", snap.LastSeq), zap.Uint64("rev", rev),
				zap.Uint64("snapshot_epoch", snap.Epoch))
			// A snapshot of a newer epoch that stillOwned let through was
			// written under another partition layout: claim it too.
			return e, fenced && snap.Epoch != w.part.epoch, nil
		}
		fallthrough
	case errors.Is(err, snapshot.ErrCorrupt):
		w.p.met.snapFailures.WithLabelValues(pc.Name, "corrupt").Inc()
		if pc.Snapshot.OnCorrupt != OnCorruptReset && !replaceCorrupt {
			return nil, false, fmt.Errorf("processor: key %q of pipeline %s: %w (on_corrupt_snapshot: fail; to start the key afresh run "+
				"'kpcastream snapshot rm --config FILE --pipeline %s --key %s', or set on_corrupt_snapshot: reset)", key, pc.Name, err, pc.Name, key)
		}
		w.log.Error("corrupt snapshot replaced by a fresh learner", zap.String("key", key), zap.Error(err))
		// The corrupt entry's revision stays in e.rev: the claim below
		// replaces it by compare-and-set, so the reset is fenced.
	default:
		return nil, false, fmt.Errorf("processor: load snapshot of %q: %w", key, err)
	}
	l, err := w.p.newLearner(pc.Learner)
	if err != nil {
		return nil, false, err
	}
	e.l = l
	if e.cls, err = newKeyClassifier(pl.cls, l, nil); err != nil {
		return nil, false, err
	}
	if e.mon, err = newKeyMonitor(pl, nil); err != nil {
		return nil, false, err
	}
	return e, fenced, nil
}

// claim writes e's state back with this partition's epoch, by
// compare-and-set on e.rev.
func (w *worker) claim(ctx context.Context, e *entry) error {
	if !w.part.fence.ok() {
		return errFenced
	}
	cctx, cancel := context.WithTimeout(ctx, w.p.cfg.SnapshotTimeout)
	defer cancel()
	snap := &codec.Snapshot{Key: e.key, Pipeline: e.pipe.cfg.Name, LastSeq: e.lastSeq, Epoch: w.part.epoch, State: e.l.State(), Classifier: e.cls.state(), Monitor: e.mon.state()}
	rev, err := w.p.store.Save(cctx, snapshot.JoinKey(e.pipe.cfg.Name, e.key), snap, e.rev)
	if err != nil {
		return fmt.Errorf("processor: claim key %q for epoch %d: %w", e.key, w.part.epoch, err)
	}
	e.rev = rev
	return nil
}

// restore rebuilds a learner from a snapshot taken with the pipeline's config.
func (w *worker) restore(pc PipelineConfig, snap *codec.Snapshot) (learners.Learner, error) {
	if snap.State == nil {
		return nil, fmt.Errorf("%w: empty state", learners.ErrState)
	}
	lc := pc.Learner
	if got, want := snap.State.Config.WithDefaults(), pc.Learner.WithDefaults(); got != want {
		// The budget policy (eviction, swap_ratio) is the learner's own: a
		// key keeps its snapshot's until it is reset, so that a changed
		// default or setting never refuses existing keys. Anything else
		// that differs refuses the snapshot.
		alt := want
		alt.Eviction, alt.SwapRatio = got.Eviction, got.SwapRatio
		if alt != got {
			return nil, fmt.Errorf("%w: snapshot has %+v, pipeline has %+v", errIncompatible, got, want)
		}
		w.log.Info("key keeps the budget policy of its snapshot; reset it to apply the pipeline's", zap.String("key", snap.Key),
			zap.String("eviction", got.Eviction), zap.String("pipeline_eviction", want.Eviction))
		lc = alt
	}
	l, err := w.p.newLearner(lc)
	if err != nil {
		return nil, err
	}
	if err := l.Restore(snap.State); err != nil {
		return nil, err
	}
	return l, nil
}

// evict unloads the least recently used learner of pl and hands its
// snapshot over, waiting up to snapshot_timeout for a job slot. The entry
// stays (not live) until its save lands; a snapshot of a key with outputs
// queued is held until they are acknowledged (window.go). When no slot
// frees in time the key is saved as soon as one does (saveNow) and the
// error is returned.
func (w *worker) evict(ctx context.Context, pl *pipeline) error {
	e := w.keys[w.core.victim().key]
	drop, save := w.core.unload(e.keyState)
	w.live(pl, -1)
	switch {
	case drop:
		w.drop(e)
	case save:
		deadline := time.Now().Add(w.p.cfg.SnapshotTimeout)
		for w.core.flying >= jobSlots {
			if err := w.waitOne(ctx, deadline); err != nil {
				e.saveNow = true
				return fmt.Errorf("processor: unload key %q: %w", e.key, err)
			}
		}
		if !e.saving && e.dirty { // a landed save may have handed it over meanwhile
			w.handoff(e)
		}
	}
	return nil
}

// drop forgets an unloaded entry.
func (w *worker) drop(e *entry) {
	delete(w.keys, e.key)
	w.unmeter(e)
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

// maybeSnapshot hands e's snapshot over when it is due (or force).
func (w *worker) maybeSnapshot(e *entry, force bool) {
	if w.core.due(e.keyState, time.Now(), force, w.part.fence.ok()) {
		w.handoff(e)
	}
}

// handoff gives a copy of e's state to the snapshotter; it never blocks
// (the caller made sure a slot is free). While e has outputs that the
// output stream has not acknowledged, the job is held until they are
// (outQueue.hold): a snapshot never holds a message whose outputs could
// still be lost. A held job counts as in flight.
func (w *worker) handoff(e *entry) {
	j := w.core.handoff(e.keyState)
	sj := &snapJob{
		e:    e,
		snap: &codec.Snapshot{Key: e.key, Pipeline: e.pipe.cfg.Name, LastSeq: j.lastSeq, Epoch: w.part.epoch, State: e.l.State(), Classifier: e.cls.state(), Monitor: e.mon.state()},
		rev:  e.rev,
		job:  j,
	}
	if e.out.hold(sj) {
		return
	}
	w.jobs <- sj
}

// landed applies a snapshot result to its entry.
func (w *worker) landed(r snapResult) {
	j := r.job
	e := j.e
	pl := e.pipe
	name := pl.cfg.Name
	w.p.met.snapSeconds.WithLabelValues(name).Observe(r.dur.Seconds())
	o := saved
	switch {
	case r.err == nil:
		e.rev = r.rev
		w.p.met.snapBytes.WithLabelValues(name).Observe(float64(stateBytes(j.snap)))
	case errors.Is(r.err, errFenced) || (w.part.fence != nil && errors.Is(r.err, snapshot.ErrConflict)):
		// This partition no longer owns the key (a newer epoch claimed it):
		// stop writing; the partition stops and its new owner replays from
		// the checkpoint. Nothing is dropped or reloaded here.
		if errors.Is(r.err, snapshot.ErrConflict) {
			w.p.met.snapFailures.WithLabelValues(name, "conflict").Inc()
			w.log.Error("snapshot conflict: a newer owner claimed the key; stopping the partition", zap.String("key", e.key),
				zap.Uint64("rev", j.rev), zap.Error(r.err))
		}
		w.part.fence.revoke()
		o = fenced
	case errors.Is(r.err, snapshot.ErrConflict):
		// Someone else committed a newer snapshot of this key: we no longer
		// own it. Forget the learner; the next message reloads the newer
		// snapshot and skips what it already holds.
		w.p.met.snapFailures.WithLabelValues(name, "conflict").Inc()
		w.log.Error("snapshot conflict: another worker owns the key; unloading it", zap.String("key", e.key),
			zap.Uint64("rev", j.rev), zap.Error(r.err))
		o = conflict
	default:
		w.p.met.snapFailures.WithLabelValues(name, "error").Inc()
		w.log.Warn("snapshot failed; will retry", zap.String("key", e.key), zap.Error(r.err))
		o = failed
	}
	switch w.core.landed(e.keyState, j.job, o, time.Now()) {
	case nextSave:
		w.saveSoon(e)
	case nextDrop:
		w.drop(e)
	case nextForget:
		if w.core.forget(e.keyState) {
			w.live(pl, -1)
		}
		w.drop(e)
	}
	// A slot is free: hand over the keys waiting for one.
	for _, k := range w.keys {
		if w.core.flying >= jobSlots {
			break
		}
		if k.saveNow && k.dirty && !k.saving {
			w.handoff(k)
		}
	}
}

// saveSoon hands e's snapshot over now or, when a save of e is in flight
// or no slot is free, as soon as that save lands or a slot frees (landed).
// A reset, a snapshot request or an unloading key must not wait for the
// snapshot policy.
func (w *worker) saveSoon(e *entry) {
	e.saveNow = true
	if !w.core.closing && !e.saving && e.dirty && w.core.flying < jobSlots {
		w.handoff(e)
	}
}

// stateBytes is the size of a snapshot's numeric state: the learner's
// matrices and, with a classifier stage, its weights and covariance.
func stateBytes(s *codec.Snapshot) int {
	n := 0
	for _, m := range s.State.Matrices {
		n += 8 * len(m.Data)
	}
	if c := s.Classifier; c != nil {
		n += 8 * (len(c.W) + len(c.P))
	}
	return n
}

// tick hands over the snapshots due by time and expires old blocks.
func (w *worker) tick() {
	w.dlLog.flush(w.log, time.Now())
	w.expireBlocks()
	for _, e := range w.keys {
		if w.core.flying >= jobSlots {
			return
		}
		w.maybeSnapshot(e, false)
	}
}

// finish publishes the queued outputs and writes the final snapshots (if
// the policy says so), bounded by shutdown_timeout, and waits for the
// snapshotter to save everything handed over. A key whose outputs are not
// all acknowledged in time is not snapshotted and its inputs stay
// unacknowledged: the next owner replays them. Fenced, it writes nothing.
func (w *worker) finish(ctx context.Context) error {
	deadline := time.Now().Add(w.p.cfg.ShutdownTimeout)
	fctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if !w.part.fence.ok() {
		deadline = time.Now() // fenced: no final outputs or snapshots
	}
	for time.Now().Before(deadline) && w.part.fence.ok() {
		waiting := false
		for _, e := range w.keys {
			if e.out.hopeless() {
				continue // not waited for: replayed by the next owner
			}
			if len(e.out.groups) > 0 {
				waiting = true // its snapshot is held until its outputs are acknowledged
				continue
			}
			if !e.dirty || !*e.pipe.cfg.Snapshot.OnShutdown {
				continue
			}
			waiting = true
			if !e.saving && w.core.flying < jobSlots {
				w.handoff(e)
			}
		}
		if !waiting && w.core.flying == w.heldSaves() {
			break
		}
		if err := w.waitOne(fctx, deadline); err != nil {
			break
		}
	}
	if n := w.win.pending; n > 0 && w.part.fence.ok() {
		w.log.Warn("outputs not acknowledged at shutdown; their keys will be replayed from their last snapshot",
			zap.Int("outputs", n), zap.Error(fctx.Err()))
	}
	w.core.closing = true
	close(w.jobs)
	for r := range w.results {
		w.landed(r)
	}
	return nil
}

// heldSaves counts the snapshot jobs held for outputs (window.go).
func (w *worker) heldSaves() int {
	n := 0
	for _, e := range w.keys {
		n += len(e.out.held)
	}
	return n
}

// release takes the keys this worker still holds out of the live counts
// (stats and kpcastream_active_learners) and the per-key metrics when it
// stops: its partition stopped, or moved to another member, and its keys
// load again wherever the partition runs next. Without it a partition
// that came back to this process counted its keys twice, and a member
// kept reporting the dictionaries of keys it no longer runs.
func (w *worker) release() {
	for _, e := range w.keys {
		if e.elem != nil { // in the LRU: live (see keyCore)
			w.live(e.pipe, -1)
		}
		w.unmeter(e)
	}
}

// publishJS publishes m (a dead letter) with JetStream in attempts of
// publishAttempt(), retried while the failure is transient, until the
// stream acknowledges m or snapshot_timeout has passed. A retry is safe:
// the stream drops a duplicate by its Nats-Msg-Id and acknowledges it.
func (w *worker) publishJS(ctx context.Context, m *nats.Msg) error {
	deadline := time.Now().Add(w.p.cfg.SnapshotTimeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, min(w.p.publishAttempt(), max(time.Until(deadline), time.Millisecond)))
		_, err := w.p.js.PublishMsg(pctx, m)
		cancel()
		if err == nil || !transientJS(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if !w.part.fence.ok() {
			return errFenced
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// snapshotter saves the jobs handed over by the worker until jobs is closed.
func (w *worker) snapshotter(ctx context.Context) error {
	defer close(w.results)
	for j := range w.jobs {
		if !w.part.fence.ok() {
			w.results <- snapResult{job: j, err: errFenced}
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, w.p.cfg.SnapshotTimeout)
		start := time.Now()
		key := snapshot.JoinKey(j.snap.Pipeline, j.snap.Key)
		rev, err := w.p.store.Save(sctx, key, j.snap, j.rev)
		if errors.Is(err, snapshot.ErrConflict) {
			// An ambiguous commit (a retried write whose first attempt
			// landed) looks like a conflict: adopt the stored revision if it
			// holds exactly what we saved.
			if got, grev, lerr := w.p.store.Load(sctx, key); lerr == nil && got.LastSeq == j.snap.LastSeq &&
				got.State != nil && got.State.Seen == j.snap.State.Seen && reflect.DeepEqual(got.State, j.snap.State) {
				rev, err = grev, nil
			}
		}
		cancel()
		w.results <- snapResult{job: j, rev: rev, err: err, dur: time.Since(start)}
	}
	return nil
}
