package processor

import (
	"container/list"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/internal/localstore"
	"github.com/kpcastream/kpcastream/learners"
)

// The local tier (issue 30): a worker of a JetStream partition keeps the
// models of its keys in memory up to its share of memory_budget and the
// rest in a local store on disk (internal/localstore), one file per
// worker named after its partition and epoch, created empty when the
// worker starts and removed when it stops. The machine knows nothing of
// it: to the machine every key in the local tier is loaded, with its
// last applied sequence, its dirty state, its snapshot schedule and its
// tracker hold, exactly as a key in memory. So a key moved to disk costs
// no snapshot save (snapshots follow snapshot.every / every_messages as
// for any loaded key: KV writes are the schedule's, not the evictions'),
// and coming back costs a local read and a decode, not a KV round trip.
// Exactly-once, the fence and the replay rule are unchanged: the KV
// snapshot stays the durable, fenced copy, the local copy is a cache of
// this worker's own model, never read by another epoch (a new owner, or
// this process after a restart, starts with an empty file and loads
// from KV on each key's first message). A failure of the local store
// revokes the partition's fence: the partition stops and is taken again
// under a new epoch, replaying from its checkpoint.
//
// Memory: a key on disk still costs localKeyBytes in memory (its entry,
// the machine's state of it, their map and list entries); the keys in
// memory take the rest of the worker's share of memory_budget: at most
// (share − known·localKeyBytes)/size, at most the max_keys share. Disk:
// the keys on disk, at most the machine's quota (share/localKeyBytes),
// times the size of one encoded state (about the learner's State; the
// file keeps its free pages for reuse).

// localKeyBytes is what a key in the local tier costs in memory.
const localKeyBytes = 1024

// spillBatch is how many keys go to disk in one write once memory is
// full: one commit for the lot.
const spillBatch = 16

// tier is a worker's keys in memory over its local store.
type tier struct {
	store  *localstore.Store
	path   string
	lru    list.List // of *entry with a model, front = most recently used
	onDisk int       // keys whose model is in the store
	share  int64     // the worker's share of memory_budget, bytes
	kb     int       // memory of one key in memory
	capped int       // the max_keys share (0: none)
	items  []localstore.Item
	buf    []byte
	enc    []byte          // the values of a spill (local_format.go)
	spill  *learners.State // a learner-only model's state while it is encoded, reused (learners.StateInto)
	out    []*entry        // the keys of a spill
	dec    localDecoder    // reads keys back into one reused State
	// free are models of keys spilled, kept to restore others into
	// (restoreLocal), fewer than spillBatch: they fill the room a spill
	// made below residentMax. Only for learner-only models (reuse).
	free    []*keymodel.Model
	reuse   bool
	cfg     learners.Config // the pipeline's learner configuration, defaults applied
	fileLen int64           // the store's file size last reported
	ins     insertion       // where keys coming into memory go (local_policy.go)
	fresh   *entry          // the key last made resident, until its first use
}

