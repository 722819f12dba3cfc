package machine

import (
	"slices"
	"testing"
	"time"
)

// The rules of keyCore, driven without a server: each test is a script of
// events and the core's answers, with the tracker's checkpoint where it
// matters.

var t0 = time.Unix(1_700_000_000, 0)

func newTestCore(policy Policy) *keyCore {
	return newKeyCore(NewTracker(), policy, 2, 2)
}

// deliver delivers seqs to the core's tracker, as the consume callback does.
func deliver(c *keyCore, seqs ...uint64) {
	for _, s := range seqs {
		c.track.Deliver(s)
	}
}

func TestCoreOrderAndSkip(t *testing.T) {
	c := newTestCore(Policy{EveryMessages: -1, Every: -1})
	deliver(c, 1, 2, 3, 4, 5)
	k := &keyState{key: "a", lastSeq: 2} // restored from a snapshot holding 1..2
	c.add(k)
	for _, tc := range []struct {
		seq  uint64
		want verdict
	}{{1, vSkip}, {2, vSkip}, {3, vApply}} {
		if got := c.admit(k, tc.seq); got != tc.want {
			t.Errorf("admit %d: got %v, want %v", tc.seq, got, tc.want)
		}
	}
	// 3 fails transiently before it is applied (nak): 4 and 5 of the key wait for it.
	c.loadFailed("a", 3, true, t0)
	if w, first := c.waits("a", 4, t0); !w || first != 3 {
		t.Errorf("4 after unapplied 3: waits %v (first %d), want true (3)", w, first)
	}
	if w, _ := c.waits("a", 3, t0); w {
		t.Error("3 itself must not wait")
	}
	if w, _ := c.waits("b", 4, t0); w {
		t.Error("another key must not wait")
	}
	c.applied(k, 3, t0)
	c.settled("a", 3)
	if w, first := c.waits("a", 5, t0); !w || first != 4 {
		t.Errorf("5 after the blocked 4: waits %v (first %d), want true (4): 4 was blocked when it waited", w, first)
	}
	c.applied(k, 4, t0)
	c.settled("a", 4)
	if w, _ := c.waits("a", 5, t0); w {
		t.Error("5 waits after 3 and 4 were applied")
	}
	if k.lastSeq != 4 {
		t.Errorf("lastSeq %d, want 4", k.lastSeq)
	}
	// A permanent load failure (say a corrupt snapshot under "fail") blocks nothing.
	c.loadFailed("c", 9, false, t0)
	if w, _ := c.waits("c", 10, t0); w {
		t.Error("a permanent failure must not make later messages wait")
	}
	// Core NATS: no sequences, nothing waits or is skipped.
	core := newKeyCore(nil, Policy{}, 1, 1)
	kc := &keyState{key: "a", lastSeq: 7}
	core.loadFailed("a", 1, true, t0)
	if w, _ := core.waits("a", 2, t0); w || core.admit(kc, 1) != vApply {
		t.Error("core NATS input: messages wait or are skipped")
	}
}

