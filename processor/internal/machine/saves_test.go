package machine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkSaveLanded is the machine's cost per message with a snapshot
// after every message, over a worker holding 1,000 or 100,000 loaded keys
// (issue 30, "many keys"): a message of a loaded key delivered, applied
// with one output, published and acknowledged, its input acked, its
// snapshot handed over and its SaveLanded stepped. Before the save queue,
// each SaveLanded walked every key the worker knew; the cost per message
// must not grow with the keys held.
//
//	go test ./processor/internal/machine -run '^$' -bench SaveLanded -benchmem
func BenchmarkSaveLanded(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			m := newTM(Config{Policy: Policy{EveryMessages: 1, Every: -1}, Quota: n, Slots: 4, Window: 256})
			keys := make([]string, n)
			outs := make([][]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%d", i)
				outs[i] = []string{keys[i] + "/out"}
			}
			changed := false // the keys load clean: no save while they are brought in
			saves := 0
			drain := func() {
				for m.HasReady() {
					rd := m.Ready()
					for _, a := range rd.Actions {
						switch a.Kind {
						case ActLoad:
							_ = m.Step(t0, Loaded{Key: a.Key})
						case ActApply:
							_ = m.Step(t0, Applied[string]{Key: a.Key, Changed: changed, Outs: outs[a.Msg], Result: "ok"})
						case ActPublish:
							_ = m.Step(t0, Published{Key: a.Key})
						case ActSnapshot, ActSaveHeld:
							if a.Kind == ActSnapshot && a.Held {
								continue // its SaveHeld comes once the output is acknowledged
							}
							saves++
							_ = m.Step(t0, SaveLanded{Key: a.Key, Job: a.Job, Outcome: Saved})
						case ActFatal:
							b.Fatalf("fatal: %v", a.Err)
						}
					}
					m.Advance(rd)
				}
			}
			seq := uint64(0)
			step := func(k int) {
				seq++
				m.core.track.Deliver(seq)
				if err := m.Step(t0, Delivered[uint64]{Msg: uint64(k), Key: keys[k], Seq: seq}); err != nil {
					b.Fatal(err)
				}
				drain()
			}
			for k := range n {
				step(k)
			}
			if got := len(m.keys); got != n {
				b.Fatalf("%d keys loaded, want %d", got, n)
			}
			changed = true
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				step(i % n)
			}
			b.StopTimer()
			if saves != b.N {
				b.Fatalf("%d saves landed for %d messages", saves, b.N)
			}
			if cp, want := m.core.track.Checkpoint(), seq+1; cp != want {
				b.Fatalf("checkpoint %d after every save landed, want %d", cp, want)
			}
		})
	}
}

// TestSaveQueue: the keys asking for a save while no snapshot slot is free
// are handed over as slots free, in the order they asked, each once; a key
// forgotten while it waits leaves the queue, and its key loaded again is
// a new slot that waits on its own.
func TestSaveQueue(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 8, Slots: 1, Window: 8})
	for i, k := range []string{"a", "b", "c", "d"} {
		seq := uint64(i + 1)
		m.core.track.Deliver(seq)
		expect(t, m, t0, Delivered[uint64]{Msg: seq, Key: k, Seq: seq}, "load "+k)
		expect(t, m, t0, Loaded{Key: k}, "live "+k+" +1", fmt.Sprintf("apply %s %d", k, seq))
		expect(t, m, t0, Applied[string]{Key: k, Changed: true, Result: "ok"}, fmt.Sprintf("ack %s %d ok", k, seq))
	}
	job := func(rd Ready[uint64, string]) Job { return rd.Actions[len(rd.Actions)-1].Job } // the snapshot's
	ja := job(expect(t, m, t0, SaveNow{Key: "a"}, "snapshot a last=1 held=false"))
	// The slot is taken: d, c, b wait, in that order, d once.
	for _, k := range []string{"d", "c", "b", "d"} {
		expect(t, m, t0, SaveNow{Key: k})
	}
	if n := len(m.toSave); n != 3 {
		t.Fatalf("%d keys queued, want 3 (d, c, b)", n)
	}
	jd := job(expect(t, m, t0, SaveLanded{Key: "a", Job: ja, Outcome: Saved}, "snapshot d last=4 held=false"))
	// d changes while its save is in flight: it waits again, behind b.
	expect(t, m, t0, Reset{Key: "d"})
	// d's save conflicts: d is forgotten, and the slot goes to c.
	jc := job(expect(t, m, t0, SaveLanded{Key: "d", Job: jd, Outcome: Conflict}, "live d -1", "unload d", "snapshot c last=3 held=false"))
	if n := len(m.toSave); n != 2 {
		t.Fatalf("%d keys queued, want 2 (b, the forgotten d)", n)
	}
	jb := job(expect(t, m, t0, SaveLanded{Key: "c", Job: jc, Outcome: Saved}, "snapshot b last=2 held=false"))
	if n := len(m.toSave); n != 1 {
		t.Fatalf("%d keys queued after b's handoff, want 1 (the forgotten d, until the next landing)", n)
	}
	// d loaded again: a new slot, saved when asked, not for the old one.
	m.core.track.Deliver(5)
	expect(t, m, t0, Delivered[uint64]{Msg: 5, Key: "d", Seq: 5}, "load d")
	expect(t, m, t0, Loaded{Key: "d"}, "live d +1", "apply d 5")
	expect(t, m, t0, Applied[string]{Key: "d", Changed: true, Result: "ok"}, "ack d 5 ok")
	expect(t, m, t0, SaveLanded{Key: "b", Job: jb, Outcome: Saved})
	if n := len(m.toSave); n != 0 {
		t.Fatalf("%d keys queued after b landed, want 0", n)
	}
	jd = job(expect(t, m, t0, SaveNow{Key: "d"}, "snapshot d last=5 held=false"))
	expect(t, m, t0, SaveLanded{Key: "d", Job: jd, Outcome: Saved})
	if cp := m.core.track.Checkpoint(); cp != 6 {
		t.Errorf("checkpoint %d with every save landed, want 6", cp)
	}
	for _, s := range m.all {
		if s.queued || s.saveNow {
			t.Errorf("key %s: queued %v, saveNow %v with nothing waiting", s.key, s.queued, s.saveNow)
		}
	}
}

