package machine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The machine driven by scripts, without a server: inputs are uint64
// sequences, outputs strings "<key>/<seq>/<i>".

type tm = Machine[uint64, string]

func newTM(cfg Config) *tm { return New[uint64, string](cfg, NewTracker()) }

// kinds lists the kinds of rd's actions, with their keys, as a script
// reads them: "load a", "apply a 1", "publish a/1/0", "ack a 1 ok", ….
func kinds(rd Ready[uint64, string]) []string {
	var out []string
	for _, a := range rd.Actions {
		switch a.Kind {
		case ActLoad:
			out = append(out, "load "+a.Key)
		case ActApply:
			out = append(out, fmt.Sprintf("apply %s %d", a.Key, a.Msg))
		case ActPublish:
			out = append(out, "publish "+a.Out)
		case ActRetry:
			out = append(out, fmt.Sprintf("retry %s %d #%d", a.Key, a.Seq, a.Attempt))
		case ActAck:
			out = append(out, fmt.Sprintf("ack %s %d %s", a.Key, a.Msg, a.Result))
		case ActNak:
			out = append(out, fmt.Sprintf("nak %s %d", a.Key, a.Msg))
		case ActReject:
			out = append(out, fmt.Sprintf("reject %s %d", a.Key, a.Msg))
		case ActSnapshot:
			out = append(out, fmt.Sprintf("snapshot %s last=%d held=%v", a.Key, a.Job.LastSeq, a.Held))
		case ActSaveHeld:
			out = append(out, fmt.Sprintf("save-held %s last=%d", a.Key, a.Job.LastSeq))
		case ActUnload:
			out = append(out, "unload "+a.Key)
		case ActLive:
			out = append(out, fmt.Sprintf("live %s %+d", a.Key, a.Delta))
		case ActServe:
			out = append(out, "serve "+a.Key)
		case ActGaveUp:
			out = append(out, fmt.Sprintf("gaveup %s %d", a.Key, a.Seq))
		case ActFinished:
			out = append(out, fmt.Sprintf("finished pending=%d", a.Pending))
		case ActFatal:
			out = append(out, "fatal")
		}
	}
	return out
}

// expect steps m with ev and checks the actions of the Ready that follows.
func expect(t *testing.T, m *tm, now time.Time, ev Event, want ...string) Ready[uint64, string] {
	t.Helper()
	if err := m.Step(now, ev); err != nil {
		t.Fatalf("step %T: %v", ev, err)
	}
	rd := m.Ready()
	if got := kinds(rd); !slices.Equal(got, want) {
		t.Fatalf("after %T %+v:\n got  %q\n want %q", ev, ev, got, want)
	}
	cp := Ready[uint64, string]{Actions: slices.Clone(rd.Actions)}
	m.Advance(rd)
	return cp
}

func outs(key string, seq uint64, n int) []string {
	var o []string
	for i := range n {
		o = append(o, fmt.Sprintf("%s/%d/%d", key, seq, i))
	}
	return o
}

var noSnap = Policy{EveryMessages: -1, Every: -1}