func TestCoreSnapshotsAndCheckpoint(t *testing.T) {
	c := newTestCore(Policy{EveryMessages: 3, Every: 10 * time.Second})
	deliver(c, 1, 2, 3, 4, 5, 6)
	a, b := &keyState{key: "a"}, &keyState{key: "b"}
	c.add(a)
	c.add(b)
	apply := func(k *keyState, seq uint64) {
		c.applied(k, seq, t0)
		c.settled(k.key, seq)
		c.track.Release(seq) // acked
	}
	apply(a, 1)
	apply(b, 2)
	apply(a, 3)
	if cp := c.track.Checkpoint(); cp != 1 {
		t.Fatalf("checkpoint %d, want 1 (a's first unsnapshotted message)", cp)
	}
	if c.due(a, t0, false, true) {
		t.Error("a is due after 2 messages (every 3)")
	}
	apply(a, 4)
	if !c.due(a, t0, false, true) {
		t.Fatal("a not due after 3 messages")
	}
	if c.due(a, t0, false, false) {
		t.Error("due although the partition may not write (fenced)")
	}
	if !c.due(b, t0.Add(10*time.Second), false, true) || c.due(b, t0.Add(9*time.Second), false, true) {
		t.Error("b must be due 10s after it became dirty, not before")
	}
	ja := c.handoff(a)
	if ja.lastSeq != 4 || ja.dirtySeq != 1 || a.dirty || !a.saving {
		t.Fatalf("handoff of a: %+v, state %+v", ja, a)
	}
	if c.due(a, t0, true, true) {
		t.Error("due while its save is in flight")
	}
	apply(a, 5) // a changes while its save is in flight
	if next := c.landed(a, ja, Saved, t0); next != nextNone {
		t.Errorf("landed: %v", next)
	}
	if cp := c.track.Checkpoint(); cp != 2 {
		t.Errorf("checkpoint %d after a's save, want 2 (b's first unsnapshotted)", cp)
	}
	jb := c.handoff(b)
	if next := c.landed(b, jb, Failed, t0); next != nextNone || !b.dirty {
		t.Errorf("failed save: next %v, dirty %v", next, b.dirty)
	}
	if cp := c.track.Checkpoint(); cp != 2 {
		t.Errorf("checkpoint %d after b's failed save, want 2 (b still holds 2)", cp)
	}
	jb = c.handoff(b)
	c.landed(b, jb, Saved, t0)
	if cp := c.track.Checkpoint(); cp != 5 {
		t.Errorf("checkpoint %d, want 5 (a's message 5 is not in a snapshot yet)", cp)
	}
	// Slots: two jobs in flight fill them.
	j1, j2 := c.handoff(a), job{}
	b.dirty = true
	j2 = c.handoff(b)
	a.dirty = true
	if c.due(a, t0, true, true) {
		t.Error("due with every job slot in flight")
	}
	c.landed(a, j1, Saved, t0)
	c.landed(b, j2, Saved, t0)
	c.closing = true
	if c.due(a, t0, true, true) {
		t.Error("due while closing")
	}
}

func TestCoreLandedOutcomes(t *testing.T) {
	c := newTestCore(Policy{EveryMessages: -1, Every: -1})
	deliver(c, 1, 2, 3)
	k := &keyState{key: "a"}
	c.add(k)
	c.applied(k, 1, t0)
	j := c.handoff(k)
	c.applied(k, 2, t0)
	// A conflicting save of a core NATS key: both holds are released, the key is forgotten.
	if next := c.landed(k, j, Conflict, t0); next != nextForget || k.dirtySeq != 0 {
		t.Errorf("conflict: next %v, dirtySeq %d", next, k.dirtySeq)
	}
	if !c.forget(k) || c.lru.Len() != 0 {
		t.Error("forget: the key was live and must leave the LRU")
	}
	for _, s := range []uint64{1, 2, 3} {
		c.track.Release(s)
	}
	if cp := c.track.Checkpoint(); cp != 4 {
		t.Errorf("checkpoint %d after the conflict, want 4 (nothing held)", cp)
	}
	// Fenced: the job's hold stays (the state it holds is saved nowhere),
	// so that no checkpoint written meanwhile — a renewal racing the
	// fence's revocation — can pass it; nothing else happens.
	k2 := &keyState{key: "b"}
	c.add(k2)
	c.track.Deliver(4)
	c.applied(k2, 4, t0)
	c.track.Release(4) // acked
	j = c.handoff(k2)
	if next := c.landed(k2, j, Fenced, t0); next != nextNone {
		t.Errorf("fenced: next %v", next)
	}
	if cp := c.track.Checkpoint(); cp != 4 {
		t.Errorf("checkpoint %d after a fenced save of 4, want 4: it passed a sequence saved nowhere", cp)
	}
	// saveNow after a save: saved again.
	k2 = &keyState{key: "c"}
	c.add(k2)
	k2.dirty, k2.saveNow = true, true
	j = c.handoff(k2)
	k2.dirty, k2.saveNow = true, true
	if next := c.landed(k2, j, Saved, t0); next != nextSave {
		t.Errorf("saveNow while dirty after a save: next %v, want save", next)
	}
}

