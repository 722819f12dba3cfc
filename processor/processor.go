package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
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
	cfg  Config
	conn *nats.Conn
	js   jetstream.JetStream
	// pubJS publishes outputs asynchronously (worker.publish, through
	// its publish.Out): a JetStream context of its own, so that its PubAck timeout
	// (publishAttempt) and pending limit are ours whatever Deps.JS was
	// built with. Tests wrap it to inject faults.
	pubJS asyncPublisher
	store *snapshot.Store
	// keys is the workers' port to the snapshot store (store, unless a
	// test wrapped it to inject faults).
	keys     keyStore
	wrapKeys func(keyStore) keyStore
	// wrapLane, when set, wraps each worker's lane publisher (tests:
	// fault injection).
	wrapLane   func(lanePublisher) lanePublisher
	log        *zap.Logger
	met        *metrics
	gatherer   prometheus.Gatherer
	newLearner func(learners.Config) (learners.Learner, error)
	pipes      []*pipeline
	ready      atomic.Bool
	started    atomic.Bool
	coord      *coordinator // nil without JetStream pipelines
	id         string       // member id: random hex, unique per Processor
	watch      ops.Watches  // keys watched by the live page, recorded by the workers' hook (views.go)
	srv        *ops.Server  // the micro service, the HTTP handler and the page's API
	// onApply, when set (tests), is called by a worker after it applied a
	// message to a key's learner.
	onApply func(pipeline string, partition int, epoch uint64, key string, seq uint64)
	// wrapKV, when set (tests), wraps the coordination bucket.
	wrapKV func(jetstream.KeyValue) jetstream.KeyValue
}

// pipeline is the run-time state of one PipelineConfig.
type pipeline struct {
	cfg    PipelineConfig
	idx    int
	limits codec.Limits
	outEnc codec.Encoding // 0: the input's
	cls    *stage         // the classifier stage, nil without one
	spec   *keymodel.Spec // how the models of its keys are built
	kb     int            // memory of one live key (keyBytes, memory.go)
	// io is where the outputs and dead letters of each shard's
	// partitions go (input.shards entries; one for a core NATS input).
	io []shardIO
	// parts are the partitions this instance runs, by number (nil: not
	// here). A core NATS input has one, always here.
	parts []atomic.Pointer[partition]
	// coreSeq numbers core NATS messages (not durable across restarts).
	coreSeq atomic.Uint64
	stats   pipelineStats
	met     pipeMetrics // children of the per-message collectors
}

// shardIO is where the outputs and dead letters of one shard's
// partitions go.
type shardIO struct {
	outJS bool
	// outStream is the stream that captures the outputs ("" without one).
	outStream string
	// lane: outputs go through each worker's ordered lane with
	// output.key_in_flight of a key in flight (lane.go); false: one.
	lane bool
	dlJS bool // some stream captures the dead letters: publish them with JetStream
}

// pendingSum is the consumers' pending count summed over the partitions
// run here.
func (pl *pipeline) pendingSum() uint64 {
	var n uint64
	for i := range pl.parts {
		if pt := pl.parts[i].Load(); pt != nil {
			n += pt.pending.Load()
		}
	}
	return n
}

// minCheckpoint is the lowest checkpoint of the partitions run here (the
// kpcastream_checkpoint_sequence gauge): a restart of all of them replays from it.
func (pl *pipeline) minCheckpoint() uint64 {
	var low uint64
	for i := range pl.parts {
		if pt := pl.parts[i].Load(); pt != nil {
			if c := pt.checkpoint.Load(); c != 0 && (low == 0 || c < low) {
				low = c
			}
		}
	}
	return low
}

// pipelineStats are the counters reported by the stats endpoint.
type pipelineStats struct {
	In, Out, Warming, Skipped, DeadLettered, Naks, Live atomic.Int64
	// Evictions counts the keys unloaded to make room (memory_budget, max_keys).
	Evictions atomic.Int64
	// Memory is the bytes the live keys take (memory_used).
	Memory atomic.Int64
	// KVWrites counts snapshot writes (saves and claims); LocalKeys and
	// LocalBytes are the keys in the local tier and its files' size.
	KVWrites, LocalKeys, LocalBytes atomic.Int64
	// Budget advice of the loaded learners' last message.
	AdviceOK, AdviceTight, AdviceTooSmall atomic.Int64
}

