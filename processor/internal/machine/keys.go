package machine

import (
	"container/list"
	"slices"
	"time"
)

// keyCore holds the rules of one worker's keys, with no I/O: the order in
// which a key's messages are applied (waiting for an earlier unapplied
// one, skipping what a snapshot already holds), the
// replay holds of the tracker, when a key's snapshot is due, what a
// landed snapshot means for the key, and which key to unload when the
// worker is full. The worker is the shell around it: it loads and saves
// snapshots, runs the learner, publishes, acks, and tells the core what
// happened; the core tells it what to do next. Time is passed in. A
// keyCore is owned by one worker goroutine. The tracker it holds is safe
// for concurrent use (the consume callback delivers into it).
type keyCore struct {
	track   *Tracker // nil for a core NATS input: no sequences, no holds, no waiting
	policy  Policy
	quota   int                // keys the worker may hold
	slots   int                // snapshot jobs that may be in flight
	blocked map[string][]block // per key, ascending
	lru     *list.List         // of *keyState, front = most recently used
	flying  int                // snapshot jobs in flight
	loading int                // keys loading: their room is kept
	closing bool               // no more handoffs
}

// keyState is the core's part of one loaded key.
type keyState struct {
	key      string
	lastSeq  uint64 // last applied stream sequence
	dirtySeq uint64 // first applied sequence since the last snapshot handoff (held in the tracker); 0 if clean
	dirty    bool
	since    int       // messages applied since the last snapshot handoff
	dirtyAt  time.Time // when the key became dirty
	saving   bool      // a snapshot job is in flight
	evicting bool      // unload when the in-flight snapshot lands
	saveNow  bool      // a request (reset, snapshot) wants the state saved as soon as no job is in flight
	elem     *list.Element
}

// block is an unapplied sequence of a key that later messages of the key
// must wait for.
type block struct {
	seq   uint64
	since time.Time
	// unsure: registered when the key could not be loaded for seq, so
	// whether seq is applied already (a stale duplicate delivery of a
	// message acknowledged long ago, which never comes back) is unknown
	// until the key is loaded (stale).
	unsure bool
}

func newKeyCore(track *Tracker, policy Policy, quota, slots int) *keyCore {
	return &keyCore{track: track, policy: policy, quota: quota, slots: slots,
		blocked: map[string][]block{}, lru: list.New()}
}

// verdict is what to do with a message of a loaded key.
type verdict int

const (
	vApply verdict = iota // learn, publish, ack
	vSkip                 // at or below the key's last applied sequence: ack as skipped
)

// waits reports whether a message seq of key must wait for an earlier
// unapplied message of the key (a nak'ed one, or one lost in delivery): a
// key's messages are applied in stream order, or the earlier one would be
// skipped as already applied. A waiting seq is blocked too.
func (c *keyCore) waits(key string, seq uint64, now time.Time) (bool, uint64) {
	if c.track == nil {
		return false, 0
	}
	if bs := c.blocked[key]; len(bs) > 0 && seq > bs[0].seq {
		c.block(key, seq, now)
		return true, bs[0].seq
	}
	return false, 0
}

// admit says what to do with message seq of a loaded key. A redelivery of
// an applied message whose outputs are still in the output window is
// skipped too: the window publishes them and acknowledges the first
// delivery (window.go).
func (c *keyCore) admit(k *keyState, seq uint64) verdict {
	if c.track != nil && seq <= k.lastSeq {
		return vSkip
	}
	return vApply
}

// add makes a key whose snapshot (or fresh learner) was just loaded the
// most recently used.
func (c *keyCore) add(k *keyState) {
	k.elem = c.lru.PushFront(k)
}

// loadFailed records that key could not be loaded for message seq; a
// transient failure makes the key's later messages wait for seq.
func (c *keyCore) loadFailed(key string, seq uint64, transient bool, now time.Time) {
	if c.track != nil && transient {
		c.blockAs(key, block{seq: seq, since: now, unsure: true})
	}
}

// unsure reports whether message seq of key, not loaded, would wait for a
// block whose message may be applied already (see block.unsure): the key
// must be loaded to know (stale), not the message refused.
func (c *keyCore) unsure(key string, seq uint64) bool {
	bs := c.blocked[key]
	return c.track != nil && len(bs) > 0 && seq > bs[0].seq && bs[0].unsure
}

