package processor

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/internal/localstore"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
)

// TestLocalKeyBytesCovers measures what a key in the local tier costs in
// memory — the worker's entry of it and the machine's state (its slot,
// map and LRU entries, its hold in the replay tracker, its output
// subject) — on the heap of 20,000 such keys, and checks that
// localKeyBytes, which the memory plan charges for it, covers it.
func TestLocalKeyBytesCovers(t *testing.T) {
	const n = 20000
	pl := &pipeline{cfg: pipelineConfig("sizes")}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	track := machine.NewTracker()
	m := machine.New[inMsg, *nats.Msg](machine.Config{Policy: machine.Policy{EveryMessages: -1, Every: time.Hour},
		Quota: n + 1, Slots: jobSlots, Window: 64, Loads: loadSlots, Parked: 64}, track)
	keys := make(map[string]*entry, 0) // grown as the worker's is
	now := time.Now()
	step := func(ev machine.Event) {
		for ev != nil {
			if err := m.Step(now, ev); err != nil {
				t.Fatal(err)
			}
			ev = nil
			for m.HasReady() {
				rd := m.Ready()
				for _, a := range rd.Actions {
					if a.Kind == machine.ActApply {
						ev = machine.Applied[*nats.Msg]{Key: a.Key, Changed: true, Result: resultOK}
					}
				}
				m.Advance(rd)
			}
		}
	}
	for i := range n {
		key := fmt.Sprintf("device-%06d", i)
		seq := uint64(i + 1)
		track.Deliver(seq)
		step(machine.Delivered[inMsg]{Msg: inMsg{pipe: pl, key: key, seq: seq}, Key: key, Seq: seq})
		keys[key] = &entry{key: key, pipe: pl, rev: seq, lastSeq: seq, subject: expandShard(pl.cfg.Output.Subject, pl.cfg.Name, key, 0)}
		step(machine.Loaded{Key: key})
	}
	per := float64(heap()-before) / n
	runtime.KeepAlive(m)
	runtime.KeepAlive(keys)
	t.Logf("a key in the local tier: %.0f B in memory (localKeyBytes %d)", per, localKeyBytes)
	if loaded, _ := m.Key("device-000000"); !loaded.Dirty {
		t.Fatal("the keys are not dirty: their tracker holds are not counted")
	}
	if per > localKeyBytes {
		t.Errorf("a key in the local tier takes %.0f B of memory, more than localKeyBytes (%d)", per, localKeyBytes)
	}
}

// BenchmarkLocalDisk measures the local tier's file per key: 2,000 keys of
// the bench's small learner and of a realistic one written by batches of
// spillBatch as the worker does (file-B/key after the first write), then
// each rewritten three times (churn-B/key: bbolt keeps freed pages for
// reuse, so the file grows with rewrites up to a bound), against the
// encoded value (value-B/key) and the learner's own memory.
//
//	go test ./processor -run XXX -bench BenchmarkLocalDisk -benchtime 1x
func BenchmarkLocalDisk(b *testing.B) {
	for _, lc := range []struct {
		name    string
		d, k, b int
	}{{"small-d16-k2-B16", 16, 2, 16}, {"realistic-d16-k8-B64", 16, 8, 64}, {"realistic-d16-k8-B128", 16, 8, 128}} {
		b.Run(lc.name, func(b *testing.B) {
			spec := &keymodel.Spec{Learner: benchLearner(lc.d, lc.k, lc.b)}
			m := warmModel(b, spec, 3*lc.b)
			st := m.Snapshot()
			val, err := appendLocal(nil, &codec.Snapshot{State: st.Learner})
			if err != nil {
				b.Fatal(err)
			}
			kb, err := spec.Bytes()
			if err != nil {
				b.Fatal(err)
			}
			const keys = 2000
			for range b.N {
				path := filepath.Join(b.TempDir(), "disk.db")
				s, err := localstore.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				write := func() {
					for i := 0; i < keys; i += spillBatch {
						items := make([]localstore.Item, 0, spillBatch)
						for j := i; j < min(i+spillBatch, keys); j++ {
							items = append(items, localstore.Item{Key: fmt.Sprintf("device-%06d", j), Value: val})
						}
						if err := s.Put(items); err != nil {
							b.Fatal(err)
						}
					}
				}
				write()
				first := s.FileBytes()
				for range 3 {
					write()
				}
				churn := s.FileBytes()
				fi, _ := os.Stat(path)
				if fi.Size() != churn {
					b.Fatalf("FileBytes %d, stat %d", churn, fi.Size())
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(val)), "value-B/key")
				b.ReportMetric(float64(first)/keys, "file-B/key")
				b.ReportMetric(float64(churn)/keys, "churn-B/key")
				b.ReportMetric(float64(kb), "memory-B/key")
			}
		})
	}
}
