package machine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// effects are the action kinds that act for the partition — write, send
// or settle something — which a fenced machine never emits.
var effects = []Kind{ActLoad, ActApply, ActPublish, ActAck, ActReject, ActSnapshot, ActSaveHeld}

// effectsIn returns the script lines of rd's effects.
func effectsIn(rd Ready[uint64, string]) []string {
	var out []string
	for _, a := range rd.Actions {
		if slices.Contains(effects, a.Kind) {
			out = append(out, kinds(Ready[uint64, string]{Actions: []Action[uint64, string]{a}})...)
		}
	}
	return out
}

// TestMachineFencedEmitsNoEffect: for every kind of effect, a machine
// brought to the point of emitting it and then fenced (FenceLost, or a
// save that landed Fenced) emits it not, nor any other effect; what it
// emits instead is given (a nak gives the message to the next owner).
func TestMachineFencedEmitsNoEffect(t *testing.T) {
	cfg := Config{Policy: noSnap, OnShutdown: true, Quota: 4, Slots: 2, Window: 8, SlotWait: time.Hour, BlockTTL: time.Hour}
	bad := &Fail{Disp: Reject, Err: errors.New("bad input")}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at time.Time
		ev Event
	}
	// loadA loads key a and applies message 1 to it (no outputs).
	loadA := []step{{t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}}, {t0, Loaded{Key: "a"}},
		{t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}}}
	cases := []struct {
		name   string
		cfg    func(c *Config, x int) // x: 1 when a key x is added (below)
		before []step                 // stepped before the fence (a nil event: key x, if any, is used)
		after  []step                 // stepped after it
		want   []string
	}{
		{name: "load: message of an unloaded key",
			after: []step{{t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}}},
			want:  []string{"nak a 1"}},
		{name: "load: request of an unloaded key",
			after: []step{{t0, Request{Key: "a"}}},
			want:  []string{"serve a"}},
		{name: "load: message waiting for a snapshot slot",
			cfg: func(c *Config, x int) { c.Quota, c.Slots = 2+x, 1+x },
			before: append(slices.Clone(loadA),
				step{t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}}, step{t0, Loaded{Key: "b"}},
				step{t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}},
				step{t0, SaveNow{Key: "b"}},                            // b's save takes the one slot
				step{t0, nil},                                          // x (if any) used last
				step{t0, Delivered[uint64]{Msg: 3, Key: "c", Seq: 3}}), // c must unload a (dirty): waits for the slot
			after: []step{{t0, SaveLanded{Key: "b", Job: Job{ID: 1, LastSeq: 2, DirtySeq: 2}, Outcome: Saved}}},
			want:  []string{"nak c 3"}},
		{name: "apply: key loaded after the fence",
			before: []step{{t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}}},
			after:  []step{{t0, Loaded{Key: "a"}}},
			want:   []string{"live a +1", "nak a 1"}},
		{name: "apply: message of a loaded key",
			before: loadA,
			after:  []step{{t0, Delivered[uint64]{Msg: 2, Key: "a", Seq: 2}}},
			want:   []string{"nak a 2"}},
		{name: "apply: redelivery of an applied message (a skip acks)",
			before: loadA,
			after:  []step{{t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1}}},
			want:   []string{"nak a 1"}},
		{name: "publish: outputs of a message applied across the fence",
			before: loadA[:2],
			after:  []step{{t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 2), Result: "ok"}}},
			want:   nil},
		{name: "publish: the next output of a message",
			before: append(slices.Clone(loadA[:2]), step{t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 2), Result: "ok"}}),
			after:  []step{{t0, Published{Key: "a"}}},
			want:   nil},
		{name: "publish: a retry due",
			before: append(slices.Clone(loadA[:2]), step{t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 1), Result: "ok"}},
				step{t0, Published{Key: "a", Err: errors.New("timeout")}}),
			after: []step{{at(time.Minute), Tick{}}},
			want:  nil},
		{name: "publish: a key waiting for an in-flight slot",
			cfg: func(c *Config, _ int) { c.Window = 1 },
			before: append(slices.Clone(loadA[:2]), step{t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 1), Result: "ok"}},
				step{t0, Stopping{}}, // takes input with a full window
				step{t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}}, step{t0, Loaded{Key: "b"}},
				step{t0, Applied[string]{Key: "b", Changed: true, Outs: outs("b", 2, 1), Result: "ok"}}),
			after: []step{{t0, Published{Key: "a"}}},
			want:  []string{"nak a 1"}},
		{name: "ack: message applied across the fence, no outputs",
			before: loadA[:2],
			after:  []step{{t0, Applied[string]{Key: "a", Changed: true, Result: "warming"}}},
			want:   []string{"nak a 1"}},
		{name: "ack: last output acknowledged across the fence",
			before: append(slices.Clone(loadA[:2]), step{t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 1), Result: "ok"}}),
			after:  []step{{t0, Published{Key: "a"}}},
			want:   []string{"nak a 1"}},
		{name: "reject: bad input",
			after: []step{{t0, Delivered[uint64]{Msg: 1, Key: "a", Seq: 1, Fail: bad}}},
			want:  []string{"nak a 1"}},
		{name: "reject: failed apply",
			before: loadA[:2],
			after:  []step{{t0, Applied[string]{Key: "a", Changed: true, Fail: bad}}},
			want:   []string{"nak a 1"}},
		{name: "snapshot: due by count",
			cfg:    func(c *Config, _ int) { c.Policy = Policy{EveryMessages: 1, Every: -1} },
			before: loadA[:2],
			after:  []step{{t0, Applied[string]{Key: "a", Changed: true, Result: "ok"}}},
			want:   []string{"nak a 1"}},
		{name: "snapshot: due by time",
			cfg:    func(c *Config, _ int) { c.Policy = Policy{EveryMessages: -1, Every: time.Second} },
			before: loadA,
			after:  []step{{at(time.Minute), Tick{}}},
			want:   nil},
		{name: "snapshot: asked for",
			before: loadA,
			after:  []step{{t0, SaveNow{Key: "a"}}, {t0, Reset{Key: "a"}}},
			want:   nil},
		{name: "snapshot: final, at close",
			before: loadA,
			after:  []step{{t0, Close{Deadline: at(time.Hour)}}},
			want:   []string{"finished pending=0"}},
		{name: "snapshot: a slot freed",
			cfg: func(c *Config, x int) { c.Slots = 1 + x },
			before: append(slices.Clone(loadA),
				step{t0, Delivered[uint64]{Msg: 2, Key: "b", Seq: 2}}, step{t0, Loaded{Key: "b"}},
				step{t0, Applied[string]{Key: "b", Changed: true, Result: "ok"}},
				step{t0, SaveNow{Key: "a"}}, step{t0, SaveNow{Key: "b"}}), // b waits for a's slot
			after: []step{{t0, SaveLanded{Key: "a", Job: Job{ID: 1, LastSeq: 1, DirtySeq: 1}, Outcome: Saved}}},
			want:  nil},
		{name: "save-held: outputs acknowledged across the fence",
			before: append(slices.Clone(loadA[:2]), step{t0, Applied[string]{Key: "a", Changed: true, Outs: outs("a", 1, 1), Result: "ok"}},
				step{t0, SaveNow{Key: "a"}}), // held for a's output
			after: []step{{t0, Published{Key: "a"}}},
			want:  []string{"nak a 1"}},
	}
	// A save that conflicts with a newer owner's claim fences too: for
	// that way in, a key x is loaded, dirtied and its save handed over
	// before the case's own steps, and the save lands Fenced.
	for _, via := range []string{"FenceLost", "save landed Fenced"} {
		for _, c := range cases {
			t.Run(via+"/"+c.name, func(t *testing.T) {
				cf, x := cfg, 0
				if via != "FenceLost" {
					x = 1
					cf.Quota++ // room for x
					cf.Slots++ // and for its save
				}
				if c.cfg != nil {
					c.cfg(&cf, x)
				}
				m := newTM(cf)
				stepRd := func(now time.Time, ev Event) Ready[uint64, string] {
					t.Helper()
					if d, ok := ev.(Delivered[uint64]); ok {
						m.core.track.Deliver(d.Seq) // as the consume callback does
					}
					if err := m.Step(now, ev); err != nil {
						t.Fatalf("step %T %+v: %v", ev, ev, err)
					}
					rd := m.Ready()
					cp := Ready[uint64, string]{Actions: slices.Clone(rd.Actions)}
					m.Advance(rd)
					return cp
				}
				var fence Event = FenceLost{}
				if via != "FenceLost" {
					var acts []Action[uint64, string]
					for _, ev := range []Event{Delivered[uint64]{Msg: 100, Key: "x", Seq: 100}, Loaded{Key: "x"},
						Applied[string]{Key: "x", Changed: true, Result: "ok"}, SaveNow{Key: "x"}} {
						acts = append(acts, stepRd(t0, ev).Actions...)
					}
					i := slices.IndexFunc(acts, func(a Action[uint64, string]) bool { return a.Kind == ActSnapshot })
					if i < 0 {
						t.Fatalf("x's save not handed over: %q", kinds(Ready[uint64, string]{Actions: acts}))
					}
					fence = SaveLanded{Key: "x", Job: acts[i].Job, Outcome: Fenced}
				}
				for _, s := range c.before {
					switch {
					case s.ev != nil:
						stepRd(s.at, s.ev)
					case x == 1:
						stepRd(s.at, Request{Key: "x"})
					}
				}
				var after []Action[uint64, string]
				after = append(after, stepRd(t0, fence).Actions...)
				for _, s := range c.after {
					after = append(after, stepRd(s.at, s.ev).Actions...)
				}
				rd := Ready[uint64, string]{Actions: after}
				if e := effectsIn(rd); len(e) > 0 {
					t.Errorf("a fenced machine emitted %q", e)
				}
				if got := kinds(rd); !slices.Equal(got, c.want) {
					t.Errorf("after the fence: got %q, want %q", got, c.want)
				}
				for _, a := range after {
					if a.Kind == ActNak && !errors.Is(a.Err, ErrFenced) {
						t.Errorf("nak of %d for %v, want ErrFenced", a.Seq, a.Err)
					}
					if a.Kind == ActServe && !errors.Is(a.Err, ErrFenced) {
						t.Errorf("request of %s answered %v, want ErrFenced", a.Key, a.Err)
					}
				}
			})
		}
	}
}

