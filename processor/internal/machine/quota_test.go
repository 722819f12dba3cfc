package machine

import "testing"

// TestMachineReviveKeepsQuota: a key brought back while its unloading save
// is in flight makes one too many live keys; the least recently used one
// is unloaded at once (issue 30: a round over more keys than the quota
// otherwise revived every key and held them all).
func TestMachineReviveKeepsQuota(t *testing.T) {
	m := newTM(Config{Policy: noSnap, OnShutdown: true, Quota: 2, Slots: 4, Window: 8})
	for i, k := range []string{"a", "b"} {
		seq := uint64(i + 1)
		m.core.track.Deliver(seq)
		expect(t, m, t0, Delivered[uint64]{Msg: seq, Key: k, Seq: seq}, "load "+k)
		expect(t, m, t0, Loaded{Key: k}, "live "+k+" +1", "apply "+k+" "+string(rune('0'+seq)))
		expect(t, m, t0, Applied[string]{Key: k, Changed: true, Result: "ok"}, "ack "+k+" "+string(rune('0'+seq))+" ok")
	}
	// c unloads a (dirty: its save goes out).
	m.core.track.Deliver(3)
	expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "c", Seq: 3}, "live a -1", "snapshot a last=1 held=false", "load c")
	expect(t, m, t0, Loaded{Key: "c"}, "live c +1", "apply c 3")
	expect(t, m, t0, Applied[string]{Key: "c", Changed: true, Result: "ok"}, "ack c 3 ok")
	// a comes back before its save landed: b, the least recently used, goes.
	m.core.track.Deliver(4)
	expect(t, m, t0, Delivered[uint64]{Msg: 4, Key: "a", Seq: 4}, "live a +1", "live b -1", "snapshot b last=2 held=false", "apply a 4")
	if n := m.core.lru.Len(); n != 2 {
		t.Fatalf("%d live keys after a came back, want the quota 2", n)
	}
	// With no snapshot slot free, the victim is saved as soon as one is.
	m2 := newTM(Config{Policy: noSnap, OnShutdown: true, Quota: 1, Slots: 1, Window: 8})
	m2.core.track.Deliver(1)
	expect(t, m2, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
	expect(t, m2, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m2, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 1 ok")
	m2.core.track.Deliver(2)
	rd := expect(t, m2, t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}, "live a -1", "snapshot a last=1 held=false", "load b")
	ja := rd.Actions[1].Job
	expect(t, m2, t0, Loaded{Key: "b"}, "live b +1", "apply b 2")
	expect(t, m2, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 2 ok")
	m2.core.track.Deliver(3)
	expect(t, m2, t0, Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, "live a +1", "live b -1", "apply a 3")
	// a's first save lands: the slot goes to b, which is dropped once saved.
	rd = expect(t, m2, t0, SaveLanded{Key: "a", Job: ja, Outcome: Saved}, "snapshot b last=2 held=false")
	expect(t, m2, t0, SaveLanded{Key: "b", Job: rd.Actions[0].Job, Outcome: Saved}, "unload b")
	if cp := m2.core.track.Checkpoint(); cp != 3 {
		t.Errorf("checkpoint %d, want 3 (a's message 3 unsaved)", cp)
	}
}
