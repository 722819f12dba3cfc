package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Deps are the collaborators of a Processor. Conn is required; the others
// have defaults.
type Deps struct {
	// Conn is the NATS connection. The Processor never closes or drains it:
	// the caller does, after Run returns.
	Conn *nats.Conn
	// JS is the JetStream context. Default jetstream.New(Conn).
	JS jetstream.JetStream
	// Snapshots is the snapshot store. Default: snapshot.Open with a zero
	// snapshot.Config, in Run.
	Snapshots *snapshot.Store
	// Logger receives the logs. Default zap.NewNop().
	Logger *zap.Logger
	// Registry registers the metrics. Default: a new prometheus.Registry,
	// served by Handler.
	Registry prometheus.Registerer
	// Gatherer serves /metrics. Default: Registry when it is a Gatherer.
	Gatherer prometheus.Gatherer
	// NewLearner builds a learner. Default learners.New.
	NewLearner func(learners.Config) (learners.Learner, error)
}

// Processor runs pipelines: it consumes observations, feeds one learner per
// partition key, publishes projections and snapshots learner state.
type Processor struct {
	cfg        Config
	conn       *nats.Conn
	js         jetstream.JetStream
	store      *snapshot.Store
	log        *zap.Logger
	met        *metrics
	gatherer   prometheus.Gatherer
	newLearner func(learners.Config) (learners.Learner, error)
	pipes      []*pipeline
	workers    []*worker
	ready      atomic.Bool
	inMu       sync.RWMutex // guards sends to worker inputs against closeWorkers
	inClosed   bool
	started    atomic.Bool
	ckpt       jetstream.KeyValue
	id         string // instance id, the owner of its leases
}

// pipeline is the run-time state of one PipelineConfig.
type pipeline struct {
	cfg    PipelineConfig
	idx    int
	limits codec.Limits
	outEnc codec.Encoding // 0: the input's
	outJS  bool
	track  *tracker // nil for a core NATS input
	lease  *lease   // held consumer lease (JetStream input, while running)
	cc     jetstream.ConsumeContext
	sub    *nats.Subscription
	// coreSeq numbers core NATS messages (not durable across restarts).
	coreSeq atomic.Uint64
	stats   pipelineStats
	met     pipeMetrics // children of the per-message collectors
}

// pipelineStats are the counters reported by the stats endpoint.
type pipelineStats struct {
	In, Out, Warming, Skipped, DeadLettered, Naks, Live atomic.Int64
	Pending, Checkpoint                                 atomic.Uint64
}

// New checks cfg and returns a Processor; nothing is started before Run.
func New(cfg Config, deps Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Conn == nil {
		return nil, errors.New("processor: deps.Conn is required")
	}
	cfg = cfg.WithDefaults()
	p := &Processor{cfg: cfg, conn: deps.Conn, js: deps.JS, store: deps.Snapshots, log: deps.Logger, newLearner: deps.NewLearner, id: newInstanceID()}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	p.log = p.log.Named("processor")
	if p.newLearner == nil {
		p.newLearner = learners.New
	}
	if p.js == nil {
		js, err := jetstream.New(deps.Conn)
		if err != nil {
			return nil, fmt.Errorf("processor: jetstream: %w", err)
		}
		p.js = js
	}
	reg := deps.Registry
	p.gatherer = deps.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, p.gatherer = r, r
	}
	if g, ok := reg.(prometheus.Gatherer); ok && p.gatherer == nil {
		p.gatherer = g
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("processor: metrics: %w", err)
	}
	p.met = met
	for i, pc := range cfg.Pipelines {
		pl := &pipeline{cfg: pc, idx: i, limits: codec.Limits{MaxBatch: pc.MaxBatch, MaxDim: pc.Learner.Dim}, met: met.forPipeline(pc.Name)}
		if pc.Output.Encoding != "" {
			if pl.outEnc, err = codec.ParseEncoding(pc.Output.Encoding); err != nil {
				return nil, err
			}
		}
		if pc.Input.Stream != "" {
			pl.track = newTracker()
		}
		p.pipes = append(p.pipes, pl)
	}
	for i := range cfg.Workers {
		p.workers = append(p.workers, newWorker(p, i))
	}
	return p, nil
}

// Ready reports whether the processor is connected and consuming.
func (p *Processor) Ready() bool { return p.ready.Load() && p.conn.IsConnected() }

