package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kpcastream/kpcastream/internal/jsack"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// partition is one partition of a pipeline run by this instance: its
// input (a JetStream consumer named after the epoch, or a core NATS
// subscription), its workers (each key of the partition belongs to one),
// its replay tracker and its fence.
type partition struct {
	p      *Processor
	pipe   *pipeline
	num    int
	epoch  uint64    // 0 for a core NATS input
	filter string    // input subject filter of this partition
	start  uint64    // stream sequence the consumer starts at (the checkpoint when taken)
	taken  time.Time // when the take that granted this epoch was sent (the lease runs from it)

	track   *machine.Tracker // nil for a core NATS input
	fence   *fence           // nil for a core NATS input
	workers []*worker

	inMu     sync.RWMutex // guards sends to worker inputs against closeWorkers
	inClosed bool
	closing  chan struct{} // closed by closeWorkers: workers take their queued input even with a full output window

	cc       jetstream.ConsumeContext
	consumer jetstream.Consumer // this epoch's; set before cc
	sub      *nats.Subscription
	// subscribed is closed by runCore once its subscription exists (Run
	// reports ready only then: a message published earlier is lost).
	subscribed chan struct{}

	rev          uint64 // revision of the ownership record; owned by the renewing goroutine
	renewFailing bool   // the last renewal failed (its warning logged); owned by the renewing goroutine
	pending      atomic.Uint64
	checkpoint   atomic.Uint64 // last checkpoint written to the record

	stopOnce sync.Once
	stop     chan struct{} // closed: stop gracefully and release
	done     chan struct{} // closed when run returns
	log      *zap.Logger
}

func (p *Processor) newPartition(pl *pipeline, num int, epoch, rev, start uint64, grantedAt time.Time) *partition {
	pc := pl.cfg
	pt := &partition{p: p, pipe: pl, num: num, epoch: epoch, rev: rev, start: max(start, 1), taken: grantedAt, filter: pc.Input.Subject,
		stop: make(chan struct{}), done: make(chan struct{}), closing: make(chan struct{}), subscribed: make(chan struct{})}
	if pc.Partitions > 1 {
		pt.filter = pc.Input.Subject + "." + strconv.Itoa(num)
	}
	pt.log = p.log.With(zap.String("pipeline", pc.Name), zap.Int("partition", num))
	if pc.Input.Stream != "" {
		pt.track = machine.NewTracker()
		pt.fence = newFence(p.cfg.LeaseTTL, grantedAt)
		pt.log = pt.log.With(zap.Uint64("epoch", epoch))
		pt.checkpoint.Store(pt.start)
	}
	n := p.workersPerPartition(pc)
	for i := range n {
		pt.workers = append(pt.workers, newWorker(pt.workerDeps(n, p.quota(pc, n)), i))
	}
	return pt
}

// workersPerPartition is the number of worker goroutines of each partition
// of pc: Workers spread over the partitions, at least one.
func (p *Processor) workersPerPartition(pc PipelineConfig) int {
	return max(1, (p.cfg.Workers+pc.Partitions-1)/pc.Partitions)
}

// quota is the number of learners one of n workers of a partition of pc
// may hold: max_keys spread over the partitions and their workers.
func (p *Processor) quota(pc PipelineConfig, n int) int {
	perPart := (pc.MaxKeys + pc.Partitions - 1) / pc.Partitions
	return max(1, perPart/n)
}

// consumerName is the JetStream consumer of partition num at epoch.
func consumerName(pc PipelineConfig, num int, epoch uint64) string {
	return fmt.Sprintf("%s-p%d-e%d", pc.Input.Durable, num, epoch)
}

// requestStop asks the partition to stop gracefully and release its
// record; it reports whether this call asked first.
func (pt *partition) requestStop() (first bool) {
	pt.stopOnce.Do(func() { close(pt.stop); first = true })
	return first
}

// owner returns the index of the worker of key. Keys of one partition
// share FNV-1a(key) mod Partitions, so the worker is picked from the rest
// of the hash: (FNV-1a(key) / Partitions) mod workers.
func (pt *partition) owner(key string) int {
	h := ownership.FNV32a(key) / uint32(pt.pipe.cfg.Partitions)
	return int(h % uint32(len(pt.workers)))
}