// TestMachineMessage walks one message through load, apply, two outputs
// (the second after the first is acknowledged) and the ack of its input,
// then a redelivery of it (skipped) and a snapshot by count.
func TestMachineMessage(t *testing.T) {
	m := newTM(Config{Policy: Policy{EveryMessages: 2, Every: -1}, OnShutdown: true, Quota: 4, Slots: 2, Window: 8})
	m.core.track.Deliver(1)
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
	if m.Accepting() {
		t.Fatal("accepting while a message is in progress")
	}
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 2), Result: "ok"}, "publish a/1/0")
	if !m.Accepting() {
		t.Fatal("not accepting with room in the window")
	}
	expect(t, m, t0, Published{Key: "a"}, "publish a/1/1")
	expect(t, m, t0, Published{Key: "a"}, "ack a 1 ok")
	// A redelivery of 1 (its ack was lost): skipped.
	m.core.track.Deliver(1)
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "ack a 1 skipped")
	// 2 makes the second applied message: its snapshot is due, held until
	// 2's output is acknowledged.
	m.core.track.Deliver(2)
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "apply a 2")
	rd := expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 2, 1), Result: "ok"},
		"publish a/2/0", "snapshot a last=2 held=true")
	job := rd.Actions[1].Job
	if cp := m.core.track.Checkpoint(); cp != 1 {
		t.Errorf("checkpoint %d before the snapshot lands, want 1", cp)
	}
	expect(t, m, t0, Published{Key: "a"}, "ack a 2 ok", "save-held a last=2")
	// The machine released each delivery's hold as it acked it.
	expect(t, m, t0, SaveLanded{Key: "a", Job: job, Outcome: Saved})
	if cp := m.core.track.Checkpoint(); cp != 3 {
		t.Errorf("checkpoint %d after the snapshot, want 3", cp)
	}
	expect(t, m, t0, Close{Deadline: t0.Add(time.Second)}, "finished pending=0")
	if !m.Done() {
		t.Error("not done")
	}
}

// TestMachineRefusals: bad input is rejected before its key is touched; a
// transient load failure makes the key's later messages wait; a fatal
// failure stops the machine; protocol errors are reported.
func TestMachineRefusals(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 1, Slots: 1, Window: 8})
	bad := &Fail{Disp: Reject, Err: errors.New("malformed")}
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "junk", Seq: 1, Fail: bad}, "reject junk 1")
	if len(m.keys) != 0 {
		t.Fatal("a rejected message created a key")
	}
	expect(t, m, t0, DeadLettered{Key: "junk", Seq: 1})
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "load a")
	expect(t, m, t0, Loaded{Key: "a", Fail: &Fail{Disp: Nak, Err: errors.New("kv timeout")}}, "nak a 2")
	// 3 waits for 2 unless 2 is applied already (a stale duplicate whose
	// load failed): the key is loaded to know, and its state does not
	// hold 2, so 3 waits.
	expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, "load a")
	rd := expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "nak a 3")
	if !errors.Is(rd.Actions[1].Err, ErrWaiting) {
		t.Errorf("3 naked with %v, want ErrWaiting", rd.Actions[1].Err)
	}
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "apply a 2")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 2 ok")
	expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "a", Seq: 3}, "apply a 3")
	// A numerical failure after learning part of a batch: applied, rejected.
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Fail: bad}, "reject a 3")
	if k, _ := m.Key("a"); k.LastSeq != 3 {
		t.Errorf("last seq %d, want 3 (the failed batch counts as applied)", k.LastSeq)
	}
	expect(t, m, t0, DeadLettered{Key: "a", Seq: 3})
	if err := m.Step(t0, Loaded{Key: "a"}); err == nil {
		t.Error("an unasked load was accepted")
	}
	expect(t, m, t0, Delivered[uint64]{Msg: 4, Key: "a", Seq: 4}, "apply a 4")
	if err := m.Step(t0, Delivered[uint64]{Msg: 5, Key: "a", Seq: 5}); err == nil {
		t.Error("a delivery while a message is in progress was accepted")
	}
	expect(t, m, t0, Applied[string]{Key: "a", Fail: &Fail{Disp: Fatal, Err: errors.New("config")}}, "fatal")
	if !m.Done() || m.Accepting() {
		t.Error("a fatal failure must stop the machine")
	}
}