// TestMachineFencedRandom drives machines through random runs — keys
// loaded and unloaded, outputs published, failed and retried, snapshots
// by count, time and request, loads and saves failing — fenced at a
// random moment (FenceLost, or a save landing Fenced): from the fence on,
// no Ready holds an effect, whatever answers of earlier actions still
// come in, and Close finishes.
func TestMachineFencedRandom(t *testing.T) {
	fenced := 0
	for seed := uint64(1); seed <= 3000; seed++ {
		ok, err := fencedRun(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if ok {
			fenced++
		}
	}
	if fenced < 2500 {
		t.Fatalf("only %d of 3000 runs were fenced before they finished", fenced)
	}
}

// fencedRun is one run of TestMachineFencedRandom; it reports whether the
// machine was fenced before it finished.
func fencedRun(seed uint64) (bool, error) {
	rng := rand.New(rand.NewPCG(seed, 0xfe11ce))
	cfg := Config{Policy: Policy{EveryMessages: 1 + rng.IntN(3), Every: time.Second}, OnShutdown: true,
		Quota: 1 + rng.IntN(3), Slots: 1 + rng.IntN(2), Window: 1 + rng.IntN(4), SlotWait: time.Second, BlockTTL: time.Minute}
	cfg.Loads, cfg.Parked = 1+rng.IntN(3), 1+rng.IntN(6) // loads answered in any order, inputs parked behind them
	m := newTM(cfg)
	now := t0
	keys := []string{"a", "b", "c", "d"}
	next := uint64(1)
	type pending struct {
		kind Kind
		key  string
		msg  uint64
		job  Job
	}
	var open []pending // actions whose answer is still to come
	isFenced, closed := false, false
	fenceAt := 5 + rng.IntN(60) // the fence comes after this many events
	step := func(ev Event) error {
		if err := m.Step(now, ev); err != nil {
			return fmt.Errorf("step %T %+v: %w", ev, ev, err)
		}
		for m.HasReady() {
			rd := m.Ready()
			if e := effectsIn(rd); isFenced && len(e) > 0 {
				return fmt.Errorf("fenced machine emitted %q after %T", e, ev)
			}
			for _, a := range rd.Actions {
				switch a.Kind {
				case ActLoad, ActApply, ActPublish:
					open = append(open, pending{kind: a.Kind, key: a.Key, msg: a.Msg})
				case ActSnapshot:
					if !a.Held {
						open = append(open, pending{kind: ActSnapshot, key: a.Key, job: a.Job})
					}
				case ActSaveHeld:
					open = append(open, pending{kind: ActSnapshot, key: a.Key, job: a.Job})
				}
			}
			m.Advance(rd)
		}
		return nil
	}
	for events := 0; !m.Done(); events++ {
		if events > 5000 {
			return isFenced, fmt.Errorf("no end: %d answers open, fenced %v, closed %v", len(open), isFenced, closed)
		}
		var ev Event
		switch r := rng.IntN(10); {
		case events == fenceAt && !isFenced:
			isFenced = true
			ev = FenceLost{}
			if i := slices.IndexFunc(open, func(p pending) bool { return p.kind == ActSnapshot }); i >= 0 && rng.IntN(2) == 0 {
				ev = SaveLanded{Key: open[i].key, Job: open[i].job, Outcome: Fenced}
				open = slices.Delete(open, i, i+1)
			}
		case len(open) > 0 && r < 6:
			i := rng.IntN(len(open))
			p := open[i]
			open = slices.Delete(open, i, i+1)
			fail := rng.IntN(5) == 0
			switch p.kind {
			case ActLoad:
				l := Loaded{Key: p.key}
				if fail {
					l.Fail = &Fail{Disp: Nak, Err: errors.New("load")}
				}
				ev = l
			case ActApply:
				ev = Applied[string]{Key: p.key, Changed: true, Outs: outs(p.key, p.msg, rng.IntN(3)), Result: "ok"}
			case ActPublish:
				pb := Published{Key: p.key}
				if fail {
					pb.Err = errors.New("publish")
				}
				ev = pb
			case ActSnapshot:
				o := Saved
				if fail {
					o = Failed
				}
				ev = SaveLanded{Key: p.key, Job: p.job, Outcome: o}
			}
		case m.Accepting() && !closed && next <= 40 && r < 8:
			m.core.track.Deliver(next)
			ev = Delivered[uint64]{Msg: next, Key: keys[rng.IntN(len(keys))], Seq: next}
			next++
		case r == 8 && !closed:
			ev = SaveNow{Key: keys[rng.IntN(len(keys))]}
		case !closed && (next > 40 || events > 400) && m.Accepting():
			closed = true
			ev = Close{Deadline: now.Add(time.Minute)}
		default:
			now = now.Add(100 * time.Millisecond)
			ev = Tick{}
		}
		if err := step(ev); err != nil {
			return isFenced, err
		}
	}
	return isFenced, nil
}