// Run sets up the streams and the checkpoint bucket, takes the lease of
// each JetStream pipeline's durable consumer (waiting as a standby while
// another instance holds one, see OnLeaseHeld), starts the consumers and
// the micro service, then processes messages until ctx is cancelled or a
// lease is lost. It then stops consuming (drain), lets the workers finish
// their queued messages, writes final snapshots (unless the policy disables
// them) and the checkpoints, each step bounded by ShutdownTimeout, releases
// the leases and returns nil (also when ctx ends during the standby), or
// the first fatal error. Run may be called once.
func (p *Processor) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("processor: Run called twice")
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := p.setup(setupCtx)
	cancel()
	if err != nil {
		return err
	}
	ls := &leases{stop: make(chan struct{}), lost: make(chan error, len(p.pipes))}
	defer p.releaseLeases(ls)
	if err := p.acquireLeases(ctx, ls); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while standing by
		}
		return err
	}
	// The workers outlive ctx: they stop when their inputs are closed.
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	for _, w := range p.workers {
		g.Go(func() error { return w.snapshotter(gctx) })
		g.Go(func() error { return w.run(gctx) })
	}
	svc, err := p.startService(gctx)
	if err != nil {
		p.closeWorkers()
		_ = g.Wait()
		return err
	}
	var consumeErr error
	for _, pl := range p.pipes {
		if consumeErr = p.startInput(gctx, pl); consumeErr != nil {
			break
		}
	}
	stopCkpt := make(chan struct{})
	var ckptDone sync.WaitGroup
	var leaseErr error
	if consumeErr == nil {
		p.ready.Store(true)
		p.log.Info("running", zap.Int("pipelines", len(p.pipes)), zap.Int("workers", len(p.workers)))
		ckptDone.Add(1)
		g.Go(func() error { defer ckptDone.Done(); p.checkpointLoop(gctx, stopCkpt); return nil })
		select {
		case <-ctx.Done():
		case <-gctx.Done():
		case leaseErr = <-ls.lost:
			p.log.Error("lease lost; stopping", zap.Error(leaseErr))
		}
	}
	// Shutdown.
	p.ready.Store(false)
	p.log.Info("shutting down")
	if svc != nil {
		if err := svc.Stop(); err != nil {
			p.log.Warn("stop micro service", zap.Error(err))
		}
	}
	p.stopInputs()
	close(stopCkpt)
	ckptDone.Wait()
	p.closeWorkers()
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(2*p.cfg.ShutdownTimeout + p.cfg.SnapshotTimeout):
		runErr = errors.New("processor: workers did not stop in time")
	}
	if runErr == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout)
		p.writeCheckpoints(wctx)
		cancel()
	}
	return errors.Join(consumeErr, runErr, leaseErr)
}

// setup opens the snapshot store and the checkpoint bucket, and creates the
// configured streams.
func (p *Processor) setup(ctx context.Context) error {
	if p.store == nil {
		var st *snapshot.Store
		err := p.retry(ctx, "open snapshot store", func(ctx context.Context) (err error) {
			st, err = snapshot.Open(ctx, p.js, snapshot.Config{})
			return err
		})
		if err != nil {
			return fmt.Errorf("processor: open snapshot store: %w", err)
		}
		p.store = st
	}
	for _, pl := range p.pipes {
		pc := pl.cfg
		if pc.Input.Stream != "" && p.ckpt == nil {
			replicas := p.cfg.CheckpointReplicas
			if replicas == 0 {
				replicas = max(1, p.store.Config().Replicas)
			}
			var kv jetstream.KeyValue
			err := p.retry(ctx, "create checkpoint bucket", func(ctx context.Context) (err error) {
				kv, err = p.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: p.cfg.CheckpointBucket,
					Description: "kpcastream replay checkpoints", Replicas: replicas})
				return err
			})
			if err != nil {
				return fmt.Errorf("processor: checkpoint bucket %q (%d replicas): %w", p.cfg.CheckpointBucket, replicas, err)
			}
			p.ckpt = kv
		}
		if pc.Input.Stream != "" && pc.Input.CreateStream {
			sc := jetstream.StreamConfig{Name: pc.Input.Stream, Subjects: []string{pc.Input.Subject},
				Replicas: pc.Input.Replicas, MaxAge: pc.Input.MaxAge, MaxBytes: limitBytes(pc.Input.MaxBytes)}
			if err := p.retry(ctx, "create input stream", func(ctx context.Context) error { return ensureStream(ctx, p.js, sc) }); err != nil {
				return fmt.Errorf("processor: pipeline %s: input stream: %w", pc.Name, err)
			}
		}
		wild := expand(pc.Output.Subject, pc.Name, "*")
		if pc.Output.CreateStream {
			sc := jetstream.StreamConfig{Name: pc.Output.Stream, Subjects: []string{wild}, Duplicates: pc.Output.Duplicates,
				Replicas: pc.Output.Replicas, MaxAge: pc.Output.MaxAge, MaxBytes: limitBytes(pc.Output.MaxBytes)}
			if err := p.retry(ctx, "create output stream", func(ctx context.Context) error { return ensureStream(ctx, p.js, sc) }); err != nil {
				return fmt.Errorf("processor: pipeline %s: output stream: %w", pc.Name, err)
			}
		}
		if validSubject(wild, true) {
			var name string
			err := p.retry(ctx, "find output stream", func(ctx context.Context) (err error) {
				name, err = p.js.StreamNameBySubject(ctx, wild)
				if errors.Is(err, jetstream.ErrStreamNotFound) {
					return nil
				}
				if err != nil {
					return err
				}
				// The lookup matches any stream whose subjects overlap the
				// output pattern; publish through JetStream only when that
				// stream captures every output subject.
				st, err := p.js.Stream(ctx, name)
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(st.CachedInfo().Config.Subjects, func(f string) bool { return subjectCovers(f, wild) }) {
					name = ""
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("processor: pipeline %s: find the stream of output subject %s: %w", pc.Name, wild, err)
			}
			pl.outJS = name != ""
		}
		p.log.Info("pipeline", zap.String("pipeline", pc.Name), zap.String("input", pc.Input.Subject),
			zap.String("stream", pc.Input.Stream), zap.String("output", pc.Output.Subject), zap.Bool("output_jetstream", pl.outJS))
	}
	return nil
}