// dispatch hands a message to the worker owning its key. It blocks while
// that worker's queue is full (back-pressure of this partition only). The
// message travels by value in the channel: nothing is allocated here.
func (pt *partition) dispatch(ctx context.Context, m inMsg) {
	m.pipe = pt.pipe
	m.key = keyOf(m.subject, *pt.pipe.cfg.KeyToken)
	if !pt.enqueue(ctx, pt.workers[pt.owner(m.key)], item{msg: m}) && m.js != nil {
		// The workers are gone: leave the message for redelivery.
		_ = m.js.Nak()
	}
}

// enqueue hands it to w, blocking while w's queue is full; it reports false
// when the workers are gone.
func (pt *partition) enqueue(ctx context.Context, w *worker, it item) bool {
	pt.inMu.RLock()
	defer pt.inMu.RUnlock()
	if pt.inClosed {
		return false
	}
	select {
	case w.in <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeWorkers closes the worker inputs: each worker then finishes its
// queue, writes its final snapshots (unless fenced) and returns.
func (pt *partition) closeWorkers() {
	pt.inMu.Lock()
	defer pt.inMu.Unlock()
	if pt.inClosed {
		return
	}
	pt.inClosed = true
	close(pt.closing)
	for _, w := range pt.workers {
		close(w.in)
	}
}

// startWorkers starts the workers and their snapshotters in g.
func (pt *partition) startWorkers(g *errgroup.Group, ctx context.Context) {
	for _, w := range pt.workers {
		g.Go(func() error { return w.snapshotter(ctx) })
		g.Go(func() error { return w.acker(ctx) })
		g.Go(func() error { return w.run(ctx) })
	}
}

// waitWorkers closes the workers' inputs and waits for them. After
// 2·shutdown_timeout + snapshot_timeout it cancels their context (cancel)
// — they then finish at once, without waiting for outputs or saves any
// longer — and reports that they did not stop in time; it returns only
// when they have returned, so that nothing of the partition outlives it.
func (pt *partition) waitWorkers(g *errgroup.Group, cancel context.CancelCauseFunc) error {
	pt.closeWorkers()
	late := errors.New("workers did not stop in time")
	t := time.AfterFunc(2*pt.p.cfg.ShutdownTimeout+pt.p.cfg.SnapshotTimeout, func() { cancel(late) })
	err := g.Wait()
	if !t.Stop() {
		return errors.Join(fmt.Errorf("processor: pipeline %s partition %d: %w", pt.pipe.cfg.Name, pt.num, late), err)
	}
	return err
}

// startGroup returns the group of the workers and its context: ctx's
// values without its cancellation (the workers finish their queue when
// ctx ends), cancelled when a worker fails or by the returned cancel.
func startGroup(ctx context.Context) (*errgroup.Group, context.Context, context.CancelCauseFunc) {
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	g, gctx := errgroup.WithContext(wctx)
	return g, gctx, cancel
}

// runCore runs a core NATS partition until ctx ends.
func (pt *partition) runCore(ctx context.Context) error {
	defer close(pt.done)
	pc := pt.pipe.cfg
	g, gctx, cancel := startGroup(ctx)
	defer cancel(nil)
	pt.startWorkers(g, gctx)
	h := func(m *nats.Msg) {
		seq := pt.pipe.coreSeq.Add(1)
		pt.dispatch(gctx, inMsg{subject: m.Subject, data: m.Data, header: m.Header, seq: seq, tm: time.Now().UnixNano()})
	}
	var err error
	if pc.Input.QueueGroup != "" {
		pt.sub, err = pt.p.conn.QueueSubscribe(pc.Input.Subject, pc.Input.QueueGroup, h)
	} else {
		pt.sub, err = pt.p.conn.Subscribe(pc.Input.Subject, h)
	}
	if err != nil {
		_ = pt.waitWorkers(g, cancel)
		return fmt.Errorf("processor: pipeline %s: subscribe: %w", pc.Name, err)
	}
	close(pt.subscribed)
	select {
	case <-ctx.Done():
	case <-pt.stop:
	case <-gctx.Done():
	}
	deadline := time.After(pt.p.cfg.ShutdownTimeout)
	if err := pt.sub.Drain(); err != nil {
		pt.log.Warn("drain subscription", zap.Error(err))
	}
	for pt.sub.IsValid() {
		select {
		case <-deadline:
			_ = pt.sub.Unsubscribe()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return pt.waitWorkers(g, cancel)
}

// run runs a JetStream partition taken with the record at pt.rev: it
// removes the consumers of earlier epochs, creates its own at the
// checkpoint, consumes, and renews the record (with the checkpoint) every
// renewEvery until ctx ends or a graceful stop is requested — then it
// drains, lets the workers write their final snapshots and releases the
// record with the final checkpoint — or until the fence is revoked (the
// record moved, a newer epoch wrote a snapshot, or renewals failed for
// lease_ttl/2) — then it stops at once and writes nothing more.
func (pt *partition) run(ctx context.Context) (err error) {
	defer close(pt.done)
	pc := pt.pipe.cfg
	p := pt.p
	rctx, cancelRenew := context.WithCancel(context.WithoutCancel(ctx))
	var renewing errgroup.Group // joined by stopRenew on every path below
	renewing.Go(func() error { pt.renewLoop(rctx); return nil })
	stopRenew := func() { cancelRenew(); _ = renewing.Wait() }

	g, gctx, cancel := startGroup(ctx)
	defer cancel(nil)
	pt.startWorkers(g, gctx)
	if err := pt.consume(ctx, gctx); err != nil {
		// Give up this epoch: release the record (nothing was consumed, so
		// its checkpoint stands), so that the member it is assigned to —
		// this one again, unless it is stopping — takes it at once, and a
		// stop that cancelled the consume leaves nothing owned.
		stopRenew()
		_ = pt.waitWorkers(g, cancel)
		if pt.fence.OK() {
			pt.release()
		} else {
			pt.deleteConsumer()
		}
		pt.fence.Revoke()
		return err
	}
	if p.conn != nil {
		renewing.Go(func() error { pt.repullAfterReconnect(rctx); return nil })
	}
	p.met.partitionsOwned.WithLabelValues(pc.Name).Inc()
	defer p.met.partitionsOwned.WithLabelValues(pc.Name).Dec()
	pt.log.Info("partition started", zap.String("consumer", consumerName(pc, pt.num, pt.epoch)),
		zap.String("filter", pt.filter), zap.Uint64("from_seq", pt.start))
	graceful := true
	select {
	case <-ctx.Done():
	case <-pt.stop:
	case <-gctx.Done():
		err = context.Cause(gctx)
	case <-pt.fence.Lost():
		graceful = false
	}
	if !graceful || !pt.fence.OK() {
		p.met.fenced.WithLabelValues(pc.Name).Inc()
		pt.fence.Revoke()
		pt.cc.Stop()
		stopRenew()
		// Nothing a fenced worker still does matters (its saves would
		// conflict or be redone by the next owner): cancel its context so
		// that a save or load hanging on a store without a leader does not
		// keep the partition — and this member's next take of it — waiting
		// for snapshot_timeout.
		cancel(errFenced)
		werr := pt.waitWorkers(g, cancel)
		pt.deleteConsumer()
		pt.log.Warn("partition fenced: stopped without further writes; its new owner replays from the checkpoint")
		return errors.Join(err, werr)
	}
	// Graceful: stop pulling, finish what was delivered, final snapshots.
	pt.cc.Drain()
	select {
	case <-pt.cc.Closed():
	case <-time.After(p.cfg.ShutdownTimeout):
		pt.log.Warn("consumer drain timed out")
		pt.cc.Stop()
	}
	werr := pt.waitWorkers(g, cancel)
	stopRenew()
	if werr == nil && pt.fence.OK() {
		pt.release()
	}
	return errors.Join(err, werr)
}

// consume removes the consumers of earlier epochs of the partition and
// starts consuming from pt.start with a consumer of its own.
func (pt *partition) consume(ctx, gctx context.Context) error {
	pc := pt.pipe.cfg
	p := pt.p
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stream jetstream.Stream
	if err := p.retry(sctx, "look up input stream", func(ctx context.Context) (err error) {
		stream, err = p.js.Stream(ctx, pc.Input.Stream)
		return err
	}); err != nil {
		return fmt.Errorf("processor: pipeline %s: stream: %w", pc.Name, err)
	}
	// Predecessors: the same partition's consumers of earlier epochs, and
	// the single durable consumer of versions before partitions. Their
	// pulls and acks die with them. Never a newer epoch's: an owner that
	// resumes after a pause between its take and this point would
	// otherwise delete its successor's consumer; and only while the fence
	// holds.
	mine := consumerName(pc, pt.num, pt.epoch)
	prefix := fmt.Sprintf("%s-p%d-e", pc.Input.Durable, pt.num)
	if err := p.retry(sctx, "delete old consumers", func(ctx context.Context) error {
		if !pt.fence.OK() {
			return errFenced
		}
		ctx, cancel := context.WithTimeout(ctx, pt.callTimeout())
		defer cancel()
		names := stream.ConsumerNames(ctx)
		var old []string
		for n := range names.Name() {
			e, err := strconv.ParseUint(strings.TrimPrefix(n, prefix), 10, 64)
			if n == pc.Input.Durable || (strings.HasPrefix(n, prefix) && err == nil && e < pt.epoch) {
				old = append(old, n)
			}
		}
		if err := names.Err(); err != nil {
			return err
		}
		for _, n := range old {
			if err := stream.DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return err
			}
			pt.log.Info("deleted the consumer of an earlier owner", zap.String("consumer", n))
		}
		return nil
	}); err != nil {
		return fmt.Errorf("processor: pipeline %s partition %d: delete earlier consumers: %w", pc.Name, pt.num, err)
	}
	if !pt.fence.OK() {
		return errFenced
	}
	var cons jetstream.Consumer
	err := p.retry(sctx, "create consumer", func(ctx context.Context) (err error) {
		ctx, cancel := context.WithTimeout(ctx, pt.callTimeout())
		defer cancel()
		cons, err = stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:           mine,
			FilterSubject:     pt.filter,
			AckPolicy:         jetstream.AckExplicitPolicy,
			AckWait:           pc.Input.AckWait,
			MaxAckPending:     pc.Input.MaxAckPending,
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       pt.start,
			InactiveThreshold: max(time.Hour, 10*p.cfg.LeaseTTL),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("processor: pipeline %s partition %d: consumer: %w", pc.Name, pt.num, err)
	}
	intake := machine.NewIntake() // the callback is serial
	gapped := false
	pl := pt.pipe
	hb, expiry := pullTiming(p.cfg.LeaseTTL)
	health := &pullHealth{window: p.cfg.LeaseTTL, gap: 3 * hb}
	pt.consumer = cons
	pt.cc, err = cons.Consume(func(m jetstream.Msg) {
		health.delivered()
		d, ok := jsack.Parse(m.Reply())
		if !ok {
			md, err := m.Metadata()
			if err != nil {
				pt.log.Warn("message without metadata", zap.Error(err))
				_ = m.Term()
				return
			}
			d = jsack.Delivery{Stream: md.Sequence.Stream, Consumer: md.Sequence.Consumer, Pending: md.NumPending, Time: md.Timestamp.UnixNano()}
		}
		pt.pending.Store(d.Pending)
		pl.met.pending.Set(float64(pl.pendingSum()))
		if gap, _ := intake.Delivery(d.Consumer); gap || gapped {
			// Deliveries were lost in transit (machine.Intake): hand nothing
			// more over — this message stays unacknowledged — and take the
			// partition again under a new epoch, whose consumer delivers
			// from the checkpoint, in order, at once (the server would
			// redeliver the lost ones only after ack_wait, possibly after
			// later messages of their keys).
			if !gapped {
				gapped = true
				pt.log.Warn("deliveries lost in transit; taking the partition again under a new epoch to have them now, in order",
					zap.Uint64("consumer_seq", d.Consumer), zap.Uint64("stream_seq", d.Stream))
				pt.requestStop()
			}
			return
		}
		pt.track.Deliver(d.Stream)
		pt.dispatch(gctx, inMsg{subject: m.Subject(), data: m.Data(), header: m.Headers(), seq: d.Stream, js: m, tm: d.Time})
	}, jetstream.PullMaxMessages(max(1, min(pc.Input.MaxAckPending, 2*p.cfg.QueueSize))),
		jetstream.PullHeartbeat(hb), jetstream.PullExpiry(expiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrBadRequest):
				// The consume has ended for good (a newer owner deleted the
				// consumer, say): stop this epoch without further writes;
				// the member the partition is assigned to takes it again.
				pt.log.Warn("consume ended; stopping the partition", zap.Error(err))
				pt.fence.Revoke()
			case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoHeartbeat):
				// nats.go pulls again after 2 missed heartbeats
				// (lease_ttl/2); a consumer unreachable for lease_ttl
				// is made anew under a new epoch.
				if health.failed(time.Now()) {
					pt.log.Warn("consumer unreachable for lease_ttl; stopping the partition to take it again with a new consumer", zap.Error(err))
					pt.fence.Revoke()
					return
				}
				pt.log.Info("consume", zap.Error(err))
			default:
				pt.log.Warn("consume", zap.Error(err))
			}
		}))
	if err != nil {
		return fmt.Errorf("processor: pipeline %s partition %d: consume: %w", pc.Name, pt.num, err)
	}
	return nil
}