// stale forgets key's blocks at or below lastSeq, the last sequence its
// loaded state holds: those messages are applied, nothing waits for them.
func (c *keyCore) stale(key string, lastSeq uint64) {
	if c.track == nil {
		return
	}
	// unblock shifts the slice in place: walk a copy.
	for _, b := range slices.Clone(c.blocked[key]) {
		if b.seq > lastSeq {
			break
		}
		c.unblock(key, b.seq)
	}
}

// revive puts a key being unloaded (its save in flight) back to use, as
// the most recently used; it reports whether k was being unloaded (it
// counts as live again).
func (c *keyCore) revive(k *keyState) bool {
	if !k.evicting {
		return false
	}
	k.evicting = false
	k.elem = c.lru.PushFront(k)
	return true
}

// touch marks k as the most recently used.
func (c *keyCore) touch(k *keyState) {
	if k.elem != nil {
		c.lru.MoveToFront(k.elem)
	}
}

// full reports whether loading one more key needs another unloaded first
// (the keys loading hold their room).
func (c *keyCore) full() bool { return c.lru.Len()+c.loading >= c.quota }

// victim returns the least recently used live key.
func (c *keyCore) victim() *keyState {
	if b := c.lru.Back(); b != nil {
		return b.Value.(*keyState)
	}
	return nil
}

// unload takes k out of the LRU. It
// returns drop when k can be forgotten at once (clean, no save in
// flight), save when its snapshot must be handed over first (then k is
// forgotten when it lands, see landed), neither when a save is in flight.
func (c *keyCore) unload(k *keyState) (drop, save bool) {
	if k.elem != nil {
		c.lru.Remove(k.elem)
		k.elem = nil
	}
	if !k.dirty && !k.saving {
		return true, false
	}
	k.evicting = true
	return false, k.dirty && !k.saving
}

// forget removes k (after a conflicting save of a core NATS key: it
// reloads the newer snapshot on its next message). It reports whether k
// was live.
func (c *keyCore) forget(k *keyState) (wasLive bool) {
	if k.elem != nil {
		c.lru.Remove(k.elem)
		k.elem = nil
		wasLive = true
	}
	return wasLive
}

// applied records that message seq changed k: it becomes k's last applied
// sequence, the first one since the last snapshot is held in the tracker
// (the checkpoint must not pass it until a snapshot holds it), and seq no
// longer blocks the key.
func (c *keyCore) applied(k *keyState, seq uint64, now time.Time) {
	if c.track != nil {
		k.lastSeq = seq
		if k.dirtySeq == 0 {
			k.dirtySeq = seq
			c.track.Hold(seq)
		}
	}
	if !k.dirty {
		k.dirty, k.dirtyAt = true, now
	}
	k.since++
	c.unblock(k.key, seq)
}

// reset records that k's learner was replaced by a fresh one: dirty, and
// saved as soon as possible (the shell calls saveSoon), keeping lastSeq.
func (c *keyCore) reset(k *keyState, now time.Time) {
	if !k.dirty {
		k.dirty, k.dirtyAt = true, now
	}
	if c.track != nil && k.dirtySeq == 0 && k.lastSeq > 0 {
		k.dirtySeq = k.lastSeq
		c.track.Hold(k.lastSeq)
	}
}

// settled records that message seq of key was acked or terminated.
func (c *keyCore) settled(key string, seq uint64) {
	if c.track != nil {
		c.unblock(key, seq)
	}
}

// due reports whether k's snapshot should be handed over now: it changed,
// no save is in flight, the partition may still write, a job slot is
// free, and the policy (every N messages, every T), a request (saveNow) or
// force says so. (A job of a key whose outputs are not all acknowledged
// yet is held by the shell until they are: see outQueue.hold.)
func (c *keyCore) due(k *keyState, now time.Time, force, canWrite bool) bool {
	if !k.dirty || k.saving || !canWrite || c.closing || c.flying >= c.slots {
		return false
	}
	sp := c.policy
	return force || k.saveNow ||
		(sp.EveryMessages > 0 && k.since >= sp.EveryMessages) ||
		(sp.Every > 0 && now.Sub(k.dirtyAt) >= sp.Every)
}

