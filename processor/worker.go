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
	"github.com/kpcastream/kpcastream/processor/internal/machine"
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
	op    string // "model", "snapshot", "reset", "accept", "keys"
	pipe  *pipeline
	key   string // "" with "snapshot": every key of the worker
	reply chan controlReply
}

type controlReply struct {
	data []byte
	n    int
	err  error
}

// entry is one loaded learner, owned by one worker: what the shell keeps
// of a key beside the machine's state of it.
type entry struct {
	key     string
	pipe    *pipeline
	l       learners.Learner
	cls     *keyClassifier // the key's classifier stage, nil without one
	mon     *keyMonitor    // the key's monitor (monitor:, preprocess:), nil without one
	rev     uint64         // KV revision of the last saved or loaded snapshot
	lastSeq uint64         // last sequence of the loaded snapshot (the machine keeps the live one)
	stored  int
	subject string // output subject of the key (expanded on first use)
	advice  string // budget advice of the last message (Summary.BudgetAdvice)
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
	job  machine.Job
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
	key string
	f   jetstream.PubAckFuture
}

// pubDone is how a publish in flight ended (err nil: acknowledged).
type pubDone struct {
	key string
	err error
}

// asyncPublisher is the worker's port to the output stream (the method of
// jetstream.JetStream it uses): publish m and return a future that
// resolves with its PubAck or an error.
type asyncPublisher interface {
	PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

// keyStore is the worker's port to the snapshot store: a key's snapshot
// and its revision, and a compare-and-set save (rev 0: create). Errors:
// snapshot.ErrNoSnapshot, ErrCorrupt, ErrConflict.
type keyStore interface {
	Load(ctx context.Context, key string) (*codec.Snapshot, uint64, error)
	Save(ctx context.Context, key string, s *codec.Snapshot, rev uint64) (uint64, error)
}

// Types of the worker's machine: inputs are inMsg, outputs NATS messages.
type (
	workerCore = machine.Machine[inMsg, *nats.Msg]
	coreAction = machine.Action[inMsg, *nats.Msg]
)

// worker executes its machine (processor/internal/machine), which holds
// every rule about its keys: it decodes and checks each message, steps the
// machine with it and with the results of what it did, and executes the
// machine's Ready — loading keys, applying messages to their learners,
// publishing outputs, acking, dead-lettering, saving snapshots. It owns the
// learners of the keys hashed to it, one snapshotter goroutine that saves
// the snapshots it hands over, and one acker goroutine that waits for the
// acknowledgements of its output publishes.
type worker struct {
	p       *Processor
	part    *partition
	id      int
	log     *zap.Logger
	in      chan item
	jobs    chan *snapJob
	results chan snapResult
	m       *workerCore
	keys    map[string]*entry
	held    map[uint64]*snapJob // snapshot copies held for outputs, by job ID
	obs     []codec.Observation
	enc     codec.Encoding // output encoding of the message in progress
	res     applied
	eig     []float64
	scratch []byte // encoding buffer of outputs
	ys      []int  // scratch of decode's label check
	dlLog   deadLetterLog

	lane    *lane          // output.key_in_flight > 1: outputs go through it (lane.go), not pubq
	laneIn  chan *nats.Msg // the stream's answers to the lane
	pubq    chan pubWait   // to the acker; capacity: publishes in flight at most
	stopped chan struct{}  // closed when run returns: the acker stops waiting
	acks    chan pubDone   // from the acker; same capacity, so it never blocks
	wake    *time.Timer
	wakeAt  time.Time // when wake fires; zero: stopped
	fenced  bool      // the machine was told
	fatal   error
}

// workerWindow is one worker's share of its partition's output window:
// output.window split over the partition's n workers. Through a lane it
// is at least key_in_flight, so that one hot key can keep key_in_flight
// outputs in flight however many workers share the window (with the window
// split sixteen ways a key had sixteen in flight); the partition then holds
// at most max(window, n·key_in_flight) outputs, its inputs still bounded by
// input.max_ack_pending.
func workerWindow(pc PipelineConfig, n int, lane bool) int {
	limit := max(1, pc.Output.Window/n)
	if lane {
		limit = max(limit, pc.Output.KeyInFlight)
	}
	return limit
}

func newWorker(pt *partition, id, quota int) *worker {
	p := pt.p
	pc := pt.pipe.cfg
	limit := workerWindow(pc, p.workersPerPartition(pc), pt.pipe.lane)
	t := time.NewTimer(time.Hour)
	t.Stop()
	sp := pc.Snapshot
	keyInFlight := 1
	var ln *lane
	var laneIn chan *nats.Msg
	if pt.pipe.lane {
		keyInFlight = pc.Output.KeyInFlight
		var lp lanePublisher = p.conn
		if p.wrapLane != nil {
			lp = p.wrapLane(lp)
		}
		ln = newLane(lp, nats.NewInbox(), p.publishAttempt())
		laneIn = make(chan *nats.Msg, 4*limit+64)
	}
	return &worker{
		p: p, part: pt, id: id, log: pt.log.With(zap.Int("worker", id)),
		in:      make(chan item, p.cfg.QueueSize),
		jobs:    make(chan *snapJob, jobSlots),
		results: make(chan snapResult, jobSlots),
		m: machine.New[inMsg, *nats.Msg](machine.Config{
			Policy:     machine.Policy{EveryMessages: sp.EveryMessages, Every: sp.Every},
			OnShutdown: *sp.OnShutdown, Quota: quota, Slots: jobSlots, Window: limit, KeyInFlight: keyInFlight,
			SlotWait: p.cfg.SnapshotTimeout, BlockTTL: blockExpiry(pc),
		}, pt.track),
		keys:    map[string]*entry{},
		held:    map[uint64]*snapJob{},
		eig:     make([]float64, pc.Learner.Components),
		lane:    ln,
		laneIn:  laneIn,
		pubq:    make(chan pubWait, limit),
		stopped: make(chan struct{}),
		acks:    make(chan pubDone, limit),
		wake:    t,
	}
}

// run processes the worker's input until it is closed and the machine
// finished, then waits for its snapshotter.
func (w *worker) run(ctx context.Context) error {
	defer close(w.stopped)
	defer w.release()
	if w.lane != nil {
		sub, err := w.p.conn.ChanSubscribe(w.lane.prefix+".>", w.laneIn)
		if err != nil {
			return fmt.Errorf("processor: output lane: subscribe to its answers: %w", err)
		}
		defer func() {
			w.lane.close()
			_ = sub.Unsubscribe()
			w.log.Debug("output lane", zap.Uint64("batches", w.lane.batches), zap.Uint64("ended_by_trouble", w.lane.ends))
		}()
	}
	tick := time.NewTicker(w.tickEvery())
	defer tick.Stop()
	closing, lost, done := w.part.closing, w.part.fence.Lost(), ctx.Done()
	in := w.in
	for {
		w.drain(ctx)
		if w.lane != nil {
			w.lane.settled()
		}
		if w.fatal != nil {
			close(w.jobs)
			return w.fatal
		}
		if w.m.Done() {
			return w.finish(ctx)
		}
		input := in
		if !w.m.Accepting() {
			input = nil
		}
		w.armWake()
		select {
		case <-closing:
			closing = nil
			w.step(machine.Stopping{})
		case <-lost:
			lost = nil
			w.fenceLost()
		case <-done:
			// Cancelled: finish now once the input has closed.
			done = nil
			if in == nil {
				w.step(machine.Close{Deadline: time.Now()})
			}
		case it, ok := <-input:
			switch {
			case !ok:
				in = nil
				if !w.part.fence.OK() {
					w.fenceLost() // fenced: no final outputs or snapshots
				}
				deadline := time.Now().Add(w.p.cfg.ShutdownTimeout)
				if done == nil {
					deadline = time.Now()
				}
				w.step(machine.Close{Deadline: deadline})
			case it.ctl != nil:
				w.control(it.ctl)
			case it.miss != nil:
				w.step(machine.Missing{Key: it.miss.key, Seq: it.miss.seq})
			default:
				w.deliver(&it.msg)
			}
		case r := <-w.results:
			w.landed(r)
		case d := <-w.acks:
			w.acked(d)
		case a := <-w.laneIn:
			w.lane.onAnswer(a.Subject, a.Header, a.Data, time.Now())
			w.laneResults()
		case <-w.wake.C:
			w.wakeAt = time.Time{}
			w.laneTick()
			w.step(machine.Tick{})
		case <-tick.C:
			w.dlLog.flush(w.log, time.Now())
			w.laneTick()
			w.step(machine.Tick{})
		}
	}
}

// step steps the machine; a protocol error is a bug of the worker, which
// stops.
func (w *worker) step(ev machine.Event) {
	if err := w.m.Step(time.Now(), ev); err != nil && w.fatal == nil {
		w.log.Error("worker broke its machine's protocol", zap.Error(err))
		w.fatal = err
	}
}

// fenceLost tells the machine, once, that the partition may no longer
// write.
func (w *worker) fenceLost() {
	if !w.fenced {
		w.fenced = true
		w.step(machine.FenceLost{})
	}
}

// armWake sets the wake timer to the machine's next deadline.
func (w *worker) armWake() {
	at := w.m.Wake()
	if w.lane != nil {
		if la := w.lane.wake(); !la.IsZero() && (at.IsZero() || la.Before(at)) {
			at = la
		}
	}
	if at.Equal(w.wakeAt) {
		return
	}
	w.wake.Stop()
	w.wakeAt = at
	if !at.IsZero() {
		w.wake.Reset(max(time.Until(at), 0))
	}
}

// drain executes the machine's Ready until it has nothing more to do.
func (w *worker) drain(ctx context.Context) {
	for w.m.HasReady() && w.fatal == nil {
		rd := w.m.Ready()
		for i := range rd.Actions {
			w.exec(ctx, &rd.Actions[i])
		}
		w.m.Advance(rd)
	}
}

// exec executes one action of the machine.
func (w *worker) exec(ctx context.Context, a *coreAction) {
	switch a.Kind {
	case machine.ActLoad:
		w.loadKey(ctx, a.Key, a.Load)
	case machine.ActApply:
		w.apply(&a.Msg)
	case machine.ActPublish:
		w.publish(a.Key, a.Ord, a.Out)
	case machine.ActRetry:
		w.p.met.publishErrors.WithLabelValues(w.part.pipe.cfg.Name).Inc()
		if errors.Is(a.Err, errFenced) {
			break
		}
		if n := a.Attempt; n == 1 || n%20 == 0 {
			w.log.Warn("output publish failed; retrying it before the key's later outputs", zap.String("key", a.Key),
				zap.Uint64("seq", a.Seq), zap.Int("attempt", n), zap.Error(a.Err))
		}
	case machine.ActAck:
		w.ack(&a.Msg, a.Result)
	case machine.ActNak:
		w.nak(&a.Msg, a.Err)
	case machine.ActReject:
		w.reject(ctx, &a.Msg, a.Err)
	case machine.ActSnapshot:
		sj := w.snapshot(w.keys[a.Key], a.Job)
		if a.Held {
			w.held[a.Job.ID] = sj
		} else {
			w.jobs <- sj // counted in the machine's snapshot slots: never blocks
		}
	case machine.ActSaveHeld:
		sj := w.held[a.Job.ID]
		delete(w.held, a.Job.ID)
		w.jobs <- sj
	case machine.ActUnload:
		if e, ok := w.keys[a.Key]; ok {
			delete(w.keys, a.Key)
			w.unmeter(e)
		}
	case machine.ActLive:
		w.live(w.part.pipe, a.Delta)
	case machine.ActServe:
		w.serve(a)
	case machine.ActGaveUp:
		w.log.Error("gave up waiting for a message of a key; later messages go on without it",
			zap.String("key", a.Key), zap.Uint64("seq", a.Seq), zap.Duration("waited", a.Waited))
	case machine.ActFinished:
		if a.Pending > 0 && w.part.fence.OK() {
			w.log.Warn("outputs not acknowledged at shutdown; their keys will be replayed from their last snapshot",
				zap.Int("outputs", a.Pending))
		}
	case machine.ActFatal:
		w.log.Error("fatal", zap.String("pipeline", w.part.pipe.cfg.Name), zap.Error(a.Err))
		if m := &a.Msg; m.js != nil {
			w.part.track.Nak(m.seq)
			_ = m.js.Nak()
		}
		w.fatal = a.Err
	}
}

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
// and evicts nothing — and steps the machine with it.
func (w *worker) deliver(m *inMsg) {
	m.pipe.stats.In.Add(1)
	var f *machine.Fail
	if !w.part.fence.OK() {
		// The partition is stopping: its new owner applies m.
		w.fenceLost()
		f = dispOf(errFenced)
	} else if enc, err := w.decodeSafe(m); err != nil {
		f = dispOf(err)
	} else {
		w.enc = enc
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

// loadKey loads key (its snapshot, or a fresh learner) and answers the
// machine.
func (w *worker) loadKey(ctx context.Context, key string, o machine.LoadOpts) {
	e, err := w.load(ctx, w.part.pipe, key, o.Create, o.ReplaceCorrupt)
	if err != nil {
		w.step(machine.Loaded{Key: key, Fail: dispOf(err)})
		return
	}
	w.keys[key] = e
	w.step(machine.Loaded{Key: key, LastSeq: e.lastSeq})
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
	pl, e := m.pipe, w.keys[m.key]
	start := time.Now()
	err = apply(&w.res, e.l, e.cls, e.mon, w.obs, m.key, m.seq, w.eig)
	took := time.Since(start)
	pl.met.learnSeconds.Observe(took.Seconds())
	if err != nil && !errors.Is(err, learners.ErrNumerical) {
		return // checked before learning: the learner is untouched
	}
	// A numerical failure may follow learned observations of a batch: the
	// message counts as applied, and is dead-lettered.
	ev.Changed = true
	sum := e.l.Summary(w.eig)
	pl.met.storedPoints.Add(float64(sum.Stored - e.stored))
	e.stored = sum.Stored
	w.setAdvice(e, sum.BudgetAdvice)
	if w.p.onApply != nil {
		w.p.onApply(pl.cfg.Name, w.part.num, w.part.epoch, m.key, m.seq)
	}
	if err != nil {
		return
	}
	if n := len(w.res.outs); n > 0 {
		if ev.Outs, err = w.outputs(e, w.enc, m.tm); err != nil {
			return
		}
		w.setExplained(e, w.res.outs[n-1].Explained)
		for i := range w.res.outs {
			pl.met.t2.Observe(w.res.outs[i].T2)
		}
		w.watchOut(e, start, took)
	} else if w.res.warming > 0 {
		pl.stats.Warming.Add(1)
		ev.Result = resultWarming
	}
}

// publish publishes key's next output: with JetStream when a stream
// captures the output subject (asynchronously: the acker reports the
// PubAck), else with core NATS (done when written to the connection).
func (w *worker) publish(key string, ord uint64, m *nats.Msg) {
	e := w.keys[key]
	if !e.pipe.outJS {
		err := w.p.conn.PublishMsg(m)
		if err == nil {
			w.sent(e, 1)
		}
		w.step(machine.Published{Key: key, Err: err, Refused: err != nil && !transientJS(err)})
		return
	}
	if !w.part.fence.OK() {
		// Nothing more is published: the partition stops and its new
		// owner replays what is not acknowledged.
		w.fenceLost()
		w.step(machine.Published{Key: key, Err: errFenced, Refused: true})
		return
	}
	if w.lane != nil {
		// Answered now when the lane refuses it: before anything else
		// reaches the lane (lane.go).
		w.lane.publish(key, ord, m, time.Now())
		w.laneResults()
		return
	}
	f, err := w.p.pubJS.PublishMsgAsync(m)
	if err != nil {
		w.step(machine.Published{Key: key, Err: err, Refused: !transientJS(err)})
		return
	}
	w.pubq <- pubWait{key: key, f: f} // at most Window in flight: never blocks
}

// laneResults steps the machine with the lane's answers, in order, one at
// a time (a step may publish, and the lane answers a refused send after
// the answers before it).
func (w *worker) laneResults() {
	for {
		r, ok := w.lane.pop()
		if !ok {
			return
		}
		if r.err == nil {
			if e, ok := w.keys[r.key]; ok {
				w.sent(e, 1)
			}
		}
		w.step(machine.Published{Key: r.key, Ord: r.ord, Err: r.err, Refused: r.refused})
	}
}

// laneTick lets the lane end a batch that waited too long.
func (w *worker) laneTick() {
	if w.lane != nil {
		w.lane.tick(time.Now())
		w.laneResults()
	}
}

// acked handles the end of a JetStream publish in flight.
func (w *worker) acked(d pubDone) {
	if d.err == nil {
		if e, ok := w.keys[d.key]; ok {
			w.sent(e, 1)
		}
	}
	w.step(machine.Published{Key: d.key, Err: d.err, Refused: d.err != nil && !transientJS(d.err)})
}

// ack acknowledges a handled message.
func (w *worker) ack(m *inMsg, result string) {
	if m.js != nil {
		if err := m.js.Ack(); err != nil {
			w.log.Warn("ack", zap.String("pipeline", m.pipe.cfg.Name), zap.Uint64("seq", m.seq), zap.Error(err))
		}
		w.part.track.Release(m.seq)
	}
	if result == resultSkipped {
		m.pipe.stats.Skipped.Add(1)
	}
	m.pipe.met.result(w.p.met, m.pipe.cfg.Name, result).Inc()
}

// nak refuses m for now: it is redelivered after input.nak_delay.
func (w *worker) nak(m *inMsg, err error) {
	_, reason := classify(err)
	name := m.pipe.cfg.Name
	level := w.log.Warn
	switch reason {
	case "corrupt_snapshot":
		level = w.log.Error
	case "waiting", "fenced":
		// Fenced: the partition logs its fence loss once; each message it
		// naks meanwhile goes to the new owner.
		level = w.log.Debug
	}
	level("message refused, will be redelivered", zap.String("pipeline", name), zap.String("key", m.key),
		zap.Uint64("seq", m.seq), zap.String("reason", reason), zap.Error(err))
	m.pipe.stats.Naks.Add(1)
	w.p.met.messages.WithLabelValues(name, resultNak).Inc()
	if m.js != nil {
		w.part.track.Nak(m.seq)
		if nerr := m.js.NakWithDelay(m.pipe.cfg.Input.NakDelay); nerr != nil {
			w.log.Warn("nak", zap.Error(nerr))
		}
	}
}

// snapshot copies e's state for job.
func (w *worker) snapshot(e *entry, job machine.Job) *snapJob {
	return &snapJob{
		e:    e,
		snap: &codec.Snapshot{Key: e.key, Pipeline: e.pipe.cfg.Name, LastSeq: job.LastSeq, Epoch: w.part.epoch, State: e.l.State(), Classifier: e.cls.state(), Monitor: e.mon.state()},
		rev:  e.rev,
		job:  job,
	}
}

// landed reports a snapshot result to the machine.
func (w *worker) landed(r snapResult) {
	j := r.job
	e := j.e
	name := e.pipe.cfg.Name
	w.p.met.snapSeconds.WithLabelValues(name).Observe(r.dur.Seconds())
	o := machine.Saved
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
		w.part.fence.Revoke()
		w.fenced = true
		o = machine.Fenced
	case errors.Is(r.err, snapshot.ErrConflict):
		// Someone else committed a newer snapshot of this key: we no longer
		// own it. Forget the learner; the next message reloads the newer
		// snapshot and skips what it already holds.
		w.p.met.snapFailures.WithLabelValues(name, "conflict").Inc()
		w.log.Error("snapshot conflict: another worker owns the key; unloading it", zap.String("key", e.key),
			zap.Uint64("rev", j.rev), zap.Error(r.err))
		o = machine.Conflict
	default:
		w.p.met.snapFailures.WithLabelValues(name, "error").Inc()
		w.log.Warn("snapshot failed; will retry", zap.String("key", e.key), zap.Error(r.err))
		o = machine.Failed
	}
	w.step(machine.SaveLanded{Key: e.key, Job: j.job, Outcome: o})
}

// control starts a control request: "keys" and "snapshot" of every key
// are answered at once; the others need their key loaded (never created;
// a reset does not need to decode the key's snapshot: it may be corrupt,
// and the reset is the fix), which the machine answers with Serve.
func (w *worker) control(c *control) {
	var r controlReply
	switch {
	case c.op == "keys":
		r.data, r.err = w.listKeys(c.pipe, c.key)
	case c.op == "snapshot" && c.key == "":
		for _, k := range w.m.Keys() {
			if k.Dirty {
				w.step(machine.SaveNow{Key: k.Key})
				r.n++
			}
		}
	default:
		w.step(machine.Request{Key: c.key, ReplaceCorrupt: c.op == "reset", Ref: c})
		return
	}
	c.reply <- r
}

// serve answers a control request on its loaded key.
func (w *worker) serve(a *coreAction) {
	c := a.Ref.(*control)
	var r controlReply
	defer func() { c.reply <- r }()
	if a.Err != nil {
		r.err = a.Err
		return
	}
	e := w.keys[a.Key]
	switch c.op {
	case "model":
		m, err := e.l.Model()
		if err == nil {
			err = e.cls.export(m)
		}
		if err == nil && e.mon != nil {
			e.mon.m.Export(m)
		}
		if err == nil {
			r.data, err = codec.EncodeModel(m)
		}
		r.err = err
	case "snapshot":
		if k, _ := w.m.Key(a.Key); k.Dirty {
			w.step(machine.SaveNow{Key: a.Key})
			r.n = 1
		}
	case "reset":
		l, err := w.p.newLearner(c.pipe.cfg.Learner)
		if err != nil {
			r.err = err
			return
		}
		cls, err := newKeyClassifier(c.pipe.cls, l, nil)
		if err != nil {
			r.err = err
			return
		}
		mon, err := newKeyMonitor(c.pipe, nil)
		if err != nil {
			r.err = err
			return
		}
		e.l, e.cls, e.mon = l, cls, mon
		// Outputs already queued (of messages applied before the reset)
		// still go out; the reset's snapshot waits for them.
		w.step(machine.Reset{Key: a.Key})
		w.log.Info("key reset", zap.String("key", c.key))
	case "accept":
		if e.mon == nil {
			r.err = fmt.Errorf("processor: %w: pipeline %s has no monitor: section, nothing to accept", ErrBadRequest, c.pipe.cfg.Name)
			return
		}
		e.mon.m.Accept()
		// The monitor's state changed outside a message: saved soon.
		w.step(machine.Reset{Key: a.Key})
		w.log.Info("key's regime accepted: its control limits start a new warm-up", zap.String("key", c.key))
	}
}

// finish stops the snapshotter once the machine finished and applies the
// results of the saves still in flight.
func (w *worker) finish(ctx context.Context) error {
	close(w.jobs)
	for r := range w.results {
		w.landed(r)
		w.drain(ctx)
	}
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

// acker waits for the acknowledgement of each JetStream publish in flight,
// in publish order, and reports it to the worker, until the worker stops
// (what is still in flight then no longer matters: its inputs are not
// acknowledged, and the partition's next owner replays them). The
// JetStream context times an attempt out (publishAttempt); the timer here
// only guards against a future that is never resolved.
func (w *worker) acker(ctx context.Context) error {
	guard := 2*w.p.publishAttempt() + time.Second
	t := time.NewTimer(guard) // one per acker, reset per publish (Go ≥ 1.23 timers need no draining)
	t.Stop()
	for {
		var pw pubWait
		select {
		case pw = <-w.pubq:
		case <-w.stopped:
			return nil
		}
		d := pubDone{key: pw.key}
		t.Reset(guard)
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

// blockExpiry is how long a key waits for an unapplied message.
func blockExpiry(pc PipelineConfig) time.Duration {
	return max(3*pc.Input.AckWait, time.Minute)
}

// reject dead-letters m with the reason of err and terminates it. The
// dead letter is published with JetStream when a stream stores the
// dead-letter subject (retried like an output, deduplicated by the input
// sequence), else with core NATS; a failure to publish it is logged and
// the input is terminated all the same.
func (w *worker) reject(ctx context.Context, m *inMsg, err error) {
	_, reason := classify(err)
	pc := m.pipe.cfg
	if !w.part.fence.OK() {
		// Dead letters are fenced like outputs: a partition that may no
		// longer own the message leaves it to the new owner.
		if m.js != nil {
			w.part.track.Nak(m.seq)
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
	if m.js != nil {
		if terr := m.js.TermWithReason(reason); terr != nil {
			w.log.Warn("term", zap.Error(terr))
		}
		w.part.track.Release(m.seq)
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
	snap, rev, err := w.p.keys.Load(lctx, snapshot.JoinKey(pc.Name, key))
	if err == nil && (snap.Pipeline != pc.Name || snap.Key != key) {
		err = fmt.Errorf("%w: the snapshot stored for pipeline %q key %q holds pipeline %q key %q (copied from another key?)",
			snapshot.ErrCorrupt, pc.Name, key, snap.Pipeline, snap.Key)
	}
	if err == nil && fenced && snap.Epoch > w.part.epoch && !w.part.stillOwned(lctx) {
		w.part.fence.Revoke()
		return nil, false, fmt.Errorf("%w: key %q of pipeline %s has a snapshot written by epoch %d, this owner has epoch %d",
			errFenced, key, pc.Name, snap.Epoch, w.part.epoch)
	}
	e := &entry{pipe: pl, key: key, rev: rev}
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
	if !w.part.fence.OK() {
		return errFenced
	}
	cctx, cancel := context.WithTimeout(ctx, w.p.cfg.SnapshotTimeout)
	defer cancel()
	snap := &codec.Snapshot{Key: e.key, Pipeline: e.pipe.cfg.Name, LastSeq: e.lastSeq, Epoch: w.part.epoch, State: e.l.State(), Classifier: e.cls.state(), Monitor: e.mon.state()}
	rev, err := w.p.keys.Save(cctx, snapshot.JoinKey(e.pipe.cfg.Name, e.key), snap, e.rev)
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

// release takes the keys this worker still holds out of the live counts
// (stats and kpcastream_active_learners) and the per-key metrics when it
// stops: its partition stopped, or moved to another member, and its keys
// load again wherever the partition runs next. Without it a partition
// that came back to this process counted its keys twice, and a member
// kept reporting the dictionaries of keys it no longer runs.
func (w *worker) release() {
	for _, k := range w.m.Keys() {
		if !k.Unloading {
			w.live(w.part.pipe, -1)
		}
	}
	for _, e := range w.keys {
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
		if !w.part.fence.OK() {
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
		if !w.part.fence.OK() {
			w.results <- snapResult{job: j, err: errFenced}
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, w.p.cfg.SnapshotTimeout)
		start := time.Now()
		key := snapshot.JoinKey(j.snap.Pipeline, j.snap.Key)
		rev, err := w.p.keys.Save(sctx, key, j.snap, j.rev)
		if errors.Is(err, snapshot.ErrConflict) {
			// An ambiguous commit (a retried write whose first attempt
			// landed) looks like a conflict: adopt the stored revision if it
			// holds exactly what we saved.
			if got, grev, lerr := w.p.keys.Load(sctx, key); lerr == nil && got.LastSeq == j.snap.LastSeq &&
				got.State != nil && got.State.Seen == j.snap.State.Seen && reflect.DeepEqual(got.State, j.snap.State) {
				rev, err = grev, nil
			}
		}
		cancel()
		w.results <- snapResult{job: j, rev: rev, err: err, dur: time.Since(start)}
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
