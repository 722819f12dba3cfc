package machine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// asyncCfg is a machine whose loads do not stall it: two in flight, six
// inputs parked at most.
var asyncCfg = Config{Policy: noSnap, OnShutdown: true, Quota: 8, Slots: 2, Window: 16, Loads: 2, Parked: 6,
	SlotWait: time.Second, BlockTTL: time.Hour}

// deliver steps m with message seq of key (the consume callback's
// Deliver first) and checks the actions.
func deliverExpect(t *testing.T, m *tm, key string, seq uint64, want ...string) {
	t.Helper()
	m.core.track.Deliver(seq)
	expect(t, m, t0, Delivered[uint64]{Msg: seq, Key: key, Seq: seq}, want...)
}

// TestMachineLoadDoesNotStall: while a key's load is outstanding the
// machine takes the worker's other input — a loaded key applies, another
// missing key loads (up to Loads at once, the next waits its turn) — and
// the loading key's later messages wait behind it and apply in order
// once it is loaded, before any new input.
func TestMachineLoadDoesNotStall(t *testing.T) {
	m := newTM(asyncCfg)
	deliverExpect(t, m, "d", 1, "load d")
	expect(t, m, t0, Loaded{Key: "d"}, "live d +1", "apply d 1")
	expect(t, m, t0, Applied[string]{Key: "d", Changed: true, Result: "ok"}, "ack d 1 ok")

	deliverExpect(t, m, "a", 2, "load a")
	if !m.Accepting() {
		t.Fatal("not accepting while a key loads")
	}
	// d is loaded: it applies while a's load is outstanding.
	deliverExpect(t, m, "d", 3, "apply d 3")
	expect(t, m, t0, Applied[string]{Key: "d", Changed: true, Result: "ok"}, "ack d 3 ok")
	// a's next message waits behind its load.
	deliverExpect(t, m, "a", 4)
	deliverExpect(t, m, "e", 5, "load e")
	// Two loads in flight: f's waits its turn, and f's next message behind it.
	deliverExpect(t, m, "f", 6)
	deliverExpect(t, m, "f", 7)
	if loads, parked := m.Loading(); loads != 2 || parked != 5 {
		t.Fatalf("loading %d, parked %d; want 2 and 5", loads, parked)
	}
	deliverExpect(t, m, "d", 8, "apply d 8")
	expect(t, m, t0, Applied[string]{Key: "d", Changed: true, Result: "ok"}, "ack d 8 ok")
	// e answers first (loads end in any order).
	// f's load starts once the backlog is taken (e's message in progress).
	expect(t, m, t0, Loaded{Key: "e"}, "live e +1", "apply e 5", "load f")
	expect(t, m, t0, Applied[string]{Key: "e", Changed: true, Result: "ok"}, "ack e 5 ok")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 2")
	if m.Accepting() {
		t.Fatal("accepting while a's parked message waits")
	}
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 2 ok", "apply a 4")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 4 ok")
	expect(t, m, t0, Loaded{Key: "f"}, "live f +1", "apply f 6")
	expect(t, m, t0, Applied[string]{Key: "f", Changed: true, Result: "ok"}, "ack f 6 ok", "apply f 7")
	expect(t, m, t0, Applied[string]{Key: "f", Changed: true, Result: "ok"}, "ack f 7 ok")
	if loads, parked := m.Loading(); loads != 0 || parked != 0 || !m.Accepting() {
		t.Fatalf("loading %d, parked %d, accepting %v after every load answered", loads, parked, m.Accepting())
	}
}

