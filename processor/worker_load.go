package processor

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/snapshot"
)

// entry is one loaded learner, owned by one worker: what the shell keeps
// of a key beside the machine's state of it.
type entry struct {
	key     string
	pipe    *pipeline
	m       *keymodel.Model // learner, classifier stage, monitor and preprocessing
	rev     uint64          // KV revision of the last saved or loaded snapshot
	lastSeq uint64          // last sequence of the loaded snapshot (the machine keeps the live one)
	stored  int
	// restored: the model came from a snapshot (its dictionary's points
	// are counted when it joins the worker, loaded).
	restored bool
	subject  string // output subject of the key (expanded on first use)
	advice   string // budget advice of the last message (Summary.BudgetAdvice)
	// elem is e in its worker's local tier's memory list (nil: the model
	// is in the local tier, m nil, or the worker has none); seen is the
	// learner's count when it went there.
	elem *list.Element
	seen int64
	// lcfg is the learner configuration of a model in the local tier that
	// differs from the pipeline's (nil: the pipeline's; local_format.go).
	lcfg *learners.Config
	// explained is the explained variance ratio of the last projection and
	// evBand its explainedBand + 1 (0: not counted in the metrics yet).
	explained float64
	evBand    int8
}

// loadSlots is how many keys one worker loads from the snapshot store at
// once (the machine's Config.Loads): a key that misses memory and the
// local tier costs a KV read (and a claim, a KV write) — a network round
// trip or two — and while it loads, off the worker's goroutine, the
// worker's other keys go on. Four keep a worker busy through a round trip
// of a few milliseconds at a few thousand misses a second (a partition
// that moved, or a restart, loads every key once), and hold at most four
// learners beyond the memory plan while they are decoded.
const loadSlots = 4

// claimAttempts is how many times a load reads a key and claims it while
// the claim conflicts, pausing attempt × claimPause before each new read.
// A replica a few writes behind the bucket's leader answers a read (a
// direct get) with an older revision for some milliseconds
// (internal/clustertest TestLeaderRevisionAfterPut): its claim conflicts.
const (
	claimAttempts = 5
	claimPause    = 20 * time.Millisecond
)

// loadResult is a load's outcome, handed from its goroutine to the worker.
type loadResult struct {
	key string
	e   *entry
	err error
}

// startLoad loads key (its snapshot, or a fresh learner) on a goroutine of
// its own, and hands the result to the worker's loop (loaded), which
// answers the machine. The machine asks for at most loadSlots at once, the
// capacity of loadRes, so the goroutine never blocks; ctx ends them when
// the worker stops, which waits for them.
func (w *worker) startLoad(ctx context.Context, key string, o machine.LoadOpts) {
	w.loading.Add(1)
	go func() {
		defer w.loading.Done()
		e, err := w.load(ctx, key, o.Create, o.ReplaceCorrupt)
		w.loadRes <- loadResult{key: key, e: e, err: err}
	}()
}

// loaded answers the machine with a load's result: the key's entry joins
// the worker's, and the machine applies the messages that waited for it
// (a fenced machine refuses them).
func (w *worker) loaded(r loadResult) {
	if r.err != nil {
		w.step(machine.Loaded{Key: r.key, Fail: dispOf(r.err)})
		return
	}
	e := r.e
	if e.restored {
		e.stored = e.m.Learner().Summary(w.res.Eig).Stored
		w.pipe.met.storedPoints.Add(float64(e.stored))
	}
	w.keys[r.key] = e
	w.resident(e)
	w.step(machine.Loaded{Key: r.key, LastSeq: e.lastSeq})
}

