package machine

import (
	"errors"
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