// TestMachineParkedBound: the inputs waiting for loads are at most
// Parked; then the input stops until a load answers. With Parked ≤ 1 the
// input stops while any key loads (the synchronous behaviour).
func TestMachineParkedBound(t *testing.T) {
	cfg := asyncCfg
	cfg.Parked = 3
	m := newTM(cfg)
	deliverExpect(t, m, "a", 1, "load a")
	deliverExpect(t, m, "a", 2)
	deliverExpect(t, m, "b", 3, "load b")
	if m.Accepting() {
		t.Fatal("accepting with Parked inputs waiting")
	}
	if err := m.Step(t0, Delivered[uint64]{Msg: 4, Key: "c", Seq: 4}); err == nil {
		t.Fatal("a delivery past Parked was accepted")
	}
	expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 3")
	expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 3 ok")
	if !m.Accepting() {
		t.Fatal("not accepting after a load answered")
	}

	sync := newTM(Config{Policy: noSnap, Quota: 8, Slots: 2, Window: 16, Loads: 4})
	deliverExpect(t, sync, "a", 1, "load a")
	if sync.Accepting() {
		t.Fatal("Parked 0: accepting while a key loads")
	}
}

// TestMachineLoadFailParked: a load that fails refuses the message that
// asked for it; after a transient failure the key's parked messages wait
// for it (nak'ed, blocked), after bad input (a corrupt snapshot, say) each
// is taken again and loads the key for itself; a parked request is
// answered.
func TestMachineLoadFailParked(t *testing.T) {
	m := newTM(asyncCfg)
	deliverExpect(t, m, "a", 1, "load a")
	deliverExpect(t, m, "a", 2)
	expect(t, m, t0, Request{Key: "a", Ref: "r"})
	rd := expect(t, m, t0, Loaded{Key: "a", Fail: &Fail{Disp: Nak, Err: errors.New("kv timeout")}},
		"nak a 1", "nak a 2", "load a")
	if !errors.Is(rd.Actions[1].Err, ErrWaiting) {
		t.Errorf("2 nak'ed with %v, want ErrWaiting", rd.Actions[1].Err)
	}
	expect(t, m, t0, Loaded{Key: "a", Fail: &Fail{Disp: Nak, Err: errors.New("kv timeout")}}, "serve a")
	// 1 comes back: the key is loaded to know whether 1 is applied.
	deliverExpect(t, m, "a", 1, "load a")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 1 ok")
	deliverExpect(t, m, "a", 2, "apply a 2")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 2 ok")

	bad := &Fail{Disp: Reject, Err: errors.New("corrupt snapshot")}
	deliverExpect(t, m, "b", 3, "load b")
	deliverExpect(t, m, "b", 4)
	// The worker dead-letters before it steps anything else, and b's next
	// load waits for the letter: a load may unload keys, saving them.
	expect(t, m, t0, Loaded{Key: "b", Fail: bad}, "reject b 3")
	expect(t, m, t0, DeadLettered{Key: "b", Seq: 3}, "load b")
	expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 4")
}

// TestMachineLoadFence: once the fence is lost no load starts; the
// inputs of loads not started go back at once, those of a load in flight
// when it answers; a load that answers after the fence applies nothing.
func TestMachineLoadFence(t *testing.T) {
	cfg := asyncCfg
	cfg.Loads = 1
	m := newTM(cfg)
	deliverExpect(t, m, "a", 1, "load a")
	deliverExpect(t, m, "a", 2)
	deliverExpect(t, m, "b", 3) // waits its turn: one load at a time
	expect(t, m, t0, Request{Key: "c", Ref: "r"})
	rd := expect(t, m, t0, FenceLost{}, "nak b 3", "serve c")
	if !errors.Is(rd.Actions[0].Err, ErrFenced) || !errors.Is(rd.Actions[1].Err, ErrFenced) {
		t.Errorf("refused with %v, %v; want ErrFenced", rd.Actions[0].Err, rd.Actions[1].Err)
	}
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "nak a 1", "nak a 2")
	if m.core.track.Checkpoint() != 1 {
		t.Errorf("checkpoint %d, want 1: nothing settled", m.core.track.Checkpoint())
	}
	expect(t, m, t0, Close{Deadline: t0}, "finished pending=0")
}

