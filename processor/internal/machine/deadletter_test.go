package machine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestDeadLetterHold: a dead letter's input keeps its delivery hold until
// the dead letter has landed (issue 28). Released when the Reject was
// emitted, a renewal could write a checkpoint past the input while its
// dead letter was still in flight; a crash, or a fence that stopped the
// dead letter, then left the input neither dead-lettered nor retried.
func TestDeadLetterHold(t *testing.T) {
	bad := &Fail{Disp: Reject, Err: errors.New("malformed")}
	cfg := Config{Policy: noSnap, OnShutdown: true, Quota: 2, Slots: 1, Window: 4}
	checkpoint := func(t *testing.T, m *tm, want uint64, when string) {
		t.Helper()
		if cp := m.core.track.Checkpoint(); cp != want {
			t.Fatalf("checkpoint %d %s, want %d", cp, when, want)
		}
	}

	t.Run("landed", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(1)
		expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1, Fail: bad}, "reject a 1")
		checkpoint(t, m, 1, "while the dead letter is in flight")
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 1})
		checkpoint(t, m, 2, "once the dead letter landed")
	})

	t.Run("fenced", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(1)
		expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1, Fail: bad}, "reject a 1")
		// The worker's last-moment reading finds the fence lost between
		// two attempts: it tells the machine, then answers.
		expect(t, m, t0, FenceLost{})
		rd := expect(t, m, t0, DeadLetterFailed{Key: "a", Seq: 1, Err: ErrFenced}, "nak a 1")
		if !errors.Is(rd.Actions[0].Err, ErrFenced) {
			t.Errorf("nak with %v, want ErrFenced", rd.Actions[0].Err)
		}
		checkpoint(t, m, 1, "after the dead letter failed (the input goes back)")
	})

	t.Run("failed, then again", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(1)
		m.core.track.Deliver(2)
		expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1, Fail: bad}, "reject a 1")
		expect(t, m, t0, DeadLetterFailed{Key: "a", Seq: 1, Err: errors.New("context canceled")}, "nak a 1")
		// As after any nak, the key's later messages wait for it.
		m.core.track.Deliver(3)
		rd := expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, "nak a 3")
		if !errors.Is(rd.Actions[0].Err, ErrWaiting) {
			t.Errorf("3 nak'ed with %v, want ErrWaiting", rd.Actions[0].Err)
		}
		expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}, "load b")
		expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 2")
		expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 2 ok")
		checkpoint(t, m, 1, "with 1 nak'ed (b's 2 is held as dirty, 1 as delivered)")
		m.core.track.Deliver(1) // redelivered
		expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1, Fail: bad}, "reject a 1")
		checkpoint(t, m, 1, "while the second dead letter is in flight")
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 1})
		checkpoint(t, m, 2, "once it landed (b's 2 still dirty)")
		m.core.track.Deliver(3) // redelivered: no longer waits
		expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, "load a")
	})

	t.Run("numerical failure of a loaded key", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(1)
		m.core.track.Deliver(2)
		expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "b", Seq: 1}, "load b")
		expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 1")
		expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Outs: outs("b", 1, 1), Result: "ok"}, "publish b/1/0")
		expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "load a")
		expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 2")
		expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Fail: bad}, "reject a 2")
		// A publish executed before the Reject (later in the Ready that
		// held the Apply) is answered meanwhile.
		expect(t, m, t0, Published{Key: "b"}, "ack b 1 ok")
		// Nothing else moves on while the dead letter is in flight: not
		// the next message (of the key or another), not a tick or a
		// save (a snapshot of a would hold 2, and a replay would skip
		// it).
		for _, ev := range []Event{Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, Tick{}, SaveNow{Key: "a"}, Reset{Key: "a"},
			Close{Deadline: t0.Add(time.Second)}, DeadLettered{Key: "a", Seq: 3}, DeadLetterFailed{Key: "b", Seq: 2}} {
			if err := m.Step(t0, ev); err == nil {
				t.Errorf("%T %+v stepped while the dead letter is in flight", ev, ev)
			}
		}
		if m.HasReady() {
			t.Fatalf("refused steps emitted %q", kinds(m.Ready()))
		}
		checkpoint(t, m, 1, "with b dirty and a's dead letter in flight")
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 2})
		expect(t, m, t0, SaveNow{Key: "b"}, "snapshot b last=1 held=false")
		checkpoint(t, m, 1, "with b's save in flight")
	})

	t.Run("close waits for the dead letter", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(1)
		expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
		expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
		expect(t, m, t0, Close{Deadline: t0.Add(time.Second)})
		expect(t, m, t0, Applied[string]{Key: "a", Fail: &Fail{Disp: Reject, Err: errors.New("dimension")}}, "reject a 1")
		if m.Done() {
			t.Fatal("finished with a dead letter in flight")
		}
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 1}, "finished pending=0")
	})

	t.Run("unasked", func(t *testing.T) {
		m := newTM(cfg)
		if err := m.Step(t0, DeadLettered{Key: "a", Seq: 1}); err == nil {
			t.Error("an unasked dead letter answer was accepted")
		}
	})
}