// TestMachineStaleDuplicateLoadFailed: a stale duplicate delivery of a
// message that a snapshot already holds (acknowledged long ago) fails to
// load; the key's later messages must not wait for it, since it never
// comes back (sim seeds 2275 and 27040: the key waited a minute, then went
// on out of order).
func TestMachineStaleDuplicateLoadFailed(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 1, Slots: 1, Window: 8})
	m.core.track.Deliver(27)
	expect(t, m, t0, Delivered[uint64]{Msg: 27, Key: "k", Seq: 27}, "load k")
	expect(t, m, t0, Loaded{Key: "k", Fail: &Fail{Disp: Nak, Err: errors.New("kv timeout")}}, "nak k 27")
	// 41: the key is loaded to know whether 27 is applied; its snapshot
	// holds 40, so 27 is stale and 41 is applied at once.
	m.core.track.Deliver(41)
	expect(t, m, t0, Delivered[uint64]{Msg: 41, Key: "k", Seq: 41}, "load k")
	expect(t, m, t0, Loaded{Key: "k", LastSeq: 40}, "live k +1", "apply k 41")
	if len(m.core.blocked["k"]) != 0 {
		t.Errorf("blocks %v left, want none", m.core.blocked["k"])
	}
}

// TestMachineEvictionWaitsForSlot: loading a key into a full worker
// unloads the least recently used one; a dirty victim needs a snapshot
// slot, and the load waits for one (at most SlotWait, then the message is
// nak'ed and the victim saved as soon as a slot frees).
func TestMachineEvictionWaitsForSlot(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 1, Slots: 1, Window: 8, SlotWait: time.Second})
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 1 ok")
	expect(t, m, t0, SaveNow{Key: "a"}, "snapshot a last=1 held=false")        // takes the only slot
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "apply a 2") // dirty again, save in flight
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}, "ack a 2 ok")
	// b needs a's place: a is dirty and its save is in flight — a is
	// unloaded when the save lands and is saved again then.
	expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "b", Seq: 3}, "live a -1", "load b")
	expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 3")
	expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}, "ack b 3 ok")
	// c needs b's place; b is dirty, the slot is taken: wait.
	expect(t, m, t0, Delivered[uint64]{Msg: 4, Key: "c", Seq: 4}, "live b -1")
	if m.Accepting() {
		t.Fatal("accepting while a load waits for a slot")
	}
	if w := m.Wake(); !w.Equal(t0.Add(time.Second)) {
		t.Errorf("wake %v, want the slot deadline", w)
	}
	// a's save lands: a is saved again (dirty, unloading) before b gets the slot.
	expect(t, m, t0, SaveLanded{Key: "a", Job: Job{ID: 1, LastSeq: 1}, Outcome: Saved}, "snapshot a last=2 held=false")
	// The deadline passes: 4 is nak'ed, b is saved when a slot frees.
	expect(t, m, t0.Add(time.Second), Tick{}, "nak c 4")
	expect(t, m, t0, SaveLanded{Key: "a", Job: Job{ID: 2, LastSeq: 2}, Outcome: Saved}, "unload a", "snapshot b last=3 held=false")
	expect(t, m, t0, SaveLanded{Key: "b", Job: Job{ID: 3, LastSeq: 3}, Outcome: Saved}, "unload b")
	expect(t, m, t0, Delivered[uint64]{Msg: 4, Key: "c", Seq: 4}, "load c")
}

// TestMachineFenced: once fenced, nothing more is published or saved,
// what comes is nak'ed (dead letters too), and Close finishes at once.
func TestMachineFenced(t *testing.T) {
	m := newTM(Config{Policy: noSnap, OnShutdown: true, Quota: 4, Slots: 2, Window: 1})
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 1), Result: "ok"}, "publish a/1/0")
	if m.Accepting() {
		t.Fatal("accepting with a full window")
	}
	expect(t, m, t0, FenceLost{})
	if !m.Accepting() {
		t.Fatal("a fenced machine must take input to nak it")
	}
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "nak a 2")
	expect(t, m, t0, Delivered[uint64]{Msg: 3, Key: "b", Seq: 3, Fail: &Fail{Disp: Reject, Err: errors.New("bad")}}, "nak b 3")
	expect(t, m, t0, Published{Key: "a", Err: errors.New("timeout")}, "retry a 1 #1")
	expect(t, m, t0.Add(time.Second), Tick{}) // no publish
	expect(t, m, t0, SaveNow{Key: "a"})       // no snapshot
	expect(t, m, t0, Close{Deadline: t0.Add(time.Hour)}, "finished pending=1")
}