// adviceCount returns the counter of a budget advice.
func (pl *pipeline) adviceCount(advice string) *atomic.Int64 {
	switch advice {
	case learners.AdviceTight:
		return &pl.stats.AdviceTight
	case learners.AdviceTooSmall:
		return &pl.stats.AdviceTooSmall
	}
	return &pl.stats.AdviceOK
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
	p := &Processor{cfg: cfg, conn: deps.Conn, js: deps.JS, store: deps.Snapshots, log: deps.Logger, newLearner: deps.NewLearner, id: newMemberID()}
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
	pending := 0
	for _, pc := range cfg.Pipelines {
		pending += pc.Output.Window * pc.Partitions
	}
	pub, err := jetstream.New(deps.Conn, jetstream.WithPublishAsyncTimeout(p.publishAttempt()),
		jetstream.WithPublishAsyncMaxPending(min(max(pending, 4096), 1<<20)))
	if err != nil {
		return nil, fmt.Errorf("processor: jetstream: %w", err)
	}
	p.pubJS = pub
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
		pm, err := met.forPipeline(pc.Name, pc.Learner.WithDefaults().Budget)
		if err != nil {
			return nil, fmt.Errorf("processor: metrics of pipeline %s: %w", pc.Name, err)
		}
		pl := &pipeline{cfg: pc, idx: i, limits: codec.Limits{MaxBatch: pc.MaxBatch, MaxDim: pc.Learner.Dim}, met: pm}
		if pc.Output.Encoding != "" {
			if pl.outEnc, err = codec.ParseEncoding(pc.Output.Encoding); err != nil {
				return nil, err
			}
		}
		pl.cls = newStage(pc, met)
		pl.spec = pl.modelSpec(p.newLearner)
		pl.kb = pl.keyBytes()
		pm.memoryBudget.Set(float64(pc.MemoryBudget))
		pl.parts = make([]atomic.Pointer[partition], pc.Partitions)
		pl.io = make([]shardIO, max(1, pc.Input.Shards))
		p.pipes = append(p.pipes, pl)
	}
	p.srv = ops.New(ops.Config{Service: cfg.ServiceName, Version: Version, Timeout: cfg.SnapshotTimeout, Conn: p.conn, JS: p.js,
		Gatherer: p.gatherer, Log: p.log}, views{p}, controls{p}, &p.watch)
	return p, nil
}

// newMemberID returns 16 random hex digits: a valid KV key and subject token.
func newMemberID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the instance's member id (its heartbeat key and the owner
// named in the partition records it holds).
func (p *Processor) ID() string { return p.id }

// Ready reports whether the processor is connected and running (as a
// member: it may own no partition at the moment).
func (p *Processor) Ready() bool { return p.ready.Load() && p.conn.IsConnected() }

// Run sets up the streams and the coordination bucket, starts the micro
// service and the core NATS inputs, joins the members of the coordination
// bucket and runs the JetStream partitions assigned to it (taking them
// over as members come and go) until ctx is cancelled. It then stops every
// partition gracefully — drain, finish queued messages, final snapshots
// (unless the policy disables them), release the ownership record with the
// final checkpoint — each step bounded by ShutdownTimeout, leaves, and
// returns nil, or the first fatal error (an invalid learner
// configuration). Run may be called once.
func (p *Processor) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("processor: Run called twice")
	}
	for _, pl := range p.pipes {
		cleanLocal(p.cfg.LocalDir, pl, p.log)
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := p.setup(setupCtx)
	cancel()
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	svc, err := p.srv.Start(runCtx)
	if err != nil {
		return err
	}
	// g owns every goroutine of Run: the core NATS partitions and the
	// coordinator, which owns the JetStream partitions (each owning its
	// workers, acker, snapshotter and renewal), its watcher and its
	// heartbeat. Each reports its error on errs and stops the others.
	var g errgroup.Group
	errs := make(chan error, len(p.pipes)+1)
	fail := func(err error) error {
		if err != nil {
			errs <- err
			stop()
		}
		return nil
	}
	for _, pl := range p.pipes {
		if pl.cfg.Input.Stream != "" {
			continue
		}
		pt := p.newPartition(pl, 0, 0, 0, 0, time.Now())
		pl.parts[0].Store(pt)
		g.Go(func() error { return fail(pt.runCore(runCtx)) })
	}
	if p.coord != nil {
		g.Go(func() error { return fail(p.coord.run(runCtx)) })
	}
	// Ready once the core NATS inputs are subscribed: what is published
	// to them before is lost.
	for _, pl := range p.pipes {
		if pt := pl.parts[0].Load(); pt != nil && pl.cfg.Input.Stream == "" {
			select {
			case <-pt.subscribed:
			case <-runCtx.Done():
			}
		}
	}
	p.ready.Store(true)
	p.log.Info("running", zap.String("member", p.id), zap.Int("pipelines", len(p.pipes)))
	<-runCtx.Done()
	p.ready.Store(false)
	p.log.Info("shutting down")
	if err := p.srv.Stop(svc); err != nil {
		p.log.Warn("stop micro service", zap.Error(err))
	}
	_ = g.Wait()
	p.watch.Stop()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// publishAttempt bounds one attempt of an output publish:
// snapshot_timeout/5, at least 500ms.
func (p *Processor) publishAttempt() time.Duration {
	return max(p.cfg.SnapshotTimeout/5, 500*time.Millisecond)
}

// attemptTimeout bounds one attempt of a JetStream call during setup.
const attemptTimeout = 5 * time.Second

// retry calls f with a context bounded by attemptTimeout until it succeeds,
// fails for good, or ctx ends. Timeouts, "no responders" and server-side
// unavailability (no JetStream leader while a node is down, an offline
// stream, peers not yet known) are retried after a logged warning; other
// errors are returned at once.
func (p *Processor) retry(ctx context.Context, what string, f func(context.Context) error) error {
	return publish.Call(ctx, attemptTimeout, f, func(n int, err error) {
		p.log.Warn("jetstream call failed; retrying", zap.String("call", what), zap.Int("attempt", n), zap.Error(err))
	})
}

// transientJS reports whether a JetStream call may succeed if retried
// (publish.Transient).
func transientJS(err error) bool { return publish.Transient(err) }

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