// load reads key's snapshot, or builds a fresh learner if there is none
// (errNoKey when !create). In a JetStream partition it then fences the
// key: a snapshot written by a newer epoch means this instance no longer
// owns the partition (errFenced, and the partition stops); any other one,
// or none, is claimed — written back with this partition's epoch by
// compare-and-set on the revision read — before the key applies anything,
// so a stale owner's later save of the key fails its compare-and-set
// instead of overwriting acked work, and a read answered by a replica
// behind the bucket's leader is caught (read); a claim that conflicts is
// read again. A snapshot that names
// another pipeline or key is refused as corrupt. It runs on a load's
// goroutine (startLoad): it touches nothing of the worker's but its
// read-only fields, the store and the metrics.
func (w *worker) load(ctx context.Context, key string, create, replaceCorrupt bool) (*entry, error) {
	for attempt := 1; ; attempt++ {
		e, claim, err := w.read(ctx, key, create, replaceCorrupt)
		if errors.Is(err, errLinkLost) && attempt < 3 {
			continue // its answer lost with the connection: read again
		}
		if err != nil || !claim {
			return e, err
		}
		err = w.claim(ctx, e)
		if errors.Is(err, errLinkLost) && attempt < 3 {
			// Its answer lost with the connection, the claim may have
			// landed: read it again (and claim what is read).
			continue
		}
		if errors.Is(err, snapshot.ErrConflict) && attempt < claimAttempts {
			// Written meanwhile (by a stale owner finishing, or a retried
			// claim that landed), or read from a replica behind: read it
			// again after a pause that lets a replica apply what it lacks
			// (else the key's message is refused and redelivered).
			select {
			case <-time.After(time.Duration(attempt) * claimPause):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return e, nil
	}
}

// read loads key's snapshot into a new entry (or a fresh learner), and
// says whether the entry must be claimed for this partition's epoch.
func (w *worker) read(ctx context.Context, key string, create, replaceCorrupt bool) (*entry, bool, error) {
	pl := w.pipe
	pc := pl.cfg
	lctx, cancel := w.call(ctx, w.snapshotTimeout)
	defer cancel()
	snap, rev, err := w.store.Load(lctx, snapshot.JoinKey(pc.Name, key))
	if err != nil && linkLost(lctx) {
		return nil, false, fmt.Errorf("processor: load snapshot of %q: %w: %w", key, errLinkLost, err)
	}
	if err == nil && (snap.Pipeline != pc.Name || snap.Key != key) {
		err = fmt.Errorf("%w: the snapshot stored for pipeline %q key %q holds pipeline %q key %q (copied from another key?)",
			snapshot.ErrCorrupt, pc.Name, key, snap.Pipeline, snap.Key)
	}
	if err == nil && w.owned && snap.Epoch > w.epoch && !w.stillOwned(lctx) {
		w.fence.Revoke()
		return nil, false, fmt.Errorf("%w: key %q of pipeline %s has a snapshot written by epoch %d, this owner has epoch %d",
			errFenced, key, pc.Name, snap.Epoch, w.epoch)
	}
	e := &entry{pipe: pl, key: key, rev: rev}
	switch {
	case errors.Is(err, snapshot.ErrNoSnapshot):
		if !create {
			return nil, false, fmt.Errorf("%w: pipeline %s has no learner for key %q", errNoKey, pc.Name, key)
		}
		e.rev = 0
	case err == nil:
		e.m, err = w.restore(snap)
		if err == nil {
			e.lastSeq, e.restored = snap.LastSeq, true
			w.log.Debug("restored", zap.String("key", key), zap.Uint64("last_seq", snap.LastSeq), zap.Uint64("rev", rev),
				zap.Uint64("snapshot_epoch", snap.Epoch))
			// A snapshot of a newer epoch that stillOwned let through was
			// written under another partition layout: claim it too. One of
			// this epoch is claimed as well: the store's read is a direct
			// get, answered by whichever replica of the bucket the
			// connection's server holds, which may not have applied this
			// worker's own last save of the key yet (the key unloaded,
			// then loaded again): the claim's compare-and-set on the
			// revision read proves the read was the latest (a stale one
			// conflicts and is read again). Restored from a stale read, the
			// key lost what that save held, and its next save, conflicting
			// with it, took it for its own save with a lost answer and
			// overwrote it (issue 28, TestClusterReloadAfterEvict).
			return e, w.owned, nil
		}
		fallthrough
	case errors.Is(err, snapshot.ErrCorrupt):
		w.met.snapFailures.WithLabelValues(pc.Name, "corrupt").Inc()
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
	if e.m, err = keymodel.New(pl.spec); err != nil {
		return nil, false, err
	}
	return e, w.owned, nil
}

// claim writes e's state back with this partition's epoch, by
// compare-and-set on e.rev: that is its fence (no reading of the lease;
// the machine asks for no load once it knows the fence is lost).
func (w *worker) claim(ctx context.Context, e *entry) error {
	cctx, cancel := w.call(ctx, w.snapshotTimeout)
	defer cancel()
	snap := e.snapshot(e.lastSeq, w.epoch)
	rev, err := w.store.Save(cctx, snapshot.JoinKey(e.pipe.cfg.Name, e.key), snap, e.rev)
	if err != nil && linkLost(cctx) {
		err = fmt.Errorf("%w: %w", errLinkLost, err)
	}
	if err != nil {
		return fmt.Errorf("processor: claim key %q for epoch %d: %w", e.key, w.epoch, err)
	}
	e.rev = rev
	e.pipe.stats.KVWrites.Add(1)
	return nil
}

// restore rebuilds a key's model from its snapshot, taken with the
// pipeline's config (keymodel.Restore: the key keeps its snapshot's
// budget policy, which is logged).
func (w *worker) restore(snap *codec.Snapshot) (*keymodel.Model, error) {
	m, kept, err := keymodel.Restore(w.pipe.spec, keymodel.State{Learner: snap.State, Classifier: snap.Classifier, Monitor: snap.Monitor})
	if kept {
		w.log.Info("key keeps the budget policy of its snapshot; reset it to apply the pipeline's", zap.String("key", snap.Key),
			zap.String("eviction", snap.State.Config.WithDefaults().Eviction), zap.String("pipeline_eviction", w.pipe.cfg.Learner.WithDefaults().Eviction))
	}
	return m, err
}

// snapshot returns e's model as a snapshot of the key at lastSeq, written
// by epoch.
func (e *entry) snapshot(lastSeq, epoch uint64) *codec.Snapshot {
	st := e.m.Snapshot()
	return &codec.Snapshot{Key: e.key, Pipeline: e.pipe.cfg.Name, LastSeq: lastSeq, Epoch: epoch,
		State: st.Learner, Classifier: st.Classifier, Monitor: st.Monitor}
}