// callTimeout bounds one attempt of a JetStream call that starts a
// partition (look up, delete, create consumers): lease_ttl/4, at least a
// second and at most the 5 s of other calls, so that a request lost with
// a server costs the partition that much before it is sent again, not 5 s.
func (pt *partition) callTimeout() time.Duration {
	return min(max(pt.p.cfg.LeaseTTL/4, time.Second), attemptTimeout)
}

// pullTiming returns the idle heartbeat and the expiry of a partition's
// pull requests, sized to lease_ttl so that a pull lost with a server (a
// "no responders" answer, or heartbeats that stop) is issued again by
// nats.go within lease_ttl/2 (two missed heartbeats) rather than after
// nats.go's 30 s default: heartbeat lease_ttl/4 within nats.go's
// 500 ms–30 s, expiry lease_ttl within [max(1 s, 2·heartbeat), 30 s].
func pullTiming(ttl time.Duration) (heartbeat, expiry time.Duration) {
	heartbeat = min(max(ttl/4, 500*time.Millisecond), 15*time.Second)
	expiry = max(min(ttl, 30*time.Second), 2*heartbeat, time.Second)
	return heartbeat, expiry
}

// pullHealth tells a consume that keeps failing (errors no more than gap
// apart, no delivery in between) for window from one that failed once.
// Safe for concurrent use.
type pullHealth struct {
	window, gap time.Duration
	mu          sync.Mutex
	first, last time.Time // the current streak of failures
}