// TestDeadLetterRedelivered: a redelivery of an input whose dead letter
// this machine stored (its dead letter retried past ack_wait, or its
// termination was lost) is settled at once, without loading its key or
// dead-lettering it again. Before, the duplicate of a message rejected by
// the learner (its key's state never holds it: LastSeq stays below it)
// whose key then failed to load blocked the key on it — a block no
// reload clears, for a message the server, which terminated it, never
// sends again: the key's later messages waited BlockTTL (sim seed 144421
// on older code).
func TestDeadLetterRedelivered(t *testing.T) {
	bad := &Fail{Disp: Reject, Err: errors.New("malformed")}
	timeout := &Fail{Disp: Nak, Err: errors.New("load: context deadline exceeded")}
	cfg := Config{Policy: noSnap, OnShutdown: true, Quota: 1, Slots: 1, Window: 4, Loads: 2, Parked: 4, BlockTTL: time.Minute}

	// rejected has a's 21 rejected by the learner and its dead letter
	// stored while a second delivery of 21 came (the tracker holds it).
	rejected := func(t *testing.T) *tm {
		m := newTM(cfg)
		m.core.track.Deliver(21)
		expect(t, m, t0, Delivered[uint64]{Msg: 21, Key: "a", Seq: 21}, "load a")
		expect(t, m, t0, Loaded{Key: "a", LastSeq: 9}, "live a +1", "apply a 21")
		expect(t, m, t0, Applied[string]{Key: "a", Fail: bad}, "reject a 21")
		m.core.track.Deliver(21) // redelivered: ack_wait passed while the dead letter was retried
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 21})
		return m
	}

	t.Run("key unloaded, its load would fail", func(t *testing.T) {
		m := rejected(t)
		m.core.track.Deliver(22)
		expect(t, m, t0, Delivered[uint64]{Msg: 22, Key: "b", Seq: 22}, "live a -1", "unload a", "load b")
		expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 22")
		expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 22 ok")
		// The duplicate: no load of a (which would time out and block a
		// on 21), no second dead letter.
		rd := expect(t, m, t0.Add(time.Second), Delivered[uint64]{Msg: 21, Key: "a", Seq: 21}, "ack a 21 skipped")
		if rd.Actions[0].Seq != 21 {
			t.Errorf("ack of seq %d, want 21", rd.Actions[0].Seq)
		}
		m.core.track.Deliver(23)
		expect(t, m, t0.Add(time.Second), Delivered[uint64]{Msg: 23, Key: "a", Seq: 23}, "live b -1", "snapshot b last=22 held=false", "load a")
		expect(t, m, t0.Add(time.Second), Loaded{Key: "a", LastSeq: 9}, "live a +1", "apply a 23")
		expect(t, m, t0.Add(time.Second), Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 23 ok")
		if cp := m.core.track.Checkpoint(); cp != 22 {
			t.Errorf("checkpoint %d, want 22 (b's 22 and a's 23 unsaved, 21 settled twice)", cp)
		}
	})

	t.Run("its load fails after all", func(t *testing.T) {
		// What main did: were the duplicate taken, a's load failing for it
		// blocks a on 21 for good (the server never sends 21 again).
		m := rejected(t)
		m.core.track.Deliver(22)
		expect(t, m, t0, Delivered[uint64]{Msg: 22, Key: "b", Seq: 22}, "live a -1", "unload a", "load b")
		expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 22")
		expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 22 ok")
		if err := m.Step(t0, Delivered[uint64]{Msg: 21, Key: "a", Seq: 21}); err != nil {
			t.Fatal(err)
		}
		got := kinds(m.Ready())
		if slices.Contains(got, "load a") {
			expect(t, m, t0, Loaded{Key: "a", Fail: timeout}, "nak a 21")
		} else if !slices.Equal(got, []string{"ack a 21 skipped"}) {
			t.Fatalf("duplicate of 21: %q", got)
		}
		// Whatever happened to the duplicate, a's next message is applied
		// well before BlockTTL.
		m.core.track.Deliver(23)
		now := t0.Add(2 * time.Second)
		if err := m.Step(now, Delivered[uint64]{Msg: 23, Key: "a", Seq: 23}); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			rd := m.Ready()
			var next Event
			for _, a := range rd.Actions {
				switch a.Kind {
				case ActLoad:
					next = Loaded{Key: a.Key, LastSeq: 9}
				case ActApply:
					m.Advance(rd)
					return
				case ActNak:
					t.Fatalf("a's 23 nak'ed (%v): a waits for 21, which never comes back", a.Err)
				}
			}
			m.Advance(rd)
			if next == nil {
				t.Fatalf("a's 23 neither applied nor loading: %q", kinds(rd))
			}
			if err := m.Step(now, next); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatal("a's 23 not applied")
	})

	t.Run("parked behind its key's load", func(t *testing.T) {
		m := newTM(cfg)
		for _, s := range []uint64{21, 21} {
			m.core.track.Deliver(s)
		}
		expect(t, m, t0, Delivered[uint64]{Msg: 21, Key: "a", Seq: 21}, "load a")
		expect(t, m, t0, Delivered[uint64]{Msg: 21, Key: "a", Seq: 21})
		expect(t, m, t0, Loaded{Key: "a", LastSeq: 9}, "live a +1", "apply a 21")
		expect(t, m, t0, Applied[string]{Key: "a", Fail: bad}, "reject a 21")
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 21}, "ack a 21 skipped")
		if cp := m.core.track.Checkpoint(); cp != 22 {
			t.Errorf("checkpoint %d, want 22", cp)
		}
	})

	t.Run("refused at decoding", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(5)
		expect(t, m, t0, Delivered[uint64]{Msg: 5, Key: "a", Seq: 5, Fail: bad}, "reject a 5")
		expect(t, m, t0, DeadLettered{Key: "a", Seq: 5})
		m.core.track.Deliver(5)
		expect(t, m, t0, Delivered[uint64]{Msg: 5, Key: "a", Seq: 5, Fail: bad}, "ack a 5 skipped")
	})

	t.Run("not stored: dead-lettered again", func(t *testing.T) {
		m := newTM(cfg)
		m.core.track.Deliver(5)
		expect(t, m, t0, Delivered[uint64]{Msg: 5, Key: "a", Seq: 5, Fail: bad}, "reject a 5")
		expect(t, m, t0, DeadLetterFailed{Key: "a", Seq: 5, Err: errors.New("context canceled")}, "nak a 5")
		m.core.track.Deliver(5)
		expect(t, m, t0, Delivered[uint64]{Msg: 5, Key: "a", Seq: 5, Fail: bad}, "reject a 5")
	})

	t.Run("fenced: given back", func(t *testing.T) {
		m := rejected(t)
		expect(t, m, t0, FenceLost{})
		expect(t, m, t0, Delivered[uint64]{Msg: 21, Key: "a", Seq: 21}, "nak a 21")
	})
}