// TestMachineStoppingTakesInput: a stopping worker takes its queued input
// with a full window; Close waits for the outputs, then saves.
func TestMachineStoppingTakesInput(t *testing.T) {
	m := newTM(Config{Policy: noSnap, OnShutdown: true, Quota: 4, Slots: 2, Window: 1})
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 1), Result: "ok"}, "publish a/1/0")
	expect(t, m, t0, Stopping{})
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}, "load b")
	expect(t, m, t0, Loaded{Key: "b"}, "live b +1", "apply b 2")
	// b's output waits for an in-flight slot (Window 1).
	expect(t, m, t0, Applied[string]{Key: "b", Changed: true, Outs: outs("b", 2, 1), Result: "ok"})
	expect(t, m, t0, Close{Deadline: t0.Add(time.Hour)})
	expect(t, m, t0, Published{Key: "a"}, "ack a 1 ok", "publish b/2/0", "snapshot a last=1 held=false")
	expect(t, m, t0, SaveLanded{Key: "a", Job: Job{ID: 1, LastSeq: 1}, Outcome: Saved})
	expect(t, m, t0, Published{Key: "b"}, "ack b 2 ok", "snapshot b last=2 held=false")
	expect(t, m, t0, SaveLanded{Key: "b", Job: Job{ID: 2, LastSeq: 2}, Outcome: Saved}, "finished pending=0")
}

// TestMachineFailureOrders runs a stream of messages of three keys
// through a worker with room for two keys, one snapshot slot and a window
// of three, against a simulated output stream and store in which any
// publish attempt may be lost, stored with its ack lost, or acknowledged,
// any save may fail, and completions come back in any order — every
// failure pattern of the first attempts, over several completion orders.
// Whatever happens: each key's outputs land in input order, each once;
// an input is acknowledged once, after its outputs landed; a snapshot
// never holds a message whose outputs have not landed; and at the end
// everything is acknowledged, saved, and the checkpoint passed it all.
func TestMachineFailureOrders(t *testing.T) {
	const patternBits = 10
	runs := 0
	for pattern := range 1 << patternBits {
		for order := range 3 {
			runs++
			if err := simulate(uint64(pattern), uint64(order), 1, ""); err != nil {
				t.Fatalf("pattern %b, order %d: %v", pattern, order, err)
			}
		}
	}
	t.Logf("%d runs", runs)
}

var simTrace func(string)

type simSave struct {
	key string
	job Job
}

// simLane is the output stream as a lane (processor/lane.go) shows it to
// the machine: outputs sent go, in send order, into the lane's current
// batch (a fast batch in gap-fail mode), opened by the first send after
// the previous one resolved. The stream persists a prefix of a batch, one
// message at a time (a duplicate of a landed output is skipped); a batch
// ends at any moment (a lost message and a gap, an error, a timed-out
// acknowledgement and its end-of-batch, the server's inactivity timeout or
// restart) and persists nothing more. Answers come back in batch order:
// a persisted message is acknowledged (before or after the end), and once
// the batch ended the rest fail — a persisted one too when its
// acknowledgement was lost and the end left it unknown. While the batch
// ends, a send fails at once (never sent). A new batch opens only when the
// ending one has answered everything, every send refused meanwhile was
// answered (the worker answers a refused send within the Publish action),
// and the actions the answers caused were executed (the lane's settled).
type simLane struct {
	cur       []simSent // the current batch, in batch order
	persisted int       // cur[:persisted] persisted
	answered  int       // cur[:answered] answered
	ended     bool
	failNow   []simSent // sends refused while the batch ends
	next      []simSent // mutation "queue": sends made while the batch ends, for the next batch
}

type simSent struct {
	key, out string
	ord      uint64
}