// delivered ends the streak.
func (h *pullHealth) delivered() {
	h.mu.Lock()
	h.first = time.Time{}
	h.mu.Unlock()
}

// failed records a failure at now and reports whether the streak has
// lasted window.
func (h *pullHealth) failed(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first.IsZero() || now.Sub(h.last) > h.gap {
		h.first = now
	}
	h.last = now
	return now.Sub(h.first) >= h.window
}

// repullAfterReconnect covers what the intake cannot see: deliveries
// lost at the tail of a lost connection (no later delivery reveals the
// gap) and acks lost with it. The server would deliver the one again, and
// count the other settled, only after ack_wait — holding the partition's
// drain that long after a server restart (issue 28). So once the
// connection is back, as soon as the partition is idle (nothing delivered
// for a quarter of a second, its workers' queues empty) while its
// consumer still counts acks pending, the partition stops gracefully and
// its member takes it again at once under a new epoch: the new consumer
// delivers from the checkpoint (replays are skipped by sequence, their
// outputs dropped by Nats-Msg-Id). It waits for idleness so as never to
// cut into work in flight (a lane's batch, say); it gives up once ack_wait
// has passed since the reconnection (the server has redelivered by then).
func (pt *partition) repullAfterReconnect(ctx context.Context) {
	ch := pt.p.conn.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CONNECTED)
	defer pt.p.conn.RemoveStatusListener(ch)
	lost := false
	var back time.Time
	var tick <-chan time.Time
	const idle = 250 * time.Millisecond
	last := pt.track.Max()
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-ch:
			if !ok {
				return
			}
			switch st {
			case nats.RECONNECTING, nats.DISCONNECTED:
				lost, tick = true, nil
			case nats.CONNECTED:
				if lost {
					lost, back = false, time.Now()
					t := time.NewTicker(idle)
					defer t.Stop()
					tick, last = t.C, pt.track.Max()
				}
			}
		case <-tick:
			if time.Since(back) > pt.pipe.cfg.Input.AckWait {
				tick = nil
				continue
			}
			if m := pt.track.Max(); m != last || !pt.workersIdle() {
				last = m
				continue
			}
			ictx, cancel := context.WithTimeout(ctx, pt.callTimeout())
			ci, err := pt.consumer.Info(ictx)
			cancel()
			if err != nil {
				continue
			}
			if ci.NumAckPending == 0 {
				tick = nil
				continue
			}
			if pt.requestStop() {
				pt.log.Info("connection back with acks still pending at the consumer: taking the partition again under a new epoch, "+
					"so that what was lost with the connection comes back now rather than after ack_wait", zap.Int("ack_pending", ci.NumAckPending))
			}
			return
		}
	}
}