func TestCoreLRU(t *testing.T) {
	c := newTestCore(Policy{EveryMessages: -1, Every: -1})
	deliver(c, 1, 2, 3)
	a, b := &keyState{key: "a"}, &keyState{key: "b"}
	c.add(a)
	c.add(b)
	if !c.full() || c.victim() != a {
		t.Fatalf("full %v, victim %v: want a", c.full(), c.victim())
	}
	c.touch(a)
	if c.victim() != b {
		t.Fatal("after touching a, b is the least recently used")
	}
	// Clean b is dropped at once.
	if drop, save := c.unload(b); !drop || save {
		t.Errorf("unload of clean b: drop %v save %v", drop, save)
	}
	// Dirty a must be saved first, and is dropped when the save lands.
	c.applied(a, 1, t0)
	drop, save := c.unload(a)
	if drop || !save || !a.evicting || c.lru.Len() != 0 {
		t.Fatalf("unload of dirty a: drop %v save %v evicting %v", drop, save, a.evicting)
	}
	j := c.handoff(a)
	if next := c.landed(a, j, Saved, t0); next != nextDrop {
		t.Errorf("landed while unloading a clean key: %v, want drop", next)
	}
	// A key used again while its save is in flight comes back.
	c2 := newTestCore(Policy{EveryMessages: -1, Every: -1})
	deliver(c2, 1)
	k := &keyState{key: "k"}
	c2.add(k)
	c2.applied(k, 1, t0)
	c2.unload(k)
	j = c2.handoff(k)
	if !c2.revive(k) || k.evicting || c2.lru.Len() != 1 {
		t.Error("revive of a key being unloaded")
	}
	if next := c2.landed(k, j, Saved, t0); next != nextNone {
		t.Errorf("landed after revive: %v", next)
	}
	// Unloaded while dirty and the save fails: saved again.
	c2.applied(k, 1, t0)
	c2.unload(k)
	j = c2.handoff(k)
	if next := c2.landed(k, j, Failed, t0); next != nextSave {
		t.Errorf("failed save while unloading: %v, want save", next)
	}
}

func TestCoreResetAndExpire(t *testing.T) {
	c := newTestCore(Policy{EveryMessages: -1, Every: -1})
	deliver(c, 5, 6)
	k := &keyState{key: "a", lastSeq: 4}
	c.add(k)
	c.reset(k, t0)
	if !k.dirty || k.dirtySeq != 4 {
		t.Errorf("reset: %+v", k)
	}
	if cp := c.track.Checkpoint(); cp != 4 {
		t.Errorf("checkpoint %d after a reset, want 4 (the reset state is not saved yet)", cp)
	}
	// A block of 7 (a message that never comes back) makes 8 wait until
	// it expires.
	c.block("a", 7, t0)
	if w, _ := c.waits("a", 8, t0.Add(time.Second)); !w {
		t.Fatal("8 must wait for the unapplied 7")
	}
	if x := c.expire(t0.Add(30*time.Second), time.Minute); len(x) != 0 {
		t.Errorf("expired too early: %v", x)
	}
	x := c.expire(t0.Add(2*time.Minute), time.Minute)
	if len(x) != 2 || c.blocked["a"] != nil {
		t.Fatalf("expire: %+v, blocked %v", x, c.blocked)
	}
	j := c.handoff(k)
	c.landed(k, j, Saved, t0)
	c.track.Release(5)
	c.track.Release(6)
	if cp := c.track.Checkpoint(); cp != 7 {
		t.Errorf("checkpoint %d after the expiry, want 7 (nothing held; 6 is the highest delivered)", cp)
	}
}

// TestCoreExpireMany expires three blocks of one key in one call: each is
// reported once and none is left behind.
func TestCoreExpireMany(t *testing.T) {
	c := newTestCore(Policy{EveryMessages: -1, Every: -1})
	for _, s := range []uint64{3, 5, 9} {
		c.block("a", s, t0)
	}
	x := c.expire(t0.Add(2*time.Minute), time.Minute)
	var seqs []uint64
	for _, e := range x {
		seqs = append(seqs, e.seq)
	}
	slices.Sort(seqs)
	if !slices.Equal(seqs, []uint64{3, 5, 9}) || len(c.blocked) != 0 {
		t.Errorf("expired %v, left %v; want [3 5 9] once each and nothing left", seqs, c.blocked)
	}
}