// limitBytes maps a MaxBytes setting (0: no limit) to JetStream's (-1).
func limitBytes(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// attemptTimeout bounds one attempt of a JetStream call during setup.
const attemptTimeout = 5 * time.Second

// retry calls f with a context bounded by attemptTimeout until it succeeds,
// fails for good, or ctx ends. Timeouts, "no responders" and server-side
// unavailability (no JetStream leader while a node is down, an offline
// stream, peers not yet known) are retried after a logged warning; other
// errors are returned at once.
func (p *Processor) retry(ctx context.Context, what string, f func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		if err == nil || !transientJS(err) || ctx.Err() != nil {
			return err
		}
		p.log.Warn("jetstream call failed; retrying", zap.String("call", what), zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// transientJS reports whether a JetStream call may succeed if retried.
func transientJS(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return true
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable
			10009, // cluster can not handle request (no leader yet)
			10004, // incomplete results
			10023, // insufficient resources (peers not known yet)
			10118, // stream offline
			10119, // consumer offline
			10163, // expected last sequence per subject temporarily unavailable
			10076, // JetStream not enabled (yet: a server still starting)
			10039: // JetStream not enabled for the account (yet)
			return true
		}
	}
	return false
}

// ensureStream creates the stream sc unless a stream of that name exists.
func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	_, err := js.Stream(ctx, sc.Name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = js.CreateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil
	}
	return err
}

