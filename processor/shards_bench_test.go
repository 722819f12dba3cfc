package processor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

// BenchmarkSnapshotSaves measures what the one snapshot bucket of a
// pipeline takes (issue 29: do snapshots need to follow the shards?):
// saves of real ikpca states, light (d 3, B 16, k 2) and CPU-bound (d 64,
// B 400, k 16), by 8 concurrent savers over 64 keys, each a
// compare-and-set on the key's last revision as a worker's save is. It
// reports saves/s and the snapshot's size; a pipeline asks for about
// (input msgs/s) / snapshot.every_messages + keys / snapshot.every saves a
// second (the defaults: rate/1000 + keys/30).
func BenchmarkSnapshotSaves(b *testing.B) {
	for _, c := range []struct {
		name      string
		d, bud, k int
	}{{"light", 3, 16, 2}, {"cpu", 64, 400, 16}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnvB(b)
			lc := learners.Config{Learner: learners.KindIKPCA, Dim: c.d, Budget: c.bud, Components: c.k,
				Kernel: learners.Kernel{Name: learners.KernelRBF}, Forget: 0.99, Seed: 1}
			l, err := learners.New(lc)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			x := make([]float64, c.d)
			for range 4 * c.bud {
				for j := range x {
					x[j] = rng.NormFloat64()
				}
				if err := l.Learn(x); err != nil {
					b.Fatal(err)
				}
			}
			st := l.State()
			data, err := codec.EncodeSnapshot(&codec.Snapshot{Key: "k", Pipeline: "p", State: st})
			if err != nil {
				b.Fatal(err)
			}
			const keys, savers = 64, 8
			revs := make([]atomic.Uint64, keys)
			var next atomic.Int64
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			var failed atomic.Pointer[error]
			for range savers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						k := int(i % keys)
						key := snapshot.JoinKey("p", fmt.Sprint("k", k))
						// Keys are split among savers by i, so each key's
						// saves are serial only within a saver: retry on a
						// conflict with the revision read back.
						rev, err := e.store.Save(ctx, key, &codec.Snapshot{Key: fmt.Sprint("k", k), Pipeline: "p", State: st, LastSeq: uint64(i + 1)}, revs[k].Load())
						if err != nil {
							_, r, lerr := e.store.Load(ctx, key)
							if lerr == nil {
								rev, err = e.store.Save(ctx, key, &codec.Snapshot{Key: fmt.Sprint("k", k), Pipeline: "p", State: st, LastSeq: uint64(i + 1)}, r)
							}
						}
						if err != nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
						revs[k].Store(rev)
					}
				}()
			}
			wg.Wait()
			if p := failed.Load(); p != nil {
				b.Fatal(*p)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "saves/s")
			b.ReportMetric(float64(len(data)), "snapshot-bytes")
		})
	}
}