// openTier opens the local tier of a worker at dir (a file per partition,
// epoch and worker); nil when dir is "" or the store cannot be opened
// (logged: the worker then holds its keys in memory only).
func openTier(dir string, d deps, id int) *tier {
	if dir == "" || dir == LocalNone || !d.owned {
		return nil
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-p%d-e%d-w%d.db", d.pipe.cfg.Name, d.num, d.epoch, id))
	err := os.MkdirAll(dir, 0o700)
	var st *localstore.Store
	if err == nil {
		st, err = localstore.Open(path)
	}
	if err != nil {
		d.log.Error("local tier unavailable: keys beyond memory_budget are unloaded to the snapshot store", zap.String("path", path), zap.Error(err))
		return nil
	}
	sp := d.pipe.spec
	return &tier{store: st, path: path, cfg: sp.Learner.WithDefaults(), reuse: sp.Classes == nil && sp.Monitor == nil,
		dec: localDecoder{keep: true}}
}

// residentMax is how many keys may be in memory while known keys are known
// to the machine.
func (t *tier) residentMax(known int) int {
	n := int((t.share - int64(known)*localKeyBytes) / int64(max(t.kb, 1)))
	if t.capped > 0 {
		n = min(n, t.capped)
	}
	return max(1, n)
}

// model returns e's model, reading it from the local tier when it is
// there, and marks e as the most recently used; an error (the local store
// failed) has revoked the fence.
func (w *worker) model(e *entry) (*keymodel.Model, error) {
	t := w.tier
	if t == nil {
		return e.m, nil
	}
	if e.m != nil {
		if e.elem != nil {
			t.lru.MoveToFront(e.elem)
		}
		if t.fresh != e && t.onDisk > 0 { // not the use that loaded it (a miss, counted then)
			t.ins.access(true, len(w.keys))
		}
		t.fresh = nil
		return e.m, nil
	}
	snap, err := w.readLocal(e, &t.dec)
	if err == nil {
		e.m, err = w.restoreLocal(e, snap)
	}
	if err != nil {
		return nil, w.localFailed(e, "read", err)
	}
	w.localKeys(-1)
	w.pipe.met.localLoads.Inc()
	w.resident(e)
	t.fresh = nil
	return e.m, nil
}

// restoreLocal rebuilds e's model from its local copy: into a model a
// spill set free when there is one (a learner-only pipeline, e's learner
// configuration the pipeline's: the learner's Restore copies the state
// into its arrays, no new learner to allocate and collect), else anew.
func (w *worker) restoreLocal(e *entry, snap *codec.Snapshot) (*keymodel.Model, error) {
	t := w.tier
	if n := len(t.free); n > 0 && e.lcfg == nil {
		m := t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
		if m.Learner().Restore(snap.State) == nil {
			return m, nil
		}
		// Refused (and unchanged): checked again, and reported, below.
	}
	return w.restore(snap)
}

// readLocal decodes e's state from the local tier with dec (the tier's:
// valid until its next read, for a restore; a new one: the caller's).
func (w *worker) readLocal(e *entry, dec *localDecoder) (*codec.Snapshot, error) {
	t := w.tier
	v, ok, err := t.store.Get(t.buf, e.key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("processor: key %q is not in the local tier", e.key)
	}
	t.buf = v[:0]
	cfg := t.cfg
	if e.lcfg != nil {
		cfg = *e.lcfg
	}
	snap, err := dec.decode(v, cfg)
	if err != nil {
		return nil, err
	}
	snap.Key, snap.Pipeline = e.key, e.pipe.cfg.Name
	return snap, nil
}

// resident records that e's model is in memory (just loaded or read
// back) and gives its learner the worker's working memory, as the most
// recently used or, when the tier finds keys come in a
// cycle longer than memory, as the next to go (local_policy.go), and moves
// the least recently used others to the local tier while more are in
// memory than fit.
func (w *worker) resident(e *entry) {
	// Built on a load's goroutine with working memory of its own: from
	// now on the learner uses the worker's (memory.go charges it once).
	e.m.UseScratch(w.ws)
	t := w.tier
	if t == nil {
		return
	}
	// A miss: read back from the local tier, or loaded from the snapshot
	// store (its message's use of the model is then no hit). Counted only
	// while keys are on disk: until then there is nothing to choose.
	if t.onDisk > 0 {
		t.ins.access(false, len(w.keys))
	}
	t.fresh = e
	if t.ins.back {
		e.elem = t.lru.PushBack(e)
	} else {
		e.elem = t.lru.PushFront(e)
	}
	w.memory(int64(t.kb - localKeyBytes))
	limit := t.residentMax(len(w.keys))
	if t.lru.Len() <= limit {
		return
	}
	// Spill down to limit − spillBatch + 1, so that the next misses find
	// room and the writes go by batches.
	target := max(1, limit-spillBatch+1)
	t.items = t.items[:0]
	t.enc = t.enc[:0]
	out := t.out[:0]
	for el := t.lru.Back(); el != nil && t.lru.Len()-len(out) > target; el = el.Prev() {
		v := el.Value.(*entry)
		if v == e {
			continue // the key being used stays
		}
		var st keymodel.State
		if t.reuse {
			// The learner alone: its state into the tier's, no copy to
			// allocate (and collect) per key.
			t.spill = learners.StateInto(v.m.Learner(), t.spill)
			st.Learner = t.spill
		} else {
			st = v.m.Snapshot()
		}
		v.lcfg = nil
		if c := st.Learner.Config; c != t.cfg {
			v.lcfg = &c // a key that kept its snapshot's budget policy
		}
		// The values share t.enc (bbolt needs them until its commit); a
		// value that grows it leaves the earlier ones in the old array.
		n := len(t.enc)
		var err error
		t.enc, err = appendLocal(t.enc, &codec.Snapshot{Key: v.key, Pipeline: v.pipe.cfg.Name, Epoch: w.epoch,
			State: st.Learner, Classifier: st.Classifier, Monitor: st.Monitor})
		if err != nil {
			_ = w.localFailed(v, "encode", err)
			return
		}
		t.items = append(t.items, localstore.Item{Key: v.key, Value: t.enc[n:len(t.enc):len(t.enc)]})
		out = append(out, v)
	}
	if err := t.store.Put(t.items); err != nil {
		_ = w.localFailed(e, "write", err)
		return
	}
	for _, v := range out {
		t.lru.Remove(v.elem)
		v.seen = v.m.Learner().Seen()
		if t.reuse && v.lcfg == nil && len(t.free) < spillBatch-1 {
			// In the room this spill made: memory stays within the share.
			t.free = append(t.free, v.m)
		}
		v.elem, v.m = nil, nil
	}
	w.localKeys(len(out))
	w.pipe.met.localSpills.Add(float64(len(out)))
	w.memory(-int64(len(out)) * int64(t.kb-localKeyBytes))
	clear(t.items)
	clear(out)
	t.out = out[:0]
	w.reportLocal()
}

// forgetLocal takes an unloaded key out of the tier.
func (w *worker) forgetLocal(e *entry) {
	t := w.tier
	if t == nil {
		return
	}
	if e.elem != nil {
		t.lru.Remove(e.elem)
		e.elem = nil
		w.memory(-int64(t.kb - localKeyBytes))
		return
	}
	if e.m == nil {
		w.localKeys(-1)
		if err := t.store.Delete(e.key); err != nil {
			_ = w.localFailed(e, "delete", err)
		}
	}
}

// snapshotOf returns e's state as a snapshot of the key at lastSeq,
// written by this partition's epoch: a copy of its model, or its copy in
// the local tier.
func (w *worker) snapshotOf(e *entry, lastSeq uint64) (*codec.Snapshot, error) {
	if e.m != nil || w.tier == nil {
		return e.snapshot(lastSeq, w.epoch), nil
	}
	// A decoder of its own: the snapshot goes to the snapshotter.
	snap, err := w.readLocal(e, &localDecoder{})
	if err != nil {
		return nil, w.localFailed(e, "read", err)
	}
	snap.LastSeq, snap.Epoch = lastSeq, w.epoch
	return snap, nil
}

// localFailed handles a failure of the local tier: the model of a key
// may be lost, so the partition stops writing (its fence is revoked) and
// is taken again under a new epoch, which replays from the checkpoint.
func (w *worker) localFailed(e *entry, op string, err error) error {
	w.log.Error("local tier failed; stopping the partition (it replays from its checkpoint)", zap.String("key", e.key),
		zap.String("op", op), zap.String("path", w.tier.path), zap.Error(err))
	w.fence.Revoke()
	// The cause is text only: a malformed local copy is no bad input (a
	// dead letter), the message is nak'ed and its key replayed.
	return fmt.Errorf("%w: local tier: %s key %q: %v", errFenced, op, e.key, err)
}

// memory adds d bytes to the pipeline's memory in use.
func (w *worker) memory(d int64) {
	w.pipe.stats.Memory.Add(d)
	w.pipe.met.memoryUsed.Add(float64(d))
}

// localKeys counts d more keys in the local tier.
func (w *worker) localKeys(d int) {
	w.tier.onDisk += d
	w.pipe.stats.LocalKeys.Add(int64(d))
	w.pipe.met.localKeys.Add(float64(d))
}

// localBytes counts d more bytes of local tier files.
func (w *worker) localBytes(d int64) {
	w.pipe.stats.LocalBytes.Add(d)
	w.pipe.met.localBytes.Add(float64(d))
}

// closeTier closes the local tier and removes its file.
func (w *worker) closeTier() {
	t := w.tier
	if t == nil {
		return
	}
	w.localKeys(-t.onDisk)
	w.localBytes(-t.fileLen)
	w.memory(-int64(t.lru.Len()) * int64(t.kb-localKeyBytes))
	t.fileLen = 0
	t.lru.Init()
	clear(t.free)
	t.free = nil
	if err := t.store.Close(); err != nil {
		w.log.Warn("local tier: close", zap.Error(err))
	}
}

// cleanLocal removes the local tier files of pl left in dir by a worker
// that did not stop (a crash, a kill): their epochs never come back, so
// nothing reads them, and they would pile up. A file a running worker
// holds (another instance sharing the directory) is locked and left.
func cleanLocal(dir string, pl *pipeline, log *zap.Logger) {
	if dir == "" || dir == LocalNone {
		return
	}
	stale, _ := filepath.Glob(filepath.Join(dir, pl.cfg.Name+"-p*-e*-w*.db"))
	for _, f := range stale {
		if localstore.Stale(f) {
			log.Info("removed a stale local tier file", zap.String("path", f))
		}
	}
}

// reportLocal refreshes the disk use of the local tier.
func (w *worker) reportLocal() {
	if t := w.tier; t != nil {
		n := t.store.FileBytes()
		w.localBytes(n - t.fileLen)
		t.fileLen = n
	}
}
