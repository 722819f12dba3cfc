package machine

import (
	"fmt"
	"testing"
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
