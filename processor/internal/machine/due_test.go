package machine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// dirtyKey delivers message seq of key at now, loads the key if asked and
// applies the message (changed, one ack); it expects no snapshot.
func dirtyKey(t *testing.T, m *tm, now time.Time, key string, seq uint64) {
	t.Helper()
	m.core.track.Deliver(seq)
	if err := m.Step(now, Delivered[uint64]{Msg: seq, Key: key, Seq: seq}); err != nil {
		t.Fatal(err)
	}
	for m.HasReady() {
		rd := m.Ready()
		acts := slices.Clone(rd.Actions)
		m.Advance(rd)
		for _, a := range acts {
			var err error
			switch a.Kind {
			case ActLoad:
				err = m.Step(now, Loaded{Key: a.Key})
			case ActApply:
				err = m.Step(now, Applied[string]{Key: a.Key, Changed: true, Result: "ok"})
			case ActAck, ActLive:
			default:
				t.Fatalf("message %d of %s: unexpected %v", seq, key, kinds(Ready[uint64, string]{Actions: []Action[uint64, string]{a}}))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestDueByTime: a key dirty for Every is handed over by the first tick
// at or after that time, earliest first, as many as slots are free; a
// landing hands the slot it frees to the next key due; a key that
// changes while its save is in flight is due Every after that change.
func TestDueByTime(t *testing.T) {
	m := newTM(Config{Policy: Policy{EveryMessages: -1, Every: 5 * time.Second}, Quota: 8, Slots: 1, Window: 8})
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	dirtyKey(t, m, sec(2), "c", 1) // c changes last but loads first: the order is the change's, not the load's
	dirtyKey(t, m, sec(0), "a", 2)
	dirtyKey(t, m, sec(1), "b", 3)
	if len(m.dues) != 3 {
		t.Fatalf("%d keys scheduled, want 3", len(m.dues))
	}
	expect(t, m, sec(4.9), Tick{})
	ja := expect(t, m, sec(5), Tick{}, "snapshot a last=2 held=false").Actions[0].Job
	expect(t, m, sec(6.5), Tick{})   // b is due, the slot is a's
	dirtyKey(t, m, sec(6.5), "a", 4) // a changes while its save is in flight
	jb := expect(t, m, sec(6.5), SaveLanded{Key: "a", Job: ja, Outcome: Saved}, "snapshot b last=3 held=false").Actions[0].Job
	jc := expect(t, m, sec(7), SaveLanded{Key: "b", Job: jb, Outcome: Saved}, "snapshot c last=1 held=false").Actions[0].Job
	expect(t, m, sec(7), SaveLanded{Key: "c", Job: jc, Outcome: Saved}) // a is not due before 11.5
	expect(t, m, sec(11.4), Tick{})
	expect(t, m, sec(11.5), Tick{}, "snapshot a last=4 held=false")
	if len(m.dues) != 0 {
		t.Fatalf("%d keys scheduled with every key saved or saving, want 0", len(m.dues))
	}
}

// TestDueByCount: a key that reached EveryMessages while no slot was free
// goes before every key due by time only, when a slot frees.
func TestDueByCount(t *testing.T) {
	m := newTM(Config{Policy: Policy{EveryMessages: 2, Every: time.Second}, Quota: 8, Slots: 1, Window: 8})
	dirtyKey(t, m, t0, "old", 1)
	jo := expect(t, m, t0.Add(time.Second), Tick{}, "snapshot old last=1 held=false").Actions[0].Job
	dirtyKey(t, m, t0.Add(time.Second), "t", 2)
	dirtyKey(t, m, t0.Add(2*time.Second), "n", 3)
	dirtyKey(t, m, t0.Add(2*time.Second), "n", 4) // due by count, the slot taken
	expect(t, m, t0.Add(3*time.Second), SaveLanded{Key: "old", Job: jo, Outcome: Saved}, "snapshot n last=4 held=false")
}

// TestDueForgottenAndRevived: a key forgotten (a conflicting save) leaves
// the heap; a key unloaded and brought back while its save was in flight
// is scheduled again when that save lands; a key dropped and loaded
// again is a new slot, scheduled by its own change.
func TestDueForgottenAndRevived(t *testing.T) {
	every := Policy{EveryMessages: -1, Every: time.Second}
	m := newTM(Config{Policy: every, Quota: 1, Slots: 4, Window: 8})
	dirtyKey(t, m, t0, "a", 1)
	ja := expect(t, m, t0, SaveNow{Key: "a"}, "snapshot a last=1 held=false").Actions[0].Job
	dirtyKey(t, m, t0, "a", 2) // dirty while saving: out of the heap until the save lands
	if len(m.dues) != 0 {
		t.Fatalf("%d keys scheduled with a's save in flight, want 0", len(m.dues))
	}
	expect(t, m, t0, SaveLanded{Key: "a", Job: ja, Outcome: Conflict}, "live a -1", "unload a")
	if len(m.dues) != 0 {
		t.Fatalf("%d keys scheduled after a was forgotten, want 0", len(m.dues))
	}
	expect(t, m, t0.Add(time.Hour), Tick{})

	// Unloaded dirty (b takes its room) and brought back before its save lands.
	m = newTM(Config{Policy: every, Quota: 1, Slots: 4, Window: 8})
	dirtyKey(t, m, t0, "a", 1)
	m.core.track.Deliver(2)
	ja = expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}, "live a -1", "snapshot a last=1 held=false", "load b").Actions[1].Job
	expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 2")
	expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 2 ok")
	m.core.track.Deliver(3)
	jb := expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, "live a +1", "live b -1", "snapshot b last=2 held=false", "apply a 3").Actions[2].Job
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 3 ok")
	expect(t, m, t0, SaveLanded{Key: "b", Job: jb, Outcome: Saved}, "unload b")
	expect(t, m, t0, SaveLanded{Key: "a", Job: ja, Outcome: Saved})
	if len(m.dues) != 1 || m.dues[0].key != "a" {
		t.Fatalf("heap after a's save landed: %d keys, want a, revived and dirty", len(m.dues))
	}
	expect(t, m, t0.Add(time.Second), Tick{}, "snapshot a last=3 held=false")

	// b was dropped; loaded again, its change schedules the new slot.
	m.core.track.Deliver(4)
	expect(t, m, t0.Add(time.Second), Delivered[uint64]{Msg: 4, Key: "b", Seq: 4}, "live a -1", "load b")
	expect(t, m, t0.Add(time.Second), Loaded{Key: "b"}, "live b +1", "apply b 4")
	expect(t, m, t0.Add(time.Second), Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 4 ok")
	expect(t, m, t0.Add(2*time.Second), Tick{}, "snapshot b last=4 held=false")
}

// checkDues checks the heap against every key known: it holds exactly the
// keys known, dirty, not saving, that a rule can make due (so at most one
// entry per key known), each at the index it records, in heap order.
func checkDues(m *tm) error {
	p := m.cfg.Policy
	n := 0
	for _, s := range m.all {
		byCount := p.EveryMessages > 0 && s.since >= p.EveryMessages
		want := s.dirty && !s.saving && (byCount || p.Every > 0)
		in := s.due.idx >= 0
		if in != want {
			return fmt.Errorf("key %s (dirty %v, saving %v, since %d): in the heap %v, want %v", s.key, s.dirty, s.saving, s.since, in, want)
		}
		if !in {
			continue
		}
		n++
		if i := int(s.due.idx); i >= len(m.dues) || m.dues[i] != s {
			return fmt.Errorf("key %s: heap index %d does not hold it", s.key, i)
		}
		if c := s.due.class == 0; c != byCount {
			return fmt.Errorf("key %s: class %d with since %d", s.key, s.due.class, s.since)
		}
	}
	if n != len(m.dues) {
		return fmt.Errorf("%d keys in the heap, %d of them known and due by a rule", len(m.dues), n)
	}
	for i := 1; i < len(m.dues); i++ {
		if m.before(i, (i-1)/2) {
			return fmt.Errorf("heap order broken at %d", i)
		}
	}
	return nil
}

// TestDueRandom drives machines with random deliveries over more keys
// than the quota (unloads, keys brought back while their save is in
// flight, keys dropped and loaded again), saves landing late and in any
// order (some failing, some conflicting: forgotten keys), resets, save
// requests and ticks, and checks after every event that the heap holds
// exactly the keys it should (checkDues), and after every tick that no key
// known is due by the policy while a snapshot slot is free: a key dirty
// long enough is always handed over.
func TestDueRandom(t *testing.T) {
	for seed := uint64(1); seed <= 1500; seed++ {
		if err := dueRun(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

var dueTrace func(string)

func dueRun(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0xd0e))
	pol := Policy{EveryMessages: -1, Every: time.Duration(1+rng.IntN(5)) * time.Second}
	switch rng.IntN(3) {
	case 0:
		pol.EveryMessages = 1 + rng.IntN(4)
	case 1:
		pol.EveryMessages, pol.Every = 1+rng.IntN(4), -1
	}
	cfg := Config{Policy: pol, Quota: 1 + rng.IntN(6), Slots: 1 + rng.IntN(3), Window: 64, SlotWait: time.Second,
		BlockTTL: time.Hour, Loads: 1 + rng.IntN(3), Parked: rng.IntN(6), OnShutdown: rng.IntN(3) > 0}
	m := newTM(cfg)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	seq := uint64(0)
	var loading []string
	type save struct {
		key string
		job Job
	}
	var saves []save
	type pub struct {
		key string
		ord uint64
	}
	var pubs []pub
	now := t0
	var deadline time.Time // of the Close, once stepped
	exec := func() error {
		for m.HasReady() {
			rd := m.Ready()
			acts := slices.Clone(rd.Actions)
			m.Advance(rd)
			if dueTrace != nil {
				dueTrace(fmt.Sprint("  ", kinds(Ready[uint64, string]{Actions: acts})))
			}
			for _, a := range acts {
				switch a.Kind {
				case ActLoad:
					loading = append(loading, a.Key)
				case ActApply:
					changed := rng.IntN(8) > 0
					var o []string
					if changed && rng.IntN(3) == 0 { // as the worker: outputs only of a message learned
						o = outs(a.Key, a.Msg, 1)
					}
					if err := m.Step(now, Applied[string]{Key: a.Key, Changed: changed, Outs: o, Result: "ok"}); err != nil {
						return err
					}
				case ActPublish:
					pubs = append(pubs, pub{a.Key, a.Ord})
				case ActSnapshot, ActSaveHeld:
					if a.Kind == ActSnapshot && a.Held {
						continue // its SaveHeld comes once its outputs are acknowledged
					}
					saves = append(saves, save{a.Key, a.Job})
				case ActReject, ActFatal:
					return fmt.Errorf("unexpected %v", kinds(Ready[uint64, string]{Actions: []Action[uint64, string]{a}}))
				}
			}
			if err := checkDues(m); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range 600 {
		var ev Event
		switch r := rng.IntN(12); {
		case i == 300:
			deadline = now.Add(time.Hour)
			ev = Close{Deadline: deadline}
		case len(pubs) > 0 && r < 2:
			j := rng.IntN(len(pubs))
			p := pubs[j]
			pubs = slices.Delete(pubs, j, j+1)
			ev = Published{Key: p.key, Ord: p.ord}
		case len(loading) > 0 && r < 3:
			i := rng.IntN(len(loading))
			k := loading[i]
			loading = slices.Delete(loading, i, i+1)
			if rng.IntN(8) == 0 {
				ev = Loaded{Key: k, Fail: &Fail{Disp: Nak, Err: errors.New("kv timeout")}}
			} else {
				ev = Loaded{Key: k}
			}
		case len(saves) > 0 && r < 6:
			i := rng.IntN(len(saves))
			sv := saves[i]
			saves = slices.Delete(saves, i, i+1)
			o := Saved
			switch rng.IntN(10) {
			case 0:
				o = Failed
			case 1:
				// Not while the key has an output in flight: a key forgotten
				// then and loaded again before the answer makes the machine
				// refuse the answer (a protocol error; core NATS only).
				if !slices.ContainsFunc(pubs, func(p pub) bool { return p.key == sv.key }) {
					o = Conflict
				}
			}
			ev = SaveLanded{Key: sv.key, Job: sv.job, Outcome: o}
		case r == 6:
			ev = Reset{Key: keys[rng.IntN(len(keys))]}
		case r == 7:
			ev = SaveNow{Key: keys[rng.IntN(len(keys))]}
		case r < 10 && m.Accepting():
			seq++
			m.core.track.Deliver(seq)
			ev = Delivered[uint64]{Msg: seq, Key: keys[rng.IntN(len(keys))], Seq: seq}
		default:
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			ev = Tick{}
		}
		if dueTrace != nil {
			dueTrace(fmt.Sprintf("%T %+v", ev, ev))
		}
		if err := m.Step(now, ev); err != nil {
			return err
		}
		if err := checkDues(m); err != nil {
			return fmt.Errorf("after %T %+v: %w", ev, ev, err)
		}
		if _, tick := ev.(Tick); tick && m.core.flying < cfg.Slots && !m.closing {
			for _, s := range m.all {
				if m.core.due(s.keyState, now, false, true) {
					return fmt.Errorf("key %s due at %v (changed at %v, %d messages) and not handed over with %d of %d slots taken",
						s.key, now.Sub(t0), s.dirtyAt.Sub(t0), s.since, m.core.flying, cfg.Slots)
				}
			}
		}
		if err := exec(); err != nil {
			return fmt.Errorf("after %T %+v: %w", ev, ev, err)
		}
		if m.Done() && !m.fenced && now.Before(deadline) {
			// The end waited for every output and, with OnShutdown, for
			// every key's last save.
			for _, s := range m.all {
				if len(s.out.groups) > 0 || s.saving && len(s.out.held) > 0 || cfg.OnShutdown && s.dirty {
					return fmt.Errorf("finished after %T with key %s: %d output groups, saving %v (%d held), dirty %v",
						ev, s.key, len(s.out.groups), s.saving, len(s.out.held), s.dirty)
				}
			}
		}
	}
	if !m.Done() && len(loading) == 0 && len(saves) == 0 && len(pubs) == 0 {
		return fmt.Errorf("not finished %v after Close with nothing in flight: %d saves flying, %d held, %d outputs pending",
			now.Sub(t0), m.core.flying, m.heldSaves(), m.win.pending)
	}
	return nil
}