// startInput starts consuming the input of pl.
func (p *Processor) startInput(ctx context.Context, pl *pipeline) error {
	pc := pl.cfg
	if pc.Input.Stream == "" {
		h := func(m *nats.Msg) {
			seq := pl.coreSeq.Add(1)
			p.dispatch(ctx, pl, inMsg{subject: m.Subject, data: m.Data, header: m.Header, seq: seq})
		}
		var err error
		if pc.Input.QueueGroup != "" {
			pl.sub, err = p.conn.QueueSubscribe(pc.Input.Subject, pc.Input.QueueGroup, h)
		} else {
			pl.sub, err = p.conn.Subscribe(pc.Input.Subject, h)
		}
		if err != nil {
			return fmt.Errorf("processor: pipeline %s: subscribe: %w", pc.Name, err)
		}
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cons jetstream.Consumer
	err := p.retry(sctx, "create consumer", func(ctx context.Context) (err error) {
		cons, err = p.js.CreateOrUpdateConsumer(ctx, pc.Input.Stream, jetstream.ConsumerConfig{
			Durable:       pc.Input.Durable,
			FilterSubject: pc.Input.Subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       pc.Input.AckWait,
			MaxAckPending: pc.Input.MaxAckPending,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("processor: pipeline %s: consumer: %w", pc.Name, err)
	}
	// Replay from the checkpoint: every message at or after it may be
	// missing from the snapshots; workers skip what a key's snapshot holds.
	var start uint64
	if err := p.retry(sctx, "read checkpoint", func(ctx context.Context) (err error) {
		start, err = p.readCheckpoint(ctx, pc)
		return err
	}); err != nil {
		return err
	}
	if err := p.retry(sctx, "reset consumer", func(ctx context.Context) error {
		_, err := p.js.ResetConsumerToSequence(ctx, pc.Input.Stream, pc.Input.Durable, start)
		return err
	}); err != nil {
		return fmt.Errorf("processor: pipeline %s: reset consumer to %d: %w", pc.Name, start, err)
	}
	var stream jetstream.Stream
	if err := p.retry(sctx, "look up input stream", func(ctx context.Context) (err error) {
		stream, err = p.js.Stream(ctx, pc.Input.Stream)
		return err
	}); err != nil {
		return fmt.Errorf("processor: pipeline %s: stream: %w", pc.Name, err)
	}
	p.log.Info("consuming", zap.String("pipeline", pc.Name), zap.String("stream", pc.Input.Stream),
		zap.String("consumer", pc.Input.Durable), zap.Uint64("from_seq", start))
	var lastCons uint64 // highest consumer (delivery) sequence received; the callback is serial
	pending := p.met.pending.WithLabelValues(pc.Name)
	pl.cc, err = cons.Consume(func(m jetstream.Msg) {
		d, ok := parseDelivery(m.Reply())
		if !ok {
			md, err := m.Metadata()
			if err != nil {
				p.log.Warn("message without metadata", zap.String("pipeline", pc.Name), zap.Error(err))
				_ = m.Term()
				return
			}
			d = delivery{stream: md.Sequence.Stream, consumer: md.Sequence.Consumer, pending: md.NumPending}
		}
		pl.stats.Pending.Store(d.pending)
		pending.Set(float64(d.pending))
		if cs := d.consumer; cs > lastCons {
			if next := pl.track.max() + 1; lastCons != 0 && cs > lastCons+1 && d.stream > next && next > 1 {
				// Deliveries lastCons+1..cs-1 never arrived (lost with a
				// connection); they come back after ack_wait. Their keys
				// must wait for them, and the checkpoint must not pass them.
				p.findMissing(ctx, pl, stream, next, d.stream)
			}
			lastCons = cs
		}
		pl.track.deliver(d.stream)
		p.dispatch(ctx, pl, inMsg{subject: m.Subject(), data: m.Data(), header: m.Headers(), seq: d.stream, js: m})
	}, jetstream.PullMaxMessages(max(1, min(pc.Input.MaxAckPending, 2*p.cfg.QueueSize))),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			p.log.Warn("consume", zap.String("pipeline", pc.Name), zap.Error(err))
		}))
	if err != nil {
		return fmt.Errorf("processor: pipeline %s: consume: %w", pc.Name, err)
	}
	return nil
}

// checkpointKey is the key of a pipeline's checkpoint: one per durable
// consumer, so pipelines of the same name on other consumers (partitions)
// keep their own.
// findMissing registers the messages of pl's filter with stream sequences
// in [from, to): first deliveries lost in transit. Each is held in the
// tracker, and its key's worker makes later messages of the key wait.
func (p *Processor) findMissing(ctx context.Context, pl *pipeline, stream jetstream.Stream, from, to uint64) {
	pc := pl.cfg
	n := 0
	for seq := from; seq < to; {
		gctx, cancel := context.WithTimeout(ctx, p.cfg.SnapshotTimeout)
		m, err := stream.GetMsg(gctx, seq, jetstream.WithGetMsgSubject(pc.Input.Subject))
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			p.log.Error("cannot look up undelivered messages; their keys may skip them", zap.String("pipeline", pc.Name),
				zap.Uint64("from", seq), zap.Uint64("to", to), zap.Error(err))
			return
		}
		if m.Sequence >= to {
			break
		}
		key := keyOf(m.Subject, *pc.KeyToken)
		pl.track.missing(m.Sequence)
		p.enqueue(ctx, p.workers[p.owner(key)], item{miss: &missing{pipe: pl, key: key, seq: m.Sequence}})
		n++
		seq = m.Sequence + 1
	}
	p.log.Warn("deliveries lost in transit; their keys wait for the redeliveries", zap.String("pipeline", pc.Name),
		zap.Uint64("from", from), zap.Uint64("to", to), zap.Int("messages", n))
}

func checkpointKey(pc PipelineConfig) string {
	return "checkpoint." + pc.Input.Stream + "." + pc.Input.Durable
}

// readCheckpoint returns the sequence to replay pc's stream from: its
// checkpoint, else the one written under the pipeline's name by earlier
// versions, else 1.
func (p *Processor) readCheckpoint(ctx context.Context, pc PipelineConfig) (uint64, error) {
	for _, key := range []string{checkpointKey(pc), pc.Name} {
		e, err := p.ckpt.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("processor: pipeline %s: read checkpoint %s: %w", pc.Name, key, err)
		}
		v, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil || v == 0 {
			return 0, fmt.Errorf("processor: pipeline %s: checkpoint %s holds %q, not a stream sequence", pc.Name, key, e.Value())
		}
		return v, nil
	}
	return 1, nil
}