// workersIdle reports whether no worker has input queued.
func (pt *partition) workersIdle() bool {
	for _, w := range pt.workers {
		if len(w.in) > 0 {
			return false
		}
	}
	return true
}

// stillOwned reports whether the partition's record still names this
// owner at this epoch. Records never go back in epoch, so when it does, no
// newer owner of this partition ever wrote: a snapshot with a higher
// epoch comes from another partition layout (a pipeline whose partition
// count changed) and may be claimed. When the record cannot be read it
// reports false (the caller fences itself: the safe side).
func (pt *partition) stillOwned(ctx context.Context) bool {
	e, err := pt.p.coord.kv.Get(ctx, recordKey(pt.pipe.cfg, pt.num))
	if err != nil {
		return false
	}
	r, err := ownership.DecodeRecord(e.Value())
	return err == nil && r.Owner == pt.p.id && r.Epoch == pt.epoch
}

// renewEvery is the period of ownership renewals (each also writes the
// checkpoint): lease_ttl/3, or checkpoint_every when shorter.
func (p *Processor) renewEvery() time.Duration {
	return max(min(p.cfg.LeaseTTL/3, p.cfg.CheckpointEvery), 5*time.Millisecond)
}

// renewLoop renews the ownership record until ctx ends or the fence is
// revoked. A renewal that finds the record moved revokes the fence; so
// does failing to renew for lease_ttl/2. The lease runs from when the
// take was sent, so the first renewal is due renewEvery after that, not
// after the take's answer came (a take answered after lease_ttl/2 −
// renewEvery used to expire before its first renewal); a renewal that
// failed is tried again at once rather than at the next period, so that
// one lost answer does not cost the fence (two attempts of lease_ttl/4
// fit in lease_ttl/2).
func (pt *partition) renewLoop(ctx context.Context) {
	every := pt.p.renewEvery()
	wait := max(every-time.Since(pt.taken), 0)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-pt.fence.Lost():
			t.Stop()
			return
		case <-t.C:
		}
		if !pt.fence.OK() {
			pt.log.Error("ownership not renewed within lease_ttl/2; stopping the partition", zap.Duration("lease_ttl", pt.p.cfg.LeaseTTL))
			pt.fence.Revoke()
			return
		}
		wait = every
		if !pt.renew(ctx) {
			wait = renewRetry
		}
	}
}

