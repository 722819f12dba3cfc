package processor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
)

// The worker, by effect: this file is its loop (events in, the machine's
// Ready out); worker_load.go loads keys, worker_apply.go decodes and
// applies messages, worker_output.go publishes outputs and acks inputs,
// deadletter.go dead-letters, worker_save.go saves snapshots and
// worker_control.go answers control requests.

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
// the snapshots it hands over, one acker goroutine that waits for the
// acknowledgements of its output publishes, and a goroutine for each key
// it is loading from the snapshot store (at most loadSlots; worker_load.go).
type worker struct {
	deps
	id      int
	in      chan item
	jobs    chan *snapJob
	results chan snapResult
	m       *workerCore
	keys    map[string]*entry
	held    map[uint64]*snapJob // snapshot copies held for outputs, by job ID
	obs     []codec.Observation
	enc     codec.Encoding // output encoding of the message in progress
	res     applied
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
	fenced  bool      // the machine knows the fence is lost (FenceLost, or a save landed Fenced)
	fatal   error
	tier    *tier // the local tier below memory (worker_local.go); nil: none
	link    *link // the connection's losses, set by the partition (worker_link.go); nil: none

	loadRes chan loadResult // from the loads in flight (worker_load.go); capacity loadSlots
	loading sync.WaitGroup  // the loads' goroutines
	// decoded names the message whose observations are in obs (a message
	// that waited for its key's load is decoded again when applied).
	decoded struct {
		pipe *pipeline
		key  string
		seq  uint64
	}

	// ws is the working memory the learners of the worker's keys share
	// (learners.Scratch: one key runs at a time), charged once in the
	// memory plan (memory.go); attached when a key becomes resident.
	ws *learners.Scratch
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

func newWorker(d deps, id int) *worker {
	pc := d.pipe.cfg
	limit := workerWindow(pc, d.workers, d.lane)
	t := time.NewTimer(time.Hour)
	t.Stop()
	sp := pc.Snapshot
	keyInFlight := 1
	var ln *lane
	var laneIn chan *nats.Msg
	if d.lane {
		keyInFlight = pc.Output.KeyInFlight
		ln = newLane(d.lanePub, nats.NewInbox(), d.publishAttempt)
		laneIn = make(chan *nats.Msg, 4*limit+64)
	}
	d.log = d.log.With(zap.Int("worker", id))
	quota := d.mem.resident
	tr := openTier(d.localDir, d, id)
	if tr != nil {
		tr.share, tr.kb, tr.capped = d.mem.share, d.pipe.kb, d.mem.capped
		quota = d.mem.known
	}
	return &worker{
		tier:    tr,
		ws:      learners.NewScratch(),
		deps:    d,
		id:      id,
		in:      make(chan item, d.queueSize),
		jobs:    make(chan *snapJob, jobSlots),
		results: make(chan snapResult, jobSlots),
		m: machine.New[inMsg, *nats.Msg](machine.Config{
			Policy:     machine.Policy{EveryMessages: sp.EveryMessages, Every: sp.Every},
			OnShutdown: *sp.OnShutdown, Quota: quota, Slots: jobSlots, Window: limit, KeyInFlight: keyInFlight,
			SlotWait: d.snapshotTimeout, BlockTTL: blockExpiry(pc),
			// A miss holds up none of the other keys: up to loadSlots keys
			// load at once, and the messages that wait for them are at
			// most a queue's worth (the input is held by max_ack_pending
			// anyway), so a worker holds at most twice queue_size messages.
			Loads: loadSlots, Parked: d.queueSize,
		}, d.track),
		loadRes: make(chan loadResult, loadSlots),
		keys:    map[string]*entry{},
		held:    map[uint64]*snapJob{},
		res:     applied{Eig: make([]float64, pc.Learner.Components)},
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
	// The loads in flight end with the worker (after a fatal error; a
	// machine that finished has none).
	defer w.loading.Wait()
	ctx, endLoads := context.WithCancel(ctx)
	defer endLoads()
	defer w.closeTier() // after release
	defer w.release()
	if w.lane != nil {
		sub, err := w.laneSub.ChanSubscribe(w.lane.prefix+".>", w.laneIn)
		if err != nil {
			// The snapshotter ends when jobs closes: left open, it would
			// hold the partition's end, and the Processor's, forever (a
			// stressed TestJoinAfterKill leaked a killed member's
			// partitions this way, its connection closed).
			close(w.jobs)
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
	closing, lost, done := w.closing, w.fence.Lost(), ctx.Done()
	var linkLost <-chan struct{} // the connection's loss, for the lane (lane.lost)
	if w.lane != nil && w.link != nil {
		linkLost = w.link.current().Done()
	}
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
				deadline := time.Now().Add(w.shutdownTimeout)
				if done == nil {
					deadline = time.Now()
				}
				w.step(machine.Close{Deadline: deadline})
			case it.ctl != nil:
				w.control(it.ctl)
			default:
				w.deliver(&it.msg)
			}
		case r := <-w.results:
			w.landed(r)
		case r := <-w.loadRes:
			w.loaded(r)
		case d := <-w.acks:
			w.acked(d)
		case <-linkLost:
			linkLost = w.link.current().Done()
			w.lane.lost(time.Now())
			w.laneResults()
		case a := <-w.laneIn:
			w.lane.onAnswer(a.Subject, a.Header, a.Data, time.Now())
			w.laneResults()
		case <-w.wake.C:
			w.wakeAt = time.Time{}
			w.laneTick()
			w.step(machine.Tick{})
		case <-tick.C:
			w.dlLog.flush(w.log, time.Now())
			w.reportLocal()
			w.laneTick()
			w.step(machine.Tick{})
		}
	}
}

// step steps the machine; a protocol error is a bug of the worker, which
// stops. A revocation of the fence is stepped first (FenceLost), so that
// nothing the machine decides after it — the input closing, an answer of
// an earlier action — is decided as if the fence held (the loop's select
// may pick another ready case before Lost). It reads the channel, not
// the clock.
func (w *worker) step(ev machine.Event) {
	if !w.fenced {
		select {
		case <-w.fence.Lost():
			w.fenceLost()
		default:
		}
	}
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
		w.startLoad(ctx, a.Key, a.Load)
	case machine.ActApply:
		w.apply(&a.Msg)
	case machine.ActPublish:
		w.publish(a.Key, a.Ord, a.Out)
	case machine.ActRetry:
		w.met.publishErrors.WithLabelValues(w.pipe.cfg.Name).Inc()
		if errors.Is(a.Err, errFenced) {
			break
		}
		if n := a.Attempt; (n == 1 || n%20 == 0) && classifyAction(a.Err) == actHold {
			w.log.Error("output publish failed: no stream answers for the output subject (was it deleted?); retrying it until it is there, "+
				"before the key's later outputs", zap.String("key", a.Key), zap.Uint64("seq", a.Seq), zap.Int("attempt", n), zap.Error(a.Err))
		} else if n == 1 || n%20 == 0 {
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
			w.forgetLocal(e)
			w.unmeter(e)
		}
	case machine.ActLive:
		w.live(a.Delta)
		if a.Delta < 0 {
			// Unloaded to make room (or, core NATS, after a conflicting save).
			w.pipe.stats.Evictions.Add(1)
			w.pipe.met.evictions.Inc()
		}
	case machine.ActServe:
		w.serve(a)
	case machine.ActGaveUp:
		w.log.Error("gave up waiting for a message of a key; later messages go on without it",
			zap.String("key", a.Key), zap.Uint64("seq", a.Seq), zap.Duration("waited", a.Waited))
	case machine.ActFinished:
		if a.Pending > 0 && !w.fenced {
			w.log.Warn("outputs not acknowledged at shutdown; their keys will be replayed from their last snapshot",
				zap.Int("outputs", a.Pending))
		}
	case machine.ActFatal:
		w.log.Error("fatal", zap.String("pipeline", w.pipe.cfg.Name), zap.Error(a.Err))
		if m := &a.Msg; m.js != nil {
			_ = m.js.Nak()
		}
		w.fatal = a.Err
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

// live counts d more (or fewer) live keys.
func (w *worker) live(d int) {
	w.pipe.stats.Live.Add(int64(d))
	w.pipe.met.activeLearners.Add(float64(d))
	per := w.pipe.kb
	if w.tier != nil {
		per = localKeyBytes // and kb − localKeyBytes more while in memory (worker_local.go)
	}
	w.memory(int64(d * per))
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
			w.live(-1)
		}
	}
	for _, e := range w.keys {
		w.unmeter(e)
	}
}

// blockExpiry is how long a key waits for an unapplied message.
func blockExpiry(pc PipelineConfig) time.Duration {
	return max(3*pc.Input.AckWait, time.Minute)
}

func (w *worker) tickEvery() time.Duration {
	d := time.Second
	if e := w.pipe.cfg.Snapshot.Every; e > 0 {
		d = min(d, max(e/2, 10*time.Millisecond))
	}
	return d
}