// TestMachineLoadWaitsForSlot: a load that must unload a dirty key with
// no snapshot slot free waits for one (the loads behind it wait too),
// while loaded keys go on; past SlotWait its inputs come back.
func TestMachineLoadWaitsForSlot(t *testing.T) {
	cfg := asyncCfg
	cfg.Quota, cfg.Slots = 2, 1
	m := newTM(cfg)
	deliverExpect(t, m, "a", 1, "load a")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 1 ok")
	deliverExpect(t, m, "b", 2, "load b")
	expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 2")
	expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 2 ok")
	rd := expect(t, m, t0, SaveNow{Key: "b"}, "snapshot b last=2 held=false") // the one slot
	job := rd.Actions[0].Job
	deliverExpect(t, m, "c", 3, "live a -1") // a is dirty: its save waits for the slot, and c for it
	deliverExpect(t, m, "b", 4, "apply b 4")
	expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 4 ok")
	if w := m.Wake(); !w.Equal(t0.Add(time.Second)) {
		t.Errorf("wake %v, want the slot wait's deadline", w)
	}
	expect(t, m, t0, SaveLanded{Key: "b", Job: job, Outcome: Saved}, "snapshot a last=1 held=false", "load c")
	expect(t, m, t0, Loaded{Key: "c"}, "live c +1", "apply c 3")
	expect(t, m, t0, Applied[string]{Key: "c", Changed: true, Result: "ok"}, "ack c 3 ok")

	// Past SlotWait: the waiting load's inputs come back.
	m2 := newTM(cfg)
	deliverExpect(t, m2, "a", 1, "load a")
	expect(t, m2, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m2, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 1 ok")
	deliverExpect(t, m2, "b", 2, "load b")
	expect(t, m2, t0, Loaded{Key: "b"}, "live b +1", "apply b 2")
	expect(t, m2, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 2 ok")
	expect(t, m2, t0, SaveNow{Key: "b"}, "snapshot b last=2 held=false")
	deliverExpect(t, m2, "c", 3, "live a -1")
	deliverExpect(t, m2, "c", 5)
	rd = expect(t, m2, t0.Add(2*time.Second), Tick{}, "nak c 3", "nak c 5")
	if !errors.Is(rd.Actions[0].Err, ErrStalled) || !errors.Is(rd.Actions[1].Err, ErrWaiting) {
		t.Errorf("nak'ed with %v and %v, want ErrStalled and ErrWaiting", rd.Actions[0].Err, rd.Actions[1].Err)
	}
}

// TestMachineLoadsRandom drives machines with loads answered late and in
// any order (some failing), inputs redelivered after naks, keys unloaded
// under a small quota: every message is applied exactly once and acked,
// each key's messages apply in sequence order, at most Loads load at
// once, and the quota holds.
func TestMachineLoadsRandom(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		if err := loadsRun(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

var loadsTrace func(string)

func loadsRun(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x10ad))
	cfg := Config{Policy: Policy{EveryMessages: 1 + rng.IntN(4), Every: -1}, OnShutdown: true,
		Quota: 1 + rng.IntN(4), Slots: 1 + rng.IntN(2), Window: 2 + rng.IntN(6), SlotWait: time.Second, BlockTTL: time.Hour,
		Loads: 1 + rng.IntN(4), Parked: rng.IntN(8)}
	m := newTM(cfg)
	track := m.core.track
	keys := []string{"a", "b", "c", "d", "e"}
	const n = 60
	keyOf := map[uint64]string{}
	var queue []uint64 // deliveries; a nak'ed one comes back at the end
	for seq := uint64(1); seq <= n; seq++ {
		keyOf[seq] = keys[rng.IntN(len(keys))]
		queue = append(queue, seq)
	}
	store := map[string]uint64{} // key → last seq saved
	applied := map[string]uint64{}
	loadsOut := []string{}
	var saves []Job
	saveKey := map[uint64]string{}
	acked := map[uint64]bool{}
	live := 0
	now := t0
	exec := func() error {
		for m.HasReady() {
			rd := m.Ready()
			if loadsTrace != nil {
				loadsTrace(fmt.Sprint(kinds(rd)))
			}
			for _, a := range rd.Actions {
				switch a.Kind {
				case ActLoad:
					if slices.Contains(loadsOut, a.Key) {
						return fmt.Errorf("key %s loaded twice at once", a.Key)
					}
					loadsOut = append(loadsOut, a.Key)
					if len(loadsOut) > max(1, cfg.Loads) {
						return fmt.Errorf("%d loads in flight, Loads %d", len(loadsOut), cfg.Loads)
					}
				case ActApply:
					if keyOf[a.Msg] != a.Key {
						return fmt.Errorf("apply %d to key %s", a.Msg, a.Key)
					}
					if a.Msg <= applied[a.Key] {
						return fmt.Errorf("key %s: %d applied after %d", a.Key, a.Msg, applied[a.Key])
					}
					for s := applied[a.Key] + 1; s < a.Msg; s++ {
						if keyOf[s] == a.Key {
							return fmt.Errorf("key %s: %d applied before %d", a.Key, a.Msg, s)
						}
					}
					applied[a.Key] = a.Msg
					if err := m.Step(now, Applied[string]{Key: a.Key, Changed: true, Result: "ok"}); err != nil {
						return err
					}
				case ActAck:
					if acked[a.Msg] {
						return fmt.Errorf("%d acked twice", a.Msg)
					}
					acked[a.Msg] = true
				case ActNak:
					queue = append(queue, a.Msg)
				case ActSnapshot, ActSaveHeld:
					saves = append(saves, a.Job)
					saveKey[a.Job.ID] = a.Key
				case ActLive:
					live += a.Delta
				case ActUnload:
					// The learner goes: its next load reads the store.
					applied[a.Key] = store[a.Key]
				case ActReject, ActFatal:
					return fmt.Errorf("unexpected %v", kinds(Ready[uint64, string]{Actions: []Action[uint64, string]{a}}))
				}
			}
			m.Advance(rd)
			// A key brought back counts before the one it unloads.
			if live > cfg.Quota {
				return fmt.Errorf("%d keys live, quota %d", live, cfg.Quota)
			}
		}
		return nil
	}
	for events := 0; len(acked) < n; events++ {
		if events > 20000 {
			return fmt.Errorf("stuck: %d of %d acked, loads %v, queue %v", len(acked), n, loadsOut, queue)
		}
		var ev Event
		switch r := rng.IntN(10); {
		case len(loadsOut) > 0 && r < 3:
			i := rng.IntN(len(loadsOut))
			k := loadsOut[i]
			loadsOut = slices.Delete(loadsOut, i, i+1)
			if rng.IntN(6) == 0 {
				ev = Loaded{Key: k, Fail: &Fail{Disp: Nak, Err: errors.New("kv timeout")}}
			} else {
				applied[k] = store[k]
				ev = Loaded{Key: k, LastSeq: store[k]}
			}
		case len(saves) > 0 && r < 5:
			j := saves[0]
			saves = saves[1:]
			store[saveKey[j.ID]] = max(store[saveKey[j.ID]], j.LastSeq)
			ev = SaveLanded{Key: saveKey[j.ID], Job: j, Outcome: Saved}
		case len(queue) > 0 && m.Accepting():
			seq := queue[0]
			queue = queue[1:]
			track.Deliver(seq)
			ev = Delivered[uint64]{Msg: seq, Key: keyOf[seq], Seq: seq}
		default:
			now = now.Add(100 * time.Millisecond)
			ev = Tick{}
		}
		if loadsTrace != nil {
			loadsTrace(fmt.Sprintf("%T %+v", ev, ev))
		}
		if err := m.Step(now, ev); err != nil {
			return err
		}
		if err := exec(); err != nil {
			return err
		}
	}
	if cp := track.Checkpoint(); cp > n+1 {
		return fmt.Errorf("checkpoint %d past the stream", cp)
	}
	return nil
}