// TestSaveQueueKeepsInFlight: a key waiting for its own save in flight
// stays queued, ahead, while a key behind it takes the slot that freed.
func TestSaveQueueKeepsInFlight(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 8, Slots: 2, Window: 8})
	for i, k := range []string{"x", "y", "z"} {
		seq := uint64(i + 1)
		m.core.track.Deliver(seq)
		expect(t, m, t0, Delivered[uint64]{Msg: seq, Key: k, Seq: seq}, "load "+k)
		expect(t, m, t0, Loaded{Key: k}, "live "+k+" +1", fmt.Sprintf("apply %s %d", k, seq))
		expect(t, m, t0, Applied[string]{Key: k, Changed: true, Result: "ok"}, fmt.Sprintf("ack %s %d ok", k, seq))
	}
	jx := expect(t, m, t0, SaveNow{Key: "x"}, "snapshot x last=1 held=false").Actions[0].Job
	jz := expect(t, m, t0, SaveNow{Key: "z"}, "snapshot z last=3 held=false").Actions[0].Job
	expect(t, m, t0, Reset{Key: "x"}) // x changes while saving: waits for its save
	expect(t, m, t0, SaveNow{Key: "y"})
	jy := expect(t, m, t0, SaveLanded{Key: "z", Job: jz, Outcome: Saved}, "snapshot y last=2 held=false").Actions[0].Job
	if len(m.toSave) != 1 || m.toSave[0].key != "x" || !m.toSave[0].queued {
		t.Fatalf("queue after y's handoff: %d keys, want x alone", len(m.toSave))
	}
	// x's save lands: x goes again at once (its entry, no longer waiting,
	// leaves at the next landing, the slots being full now).
	jx = expect(t, m, t0, SaveLanded{Key: "x", Job: jx, Outcome: Saved}, "snapshot x last=1 held=false").Actions[0].Job
	expect(t, m, t0, SaveLanded{Key: "y", Job: jy, Outcome: Saved})
	if len(m.toSave) != 0 || m.keys["x"].queued {
		t.Fatalf("queue after a landing with x handed over: %d keys, want none", len(m.toSave))
	}
	expect(t, m, t0, SaveLanded{Key: "x", Job: jx, Outcome: Saved})
	if cp := m.core.track.Checkpoint(); cp != 4 {
		t.Errorf("checkpoint %d with every save landed, want 4", cp)
	}
}

// TestSaveQueueBounded: keys that leave while queued, with no landing to
// take them out, are swept: the queue stays within twice the keys known
// (plus a constant), whatever the churn.
func TestSaveQueueBounded(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 4, Slots: 1, Window: 8})
	for i := range 1000 {
		k := fmt.Sprintf("k%d", i)
		seq := uint64(i + 1)
		m.core.track.Deliver(seq)
		expect(t, m, t0, Request{Key: k}, "load "+k)
		if err := m.Step(t0, Loaded{Key: k}); err != nil {
			t.Fatal(err)
		}
		m.Advance(m.Ready())
		s := m.keys[k]
		if s == nil {
			t.Fatalf("key %s not loaded", k)
		}
		// Queued, then dropped without a landing (white-box: no event
		// path does this today; the sweep is what bounds it if one does).
		m.saveLater(s)
		if max := 2*len(m.all) + 16; len(m.toSave) > max {
			t.Fatalf("after %d keys: %d queued, more than %d", i+1, len(m.toSave), max)
		}
		m.core.unload(s.keyState)
		m.drop(s)
		m.Advance(m.Ready())
	}
}