func simulate(pattern, order uint64, perKey int, laneMut string) error {
	rng := rand.New(rand.NewPCG(pattern, order))
	window := 3
	if perKey > 1 {
		window = 6
	}
	m := newTM(Config{Policy: Policy{EveryMessages: 2, Every: -1}, OnShutdown: true, Quota: 2, Slots: 1, Window: window,
		KeyInFlight: perKey, SlotWait: time.Hour, BlockTTL: time.Hour})
	var lane *simLane
	if perKey > 1 {
		lane = &simLane{}
	}
	track := m.core.track
	keys := []string{"a", "b", "c"}
	type input struct {
		key  string
		seq  uint64
		outs int
	}
	var stream []input
	for seq := uint64(1); seq <= 18; seq++ {
		stream = append(stream, input{key: keys[rng.IntN(3)], seq: seq, outs: rng.IntN(3)})
	}
	queue := slices.Clone(stream)   // deliveries, in order; a nak'ed one comes back at the end
	landed := map[string][]string{} // per key, in landing order
	seen := map[string]bool{}
	acked := map[uint64]int{}
	var publishes []string // in flight
	var saves []simSave
	held := map[uint64]bool{}
	store := map[string]uint64{} // key → last seq saved
	loaded := map[string]uint64{}
	attempt := 0
	now := t0
	fail := func() bool { // the next attempt's fate from the pattern, then chance
		attempt++
		if attempt <= 10 {
			return pattern>>(attempt-1)&1 == 1
		}
		return rng.IntN(5) == 0
	}
	byseq := map[uint64]input{}
	for _, in := range stream {
		byseq[in.seq] = in
	}
	exec := func() error {
		for m.HasReady() {
			rd := m.Ready()
			if simTrace != nil {
				simTrace(fmt.Sprint(kinds(rd)))
			}
			for _, a := range rd.Actions {
				switch a.Kind {
				case ActLoad:
					if fail() {
						if err := m.Step(now, Loaded{Key: a.Key, Fail: &Fail{Disp: Nak, Err: errors.New("load")}}); err != nil {
							return err
						}
						continue
					}
					loaded[a.Key] = store[a.Key]
					if err := m.Step(now, Loaded{Key: a.Key, LastSeq: store[a.Key]}); err != nil {
						return err
					}
				case ActApply:
					in := byseq[a.Msg]
					if in.key != a.Key {
						return fmt.Errorf("apply %d to key %s", a.Msg, a.Key)
					}
					if prev := loaded[a.Key]; a.Msg <= prev {
						return fmt.Errorf("key %s: %d applied after %d", a.Key, a.Msg, prev)
					}
					loaded[a.Key] = a.Msg
					if err := m.Step(now, Applied[string]{Key: a.Key, Changed: true, Outs: outs(a.Key, a.Msg, in.outs), Result: "ok"}); err != nil {
						return err
					}
				case ActPublish:
					if lane == nil {
						publishes = append(publishes, a.Out)
						continue
					}
					sent := simSent{key: a.Key, out: a.Out, ord: a.Ord}
					switch {
					case lane.ended && laneMut == "queue":
						lane.next = append(lane.next, sent)
					case lane.ended:
						lane.failNow = append(lane.failNow, sent)
					default:
						lane.cur = append(lane.cur, sent)
					}
				case ActAck:
					acked[a.Msg]++
					if acked[a.Msg] > 1 {
						return fmt.Errorf("input %d acked twice", a.Msg)
					}
					for _, o := range outs(a.Key, a.Msg, byseq[a.Msg].outs) {
						if !seen[o] {
							return fmt.Errorf("input %d acked before its output %s landed", a.Msg, o)
						}
					}
				case ActNak:
					queue = append(queue, byseq[a.Msg])
				case ActSnapshot, ActSaveHeld:
					if a.Kind == ActSnapshot && a.Held {
						held[a.Job.ID] = true
						continue
					}
					delete(held, a.Job.ID)
					for _, in := range stream {
						if in.key == a.Key && in.seq <= a.Job.LastSeq {
							for _, o := range outs(in.key, in.seq, in.outs) {
								if !seen[o] {
									return fmt.Errorf("snapshot of %s at %d saved before output %s landed", a.Key, a.Job.LastSeq, o)
								}
							}
						}
					}
					saves = append(saves, simSave{key: a.Key, job: a.Job})
				case ActReject, ActFatal, ActServe:
					return fmt.Errorf("unexpected %v", kinds(Ready[uint64, string]{Actions: []Action[uint64, string]{a}}))
				}
			}
			m.Advance(rd)
		}
		return nil
	}
	closed := false
	for steps := 0; ; steps++ {
		if steps > 5000 {
			return fmt.Errorf("no progress: queue %d, publishes %d, saves %d, pending %d", len(queue), len(publishes), len(saves), m.Pending())
		}
		if err := exec(); err != nil {
			return err
		}
		if m.Done() {
			break
		}
		if simTrace != nil {
			simTrace(fmt.Sprintf("queue %v publishes %v saves %v lane %+v", queue, publishes, saves, lane))
		}
		switch {
		case len(queue) > 0 && m.Accepting() && rng.IntN(3) > 0:
			in := queue[0]
			queue = queue[1:]
			track.Deliver(in.seq) // as the consumer does
			if err := m.Step(now, Delivered[uint64]{Msg: in.seq, Key: in.key, Seq: in.seq}); err != nil {
				return err
			}
		case lane != nil && len(lane.failNow) > 0 && rng.IntN(2) == 0:
			f := lane.failNow[0]
			lane.failNow = lane.failNow[1:]
			if err := m.Step(now, Published{Key: f.key, Ord: f.ord, Err: errors.New("batch ending")}); err != nil {
				return err
			}
		case lane != nil && !lane.ended && lane.persisted < len(lane.cur) && rng.IntN(2) == 0:
			o := lane.cur[lane.persisted]
			lane.persisted++
			if !seen[o.out] {
				seen[o.out] = true
				landed[o.key] = append(landed[o.key], o.out)
			}
		case lane != nil && !lane.ended && len(lane.cur) > 0 && rng.IntN(6) == 0:
			lane.ended = true
		case lane != nil && lane.answered < len(lane.cur) && (lane.ended || lane.answered < lane.persisted) && rng.IntN(2) == 0:
			// Up to three answers in a row before the actions they cause
			// are executed, as the worker steps what one stream answer
			// resolves.
			for n := 1 + rng.IntN(3); n > 0 && lane.answered < len(lane.cur) && (lane.ended || lane.answered < lane.persisted); n-- {
				o := lane.cur[lane.answered]
				var err error
				switch {
				case lane.answered >= lane.persisted:
					err = errors.New("not persisted: the batch ended before it")
				case lane.ended && rng.IntN(2) == 0:
					err = errors.New("unknown: the batch ended with its acknowledgement lost")
				}
				lane.answered++
				if err := m.Step(now, Published{Key: o.key, Ord: o.ord, Err: err}); err != nil {
					return err
				}
			}
			if laneMut == "settle" && lane.ended && lane.answered == len(lane.cur) && len(lane.failNow) == 0 {
				*lane = simLane{} // opened before the publishes asked for meanwhile were executed
			}
		case lane != nil && lane.ended && lane.answered == len(lane.cur) && (len(lane.failNow) == 0 || laneMut == "open"):
			// The ended batch answered everything, and so did every send
			// refused meanwhile (the worker answers those at once): the
			// next send opens a new batch.
			*lane = simLane{cur: lane.next, failNow: lane.failNow}
		case len(publishes) > 0 && rng.IntN(2) == 0:
			i := rng.IntN(len(publishes))
			o := publishes[i]
			publishes = slices.Delete(publishes, i, i+1)
			key := o[:strings.IndexByte(o, '/')]
			var err error
			switch {
			case !fail():
			case rng.IntN(2) == 0:
				err = errors.New("lost")
			default:
				err = errors.New("stored, ack lost")
				if !seen[o] {
					seen[o] = true
					landed[key] = append(landed[key], o)
				}
			}
			if err == nil && !seen[o] {
				seen[o] = true
				landed[key] = append(landed[key], o)
			}
			if err := m.Step(now, Published{Key: key, Err: err}); err != nil {
				return err
			}
		case len(saves) > 0 && rng.IntN(2) == 0:
			s := saves[0]
			saves = saves[1:]
			o := Saved
			if fail() {
				o = Failed
			} else {
				store[s.key] = max(store[s.key], s.job.LastSeq)
			}
			if err := m.Step(now, SaveLanded{Key: s.key, Job: s.job, Outcome: o}); err != nil {
				return err
			}
		case len(queue) == 0 && !closed && m.Pending() == 0 && len(saves) == 0:
			// Closed once every output is in (a close with outputs that
			// failed three times gives up on them: TestMachineFenced).
			closed = true
			if err := m.Step(now, Close{Deadline: now.Add(time.Hour)}); err != nil {
				return err
			}
		default:
			now = now.Add(50 * time.Millisecond)
			if err := m.Step(now, Tick{}); err != nil {
				return err
			}
		}
	}
	for _, in := range stream {
		if acked[in.seq] != 1 {
			return fmt.Errorf("input %d acked %d times", in.seq, acked[in.seq])
		}
	}
	for _, k := range keys {
		var want []string
		for _, in := range stream {
			if in.key == k {
				want = append(want, outs(k, in.seq, in.outs)...)
			}
		}
		if !slices.Equal(landed[k], want) {
			return fmt.Errorf("key %s landed %v, want %v", k, landed[k], want)
		}
	}
	if len(held) != 0 {
		return fmt.Errorf("snapshots still held: %v", held)
	}
	if cp := track.Checkpoint(); cp != 19 {
		return fmt.Errorf("checkpoint %d at the end, want 19", cp)
	}
	return nil
}

