package processor

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
)

// partFence is the worker's view of its partition's fence
// (fence.go; a nil *fence, a core NATS input, is always
// ok): whether it may still write, when it stopped, and revoking it.
type partFence interface {
	OK() bool
	Lost() <-chan struct{}
	Revoke()
}

// deps are everything a worker uses beyond its own keys and machine: its
// partition's identity, fence and tracker, its ports to NATS and to the
// snapshot store, the metrics and the settings it reads. The partition
// builds them (partition.workerDeps); a worker never reaches into the
// Processor or the partition.
type deps struct {
	pipe    *pipeline
	num     int    // partition number
	shard   int    // the shard of the partition (input.shards)
	lane    bool   // the shard's outputs go through ordered lanes
	epoch   uint64 // the partition's epoch (0: core NATS input)
	log     *zap.Logger
	closing <-chan struct{} // closed when the partition closes its workers' inputs
	// fence says whether the partition may still write; owned is whether
	// it is owned by a record at all (a JetStream input: its keys are
	// claimed for its epoch, and a save's conflict fences it).
	fence      partFence
	owned      bool
	track      *machine.Tracker           // the replay tracker; nil for a core NATS input
	stillOwned func(context.Context) bool // the ownership record still names this epoch
	out        publish.Out                // the outputs: a stream (JetStream, asynchronously) or core NATS
	dl         publish.Out                // the dead letters: a stream (JetStream, retried) or core NATS
	lanePub    lanePublisher              // the output lane's publishes (core, or a test's wrapper)
	laneSub    laneSubscriber             // the output lane's answers
	store      keyStore                   // the snapshot store
	met        *metrics
	watch      *ops.Watches // keys watched by the live page
	// onApply, when set (tests), is called after a message was applied.
	onApply func(pipeline string, partition int, epoch uint64, key string, seq uint64)

	workers         int          // workers of the partition
	mem             workerMemory // the worker's share of memory_budget (memory.go)
	localDir        string       // directory of the local tier ("": none)
	queueSize       int
	snapshotTimeout time.Duration
	shutdownTimeout time.Duration
	publishAttempt  time.Duration
}

// laneSubscriber subscribes the output lane's answers (nats.Conn).
type laneSubscriber interface {
	ChanSubscribe(subj string, ch chan *nats.Msg) (*nats.Subscription, error)
}

// workerDeps are the dependencies of each of the partition's n workers
// (deps above): a worker reaches neither into the partition nor into the
// Processor.
func (pt *partition) workerDeps(n int, mem workerMemory) deps {
	p := pt.p
	var lp lanePublisher = p.conn
	if p.wrapLane != nil {
		lp = p.wrapLane(lp)
	}
	shard := pt.pipe.cfg.shardOf(pt.num)
	var io shardIO
	if shard < len(pt.pipe.io) {
		io = pt.pipe.io[shard]
	}
	return deps{pipe: pt.pipe, num: pt.num, shard: shard, lane: io.lane, epoch: pt.epoch, log: pt.log, closing: pt.closing,
		fence: pt.fence, owned: pt.fence != nil, track: pt.track, stillOwned: pt.stillOwned,
		out:     publish.Out{Core: p.conn, Async: p.pubJS, JetStream: io.outJS, Attempt: p.publishAttempt()},
		dl:      publish.Out{Core: p.conn, Sync: p.js, JetStream: io.dlJS, Attempt: p.publishAttempt()},
		lanePub: lp, laneSub: p.conn, store: p.keys,
		met: p.met, watch: &p.watch, onApply: p.onApply, workers: n, mem: mem, localDir: p.cfg.LocalDir, queueSize: p.cfg.QueueSize,
		snapshotTimeout: p.cfg.SnapshotTimeout, shutdownTimeout: p.cfg.ShutdownTimeout, publishAttempt: p.publishAttempt()}
}