// dispatch hands a message to the worker owning its key. It blocks while
// that worker's queue is full (back-pressure). The message travels by
// value in the channel: nothing is allocated per message here.
func (p *Processor) dispatch(ctx context.Context, pl *pipeline, m inMsg) {
	m.pipe = pl
	m.key = keyOf(m.subject, *pl.cfg.KeyToken)
	if !p.enqueue(ctx, p.workers[p.owner(m.key)], item{msg: m}) && m.js != nil {
		// The workers are gone: leave the message for redelivery.
		_ = m.js.Nak()
	}
}

// enqueue hands it to w, blocking while w's queue is full; it reports false
// when the workers are gone.
func (p *Processor) enqueue(ctx context.Context, w *worker, it item) bool {
	p.inMu.RLock()
	defer p.inMu.RUnlock()
	if p.inClosed {
		return false
	}
	select {
	case w.in <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// owner returns the index of the worker owning key: FNV-1a of the key,
// modulo the number of workers (computed inline: hash.Hash32 and the
// []byte conversion would allocate per message).
func (p *Processor) owner(key string) int {
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= prime32
	}
	return int(h % uint32(len(p.workers)))
}

// keyOf returns the partition key of subject: its token tok ("_" when tok
// is negative, the rest of the subject for a '>' filter token).
func keyOf(subject string, tok int) string {
	if tok < 0 {
		return SingleKey
	}
	for i := 0; i < tok; i++ {
		j := strings.IndexByte(subject, '.')
		if j < 0 {
			return SingleKey
		}
		subject = subject[j+1:]
	}
	if j := strings.IndexByte(subject, '.'); j >= 0 {
		return subject[:j]
	}
	return subject
}

// stopInputs drains every consumer and subscription, bounded by ShutdownTimeout.
func (p *Processor) stopInputs() {
	deadline := time.After(p.cfg.ShutdownTimeout)
	for _, pl := range p.pipes {
		switch {
		case pl.cc != nil:
			pl.cc.Drain()
			select {
			case <-pl.cc.Closed():
			case <-deadline:
				p.log.Warn("consumer drain timed out", zap.String("pipeline", pl.cfg.Name))
				pl.cc.Stop()
			}
		case pl.sub != nil:
			if err := pl.sub.Drain(); err != nil {
				p.log.Warn("drain subscription", zap.String("pipeline", pl.cfg.Name), zap.Error(err))
			}
			for pl.sub.IsValid() {
				select {
				case <-deadline:
					_ = pl.sub.Unsubscribe()
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}
}

// closeWorkers closes the worker inputs: each worker then finishes its
// queue, writes its final snapshots and returns.
func (p *Processor) closeWorkers() {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	p.inClosed = true
	for _, w := range p.workers {
		close(w.in)
	}
}

// checkpointLoop writes the checkpoints every CheckpointEvery until stop.
func (p *Processor) checkpointLoop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(p.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			wctx, cancel := context.WithTimeout(ctx, p.cfg.SnapshotTimeout)
			p.writeCheckpoints(wctx)
			cancel()
		}
	}
}

// writeCheckpoints stores each JetStream pipeline's checkpoint when it moved.
func (p *Processor) writeCheckpoints(ctx context.Context) {
	for _, pl := range p.pipes {
		if pl.track == nil || (pl.lease != nil && pl.lease.lost.Load()) {
			continue // a lost lease: the new owner writes the checkpoints
		}
		c := pl.track.checkpoint()
		if c == 0 || c == pl.stats.Checkpoint.Load() {
			continue
		}
		if _, err := p.ckpt.Put(ctx, checkpointKey(pl.cfg), []byte(strconv.FormatUint(c, 10))); err != nil {
			p.log.Warn("write checkpoint", zap.String("pipeline", pl.cfg.Name), zap.Uint64("seq", c), zap.Error(err))
			continue
		}
		pl.stats.Checkpoint.Store(c)
		p.met.checkpoint.WithLabelValues(pl.cfg.Name).Set(float64(c))
	}
}