// BenchmarkTick is the cost of one Tick over a worker holding 1,000 or
// 100,000 clean loaded keys, nothing due. Before the heap of saves due
// (due.go) the tick walked every key for the saves due by time: 1.1-4 ms
// at 100,000 keys; now it looks at the earliest key due only. The worker
// ticks once a second, or every Snapshot.Every/2 (at least 10 ms) when
// that is shorter, and at its own wake times.
//
//	go test ./processor/internal/machine -run '^$' -bench Tick -benchmem
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			m := newTM(Config{Policy: Policy{EveryMessages: -1, Every: time.Second}, Quota: n, Slots: 4, Window: 256})
			for i := range n {
				k := fmt.Sprintf("k%d", i)
				if err := m.Step(t0, Delivered[uint64]{Msg: uint64(i), Key: k, Seq: uint64(i + 1)}); err != nil {
					b.Fatal(err)
				}
				for m.HasReady() {
					rd := m.Ready()
					for _, a := range rd.Actions {
						switch a.Kind {
						case ActLoad:
							_ = m.Step(t0, Loaded{Key: a.Key})
						case ActApply:
							_ = m.Step(t0, Applied[string]{Key: a.Key, Result: "ok"})
						}
					}
					m.Advance(rd)
				}
			}
			if got := len(m.all); got != n {
				b.Fatalf("%d keys loaded, want %d", got, n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := m.Step(t0, Tick{}); err != nil {
					b.Fatal(err)
				}
				if m.HasReady() {
					b.Fatalf("tick over clean keys did something: %v", kinds(m.Ready()))
				}
			}
		})
	}
}

// BenchmarkTickDue is the cost of one Tick that hands over the 8 keys due
// by time (8 snapshot slots) and of their 8 landings, over a worker
// holding 1,000 or 100,000 loaded keys that changed one after the other
// within Every, in another order than they loaded: each op moves the
// clock on by 8 keys' worth. With the heap (due.go) it costs the keys due;
// the walk it replaced went through the keys known, in load order, until
// the slots were full.
//
//	go test ./processor/internal/machine -run '^$' -bench TickDue -benchmem
func BenchmarkTickDue(b *testing.B) {
	const slots = 8
	every := time.Second
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			m := newTM(Config{Policy: Policy{EveryMessages: -1, Every: every}, Quota: n, Slots: slots, Window: 256})
			gap := every / time.Duration(2*n) // all keys change within Every/2
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%d", i)
			}
			var jobs []Job
			var jobKeys []string
			changed := false
			seq := uint64(0)
			now := t0
			run := func() {
				for m.HasReady() {
					rd := m.Ready()
					for _, a := range rd.Actions {
						switch a.Kind {
						case ActLoad:
							_ = m.Step(now, Loaded{Key: a.Key})
						case ActApply:
							_ = m.Step(now, Applied[string]{Key: a.Key, Changed: changed, Result: "ok"})
						case ActSnapshot:
							jobs, jobKeys = append(jobs, a.Job), append(jobKeys, a.Key)
						case ActFatal:
							b.Fatalf("fatal: %v", a.Err)
						}
					}
					m.Advance(rd)
				}
			}
			deliver := func(k string) {
				seq++
				m.core.track.Deliver(seq)
				if err := m.Step(now, Delivered[uint64]{Msg: seq, Key: k, Seq: seq}); err != nil {
					b.Fatal(err)
				}
				run()
			}
			for _, k := range keys { // loaded clean, in order
				deliver(k)
			}
			changed = true
			order := rand.New(rand.NewPCG(uint64(n), 1)).Perm(n)
			dirtyAll := func() { // changed in another order
				for _, i := range order {
					now = now.Add(gap)
					deliver(keys[i])
				}
			}
			dirtyAll()
			start := now.Add(-time.Duration(n) * gap) // the first key changed at start+gap
			done := 0                                 // keys handed over since dirtyAll
			saved := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if done+slots > n {
					b.StopTimer()
					now = now.Add(every)
					dirtyAll()
					start, done = now.Add(-time.Duration(n)*gap), 0
					b.StartTimer()
				}
				done += slots
				now = start.Add(every + time.Duration(done)*gap)
				if err := m.Step(now, Tick{}); err != nil {
					b.Fatal(err)
				}
				run()
				for len(jobs) > 0 {
					j, k := jobs[0], jobKeys[0]
					jobs, jobKeys = jobs[1:], jobKeys[1:]
					saved++
					if err := m.Step(now, SaveLanded{Key: k, Job: j, Outcome: Saved}); err != nil {
						b.Fatal(err)
					}
					run()
				}
			}
			b.StopTimer()
			if want := b.N * slots; saved != want {
				b.Fatalf("%d saves landed in %d ticks, want %d", saved, b.N, want)
			}
		})
	}
}
