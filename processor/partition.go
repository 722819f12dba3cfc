package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	link    *link // the connection's losses, told to the workers' store calls (worker_link.go)

	inMu     sync.RWMutex // guards sends to worker inputs against closeWorkers
	inClosed bool
	closing  chan struct{} // closed by closeWorkers: workers take their queued input even with a full output window

	cc       jetstream.ConsumeContext
	consumer jetstream.Consumer // this epoch's; set before cc
	trouble  chan struct{}      // the consumer went silent (intake.failed): repullAfterReconnect looks for lost acks
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
	pt := &partition{p: p, pipe: pl, num: num, epoch: epoch, rev: rev, start: max(start, 1), taken: grantedAt, filter: pc.Input.Subject, trouble: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), closing: make(chan struct{}), subscribed: make(chan struct{}),
		link: newLink()}
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
		w := newWorker(pt.workerDeps(n, memoryOf(pl.cfg, n, pl.kb)), i)
		w.link = pt.link
		pt.workers = append(pt.workers, w)
	}
	return pt
}

// workersPerPartition is the number of worker goroutines of each partition
// of pc: Workers spread over the partitions, at least one.
func (p *Processor) workersPerPartition(pc PipelineConfig) int {
	return workersPer(p.cfg, pc)
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
	// Core NATS drops what the server receives before it knows the
	// subscription, and the subscription is sent from the connection's
	// buffer: a round trip confirms it before the processor says it is
	// ready (a publisher on another connection that waited for Ready lost
	// a whole warm-up under load: TestBench/core in CI, -race).
	if err := pt.p.conn.FlushTimeout(pt.p.cfg.ShutdownTimeout); err != nil {
		pt.log.Warn("core input subscription not confirmed by the server", zap.Error(err))
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
		pt.release()
		pt.fence.Revoke()
		// A create left unanswered may have been placed (on a lost
		// server): the next epoch would wait for its delete.
		pt.deleteConsumer()
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
	if werr == nil {
		pt.release()
	}
	return errors.Join(err, werr)
}

// renewRetry is the pause before a failed renewal is tried again.
const renewRetry = 20 * time.Millisecond