// BenchmarkMachineMessage is the machine's cost per message on the hot
// path: a message of a loaded key delivered, applied with one output,
// published and acknowledged, its input acked (snapshots off).
//
//	go test ./processor/internal/machine -run '^$' -bench MachineMessage -benchmem
func BenchmarkMachineMessage(b *testing.B) {
	m := newTM(Config{Policy: noSnap, Quota: 64, Slots: 8, Window: 256})
	keys := make([]string, 64)
	outs := make([][]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		outs[i] = []string{keys[i] + "/out"}
	}
	drain := func() {
		for m.HasReady() {
			rd := m.Ready()
			for _, a := range rd.Actions {
				switch a.Kind {
				case ActLoad:
					_ = m.Step(t0, Loaded{Key: a.Key})
				case ActApply:
					_ = m.Step(t0, Applied[string]{Key: a.Key, Changed: true, Outs: outs[a.Msg%64], Result: "ok"})
				case ActPublish:
					_ = m.Step(t0, Published{Key: a.Key})
				}
			}
			m.Advance(rd)
		}
	}
	for i := range 64 {
		_ = m.Step(t0, Delivered[uint64]{Msg: uint64(i), Key: keys[i], Seq: uint64(i + 1)})
		drain()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % 64
		_ = m.Step(t0, Delivered[uint64]{Msg: uint64(k), Key: keys[k], Seq: uint64(i + 65)})
		drain()
	}
}