// renewRetry is the pause before a failed renewal is tried again.
const renewRetry = 20 * time.Millisecond

// renew writes the record {owner, epoch, checkpoint} by compare-and-set on
// pt.rev, and reports whether it did.
func (pt *partition) renew(ctx context.Context) bool {
	p := pt.p
	c := pt.track.Checkpoint()
	if c == 0 {
		c = pt.checkpoint.Load()
	}
	// The fence is checked after the checkpoint is read: a checkpoint read
	// after a revocation (whatever a fenced worker did to the tracker
	// since) is never written.
	if !pt.fence.OK() {
		return false
	}
	rec := ownership.Record{Owner: p.id, Epoch: pt.epoch, Checkpoint: c, Renewed: time.Now().UTC()}
	sent := time.Now()
	// An attempt may take up to lease_ttl/4: the fence counts from when it
	// was sent, so a slow success still extends it, and a second attempt
	// fits before the fence expires.
	attempt := min(max(p.cfg.LeaseTTL/4, 5*time.Millisecond), p.cfg.SnapshotTimeout)
	rctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	rev, err := p.coord.kv.Update(rctx, recordKey(pt.pipe.cfg, pt.num), rec.Encode(), pt.rev)
	if err != nil && isRevisionMismatch(err) {
		// A renewal whose reply was lost may have landed: adopt it if the
		// record still names us at our epoch.
		gctx, gcancel := context.WithTimeout(ctx, attempt)
		defer gcancel()
		e, gerr := p.coord.kv.Get(gctx, recordKey(pt.pipe.cfg, pt.num))
		if gerr == nil {
			if r, derr := ownership.DecodeRecord(e.Value()); derr == nil && r.Owner == p.id && r.Epoch == pt.epoch {
				rev, err = e.Revision(), nil
			} else {
				pt.log.Warn("ownership record moved; stopping the partition without further writes",
					zap.String("now_owner", r.Owner), zap.Uint64("now_epoch", r.Epoch))
				pt.fence.Revoke()
				return false
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil && !pt.renewFailing {
			// Once per streak: a failed renewal is retried every
			// renewRetry until the fence expires.
			pt.log.Warn("renew ownership; retrying", zap.Error(err))
		}
		pt.renewFailing = true
		return false
	}
	pt.rev, pt.renewFailing = rev, false
	pt.fence.Renewed(sent)
	if c != pt.checkpoint.Load() {
		pt.checkpoint.Store(c)
		p.met.checkpoint.WithLabelValues(pt.pipe.cfg.Name).Set(float64(pt.pipe.minCheckpoint()))
	}
	return true
}

// release writes the final checkpoint with no owner, so the member the
// partition is assigned to takes it at once, and deletes this epoch's
// consumer. Called after the workers stopped, with the renewals stopped.
func (pt *partition) release() {
	p := pt.p
	c := pt.track.Checkpoint()
	if c == 0 {
		c = pt.checkpoint.Load()
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	rec := ownership.Record{Owner: "", Epoch: pt.epoch, Checkpoint: c, Renewed: time.Now().UTC()}
	if _, err := p.coord.kv.Update(ctx, recordKey(pt.pipe.cfg, pt.num), rec.Encode(), pt.rev); err != nil {
		pt.log.Warn("release partition (another member takes it over after lease_ttl)", zap.Error(err))
		return
	}
	pt.checkpoint.Store(c)
	pt.log.Info("partition released", zap.Uint64("checkpoint", c))
	pt.deleteConsumer()
}

// deleteConsumer deletes this epoch's consumer, best effort: after a
// release, or after a fenced stop (it is this epoch's own consumer, never
// a newer owner's; a consumer left behind expires after its inactive
// threshold, or is deleted by the partition's next owner).
func (pt *partition) deleteConsumer() {
	ctx, cancel := context.WithTimeout(context.Background(), min(pt.p.cfg.ShutdownTimeout, 2*time.Second))
	defer cancel()
	err := pt.p.js.DeleteConsumer(ctx, pt.pipe.cfg.Input.Stream, consumerName(pt.pipe.cfg, pt.num, pt.epoch))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		pt.log.Debug("delete consumer", zap.Error(err))
	}
}

func isRevisionMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