// TestDeadLettersRemembered: the stored dead letters remembered are the
// last Config.Letters, oldest forgotten first; a copy of one forgotten is
// taken as any input (here: dead-lettered again).
func TestDeadLettersRemembered(t *testing.T) {
	bad := &Fail{Disp: Reject, Err: errors.New("malformed")}
	m := newTM(Config{Policy: noSnap, Quota: 2, Slots: 1, Window: 4, Letters: 2})
	for _, s := range []uint64{1, 2, 3} {
		m.core.track.Deliver(s)
		expect(t, m, t0, Delivered[uint64]{Msg: s, Key: "a", Seq: s, Fail: bad}, fmt.Sprintf("reject a %d", s))
		expect(t, m, t0, DeadLettered{Key: "a", Seq: s})
	}
	for _, s := range []uint64{3, 2} {
		m.core.track.Deliver(s)
		expect(t, m, t0, Delivered[uint64]{Msg: s, Key: "a", Seq: s, Fail: bad}, fmt.Sprintf("ack a %d skipped", s))
	}
	m.core.track.Deliver(1)
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1, Fail: bad}, "reject a 1")
	expect(t, m, t0, DeadLettered{Key: "a", Seq: 1})
	// Another key's input of the same sequence is not a copy.
	m.core.track.Deliver(1)
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "b", Seq: 1}, "load b")
	if cp := m.core.track.Checkpoint(); cp != 1 {
		t.Errorf("checkpoint %d, want 1", cp)
	}
}