// TestMachineLaneFailureOrders is TestMachineFailureOrders with up to
// three outputs of a key in flight through a simulated lane (simLane):
// batches that persist a prefix and end at any moment, acknowledgements
// lost with the end, sends refused while a batch ends. Each key's outputs
// must still land in input order, each once, every input acked once after
// its outputs landed, no snapshot saved before its outputs landed.
func TestMachineLaneFailureOrders(t *testing.T) {
	runs := 0
	for pattern := range 1 << 9 {
		for order := range 3 {
			runs++
			if err := simulate(uint64(pattern), uint64(order), 3, ""); err != nil {
				t.Fatalf("pattern %b, order %d: %v", pattern, order, err)
			}
		}
	}
	t.Logf("%d runs", runs)
}

// TestMachineLaneMutation: the simulated lane catches an executor that
// breaks the lane's contract — one that opens a new batch before it has
// answered the sends it refused while the previous batch ended ("open"),
// or one that keeps the sends made while a batch ends for the next batch
// instead of refusing them ("queue"), or one that opens it as soon as the
// last answer is stepped, before it executed the publishes the machine
// asked for after the earlier answers ("settle", the bug
// TestWindowFaults/lane found): each lets a key's later output land before
// an earlier one that the ended batch did not persist.
//
// Mutations of the machine's own rule are not caught here, and cannot be
// under this contract: with the lane refusing sends from the moment a
// batch ends until its answers are settled, a key's outputs in flight
// are answered before any later send can reach a new batch, so neither
// waiting for them (window.go endRound) nor stopping the key after its
// first failure (ready) changes what lands — removing either passes these
// runs (tried by hand, 2026-11-26). They stay as defence in depth for an
// executor that answers a batch out of order. What the machine must do is
// rewind: a next round that does not start again from the first output not
// acknowledged never delivers it (these runs then report no progress).
func TestMachineLaneMutation(t *testing.T) {
	for _, mut := range []string{"open", "queue", "settle"} {
		caught := 0
		var first error
		for pattern := range 1 << 9 {
			if err := simulate(uint64(pattern), 1, 3, mut); err != nil {
				caught++
				if first == nil {
					first = err
				}
			}
		}
		t.Logf("mutation %q caught in %d of %d runs; first: %v", mut, caught, 1<<9, first)
		if caught == 0 {
			t.Errorf("mutation %q: the simulated lane did not catch it", mut)
		}
	}
}