// job is what a snapshot handoff records: the last sequence the state
// holds (0 for a core NATS input) and the sequence it releases from the
// tracker when saved.
type job struct {
	lastSeq, dirtySeq uint64
}

// handoff marks k's state as handed over to the snapshotter.
func (c *keyCore) handoff(k *keyState) job {
	j := job{dirtySeq: k.dirtySeq}
	if c.track != nil {
		j.lastSeq = k.lastSeq
	}
	k.dirtySeq, k.dirty, k.since, k.saving, k.saveNow = 0, false, 0, true, false
	c.flying++
	return j
}

// next is what the shell does after a save landed.
type next int

const (
	nextNone   next = iota
	nextSave        // hand k's snapshot over again (waiting for a slot)
	nextDrop        // forget k (it was being unloaded and is clean now)
	nextForget      // forget k now and take it out of the LRU (conflict)
)

// landed applies the outcome of a save of k, and returns what the shell
// does next.
func (c *keyCore) landed(k *keyState, j job, o Outcome, now time.Time) next {
	c.flying--
	k.saving = false
	switch o {
	case Saved:
		if j.dirtySeq != 0 {
			c.track.Release(j.dirtySeq)
		}
	case Fenced:
		// Saved nowhere: the hold stays. The partition writes nothing more,
		// but a renewal that checked the fence just before it was revoked
		// may still read the checkpoint; released here, it could pass
		// this key's unsaved messages (issue 28).
		return nextNone
	case Conflict:
		if j.dirtySeq != 0 {
			c.track.Release(j.dirtySeq)
		}
		if k.dirtySeq != 0 {
			c.track.Release(k.dirtySeq)
			k.dirtySeq = 0
		}
		return nextForget
	case Failed:
		// Still dirty: keep the oldest hold.
		switch {
		case j.dirtySeq == 0:
		case k.dirtySeq == 0:
			k.dirtySeq = j.dirtySeq
		case j.dirtySeq < k.dirtySeq:
			c.track.Release(k.dirtySeq)
			k.dirtySeq = j.dirtySeq
		default:
			c.track.Release(j.dirtySeq)
		}
		if !k.dirty {
			k.dirty, k.dirtyAt = true, now
		}
		if k.evicting {
			return nextSave
		}
		return nextNone
	}
	if k.evicting {
		if k.dirty {
			return nextSave
		}
		return nextDrop
	}
	if k.saveNow && k.dirty {
		return nextSave
	}
	return nextNone
}

// block makes later messages of key wait for seq.
func (c *keyCore) block(key string, seq uint64, now time.Time) {
	c.blockAs(key, block{seq: seq, since: now})
}

// blockAs makes later messages of key wait for b.seq; a block already
// there keeps its time, and is unsure only if both are (a refused later
// message or a nak makes it certain).
func (c *keyCore) blockAs(key string, b block) {
	bs := c.blocked[key]
	i := 0
	for i < len(bs) && bs[i].seq < b.seq {
		i++
	}
	if i < len(bs) && bs[i].seq == b.seq {
		bs[i].unsure = bs[i].unsure && b.unsure
		return
	}
	c.blocked[key] = append(bs[:i], append([]block{b}, bs[i:]...)...)
}

// unblock settles seq of key.
func (c *keyCore) unblock(key string, seq uint64) {
	bs := c.blocked[key]
	for i := range bs {
		if bs[i].seq == seq {
			bs = append(bs[:i], bs[i+1:]...)
			break
		}
	}
	if len(bs) == 0 {
		delete(c.blocked, key)
	} else {
		c.blocked[key] = bs
	}
}

// expired is a block given up by expire.
type expired struct {
	key    string
	seq    uint64
	waited time.Duration
}

// expire forgets blocks older than ttl: their message did not come back
// (deleted from the stream by its limits, say), and the key must not wait
// forever.
func (c *keyCore) expire(now time.Time, ttl time.Duration) []expired {
	var out []expired
	for key, bs := range c.blocked {
		// unblock shifts bs in place: walk a copy, or a block is skipped.
		for _, b := range slices.Clone(bs) {
			if now.Sub(b.since) < ttl {
				continue
			}
			out = append(out, expired{key: key, seq: b.seq, waited: now.Sub(b.since)})
			c.unblock(key, b.seq)
		}
	}
	return out
}