// TestMachineKeyInFlight scripts one key with up to three outputs in
// flight: a failure stops the key until its round has nothing in flight,
// then everything unacknowledged goes again from the head, in order.
func TestMachineKeyInFlight(t *testing.T) {
	m := newTM(Config{Policy: noSnap, Quota: 4, Slots: 2, Window: 8, KeyInFlight: 3})
	expect(t, m, t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}, "load a")
	expect(t, m, t0, Loaded{Key: "a"}, "live a +1", "apply a 1")
	expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 2), Result: "ok"}, "publish a/1/0", "publish a/1/1")
	expect(t, m, t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}, "apply a 2")
	rd := expect(t, m, t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 2, 2), Result: "ok"}, "publish a/2/0")
	if rd.Actions[0].Ord != 2 {
		t.Fatalf("ord %d, want 2", rd.Actions[0].Ord)
	}
	if m.InFlight() != 3 {
		t.Fatalf("in flight %d, want 3 (KeyInFlight)", m.InFlight())
	}
	expect(t, m, t0, Published{Key: "a", Ord: 0}, "publish a/2/1")
	// An acknowledgement out of order counts as a failure: the round breaks.
	expect(t, m, t0, Published{Key: "a", Ord: 2}, "retry a 1 #1")
	expect(t, m, t0, Published{Key: "a", Ord: 1, Err: errors.New("batch ended")})
	if w := m.Wake(); !w.IsZero() {
		t.Fatalf("wake %v with an output of the broken round in flight", w)
	}
	expect(t, m, t0, Published{Key: "a", Ord: 3, Err: errors.New("batch ended")})
	expect(t, m, t0.Add(10*time.Millisecond), Tick{}) // before the backoff
	expect(t, m, t0.Add(time.Second), Tick{}, "publish a/1/1", "publish a/2/0", "publish a/2/1")
	expect(t, m, t0, Published{Key: "a", Ord: 1}, "ack a 1 ok")
	expect(t, m, t0, Published{Key: "a", Ord: 2})
	expect(t, m, t0, Published{Key: "a", Ord: 3}, "ack a 2 ok")
	if m.Pending() != 0 || m.InFlight() != 0 {
		t.Errorf("pending %d, in flight %d", m.Pending(), m.InFlight())
	}
}
