package processor

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/internal/localstore"
	"github.com/kpcastream/kpcastream/learners"
)

// benchLearner is the learner of "kpcastream bench" (--learner ikpca
// --dim D --components K --budget B).
func benchLearner(d, k, b int) learners.Config {
	return learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: k, Budget: b,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(d)}}
}

// BenchmarkLocalCycle measures one key's round through the local tier as
// the worker does it: its model encoded and written (by batches of
// spillBatch, one commit each), then read back and restored — the cost
// of every message of a round-robin over more keys than fit in memory.
// Formats: "snapshot" (the snapshot's msgpack, a new State each way, a new
// model), "local" (the local format, local_format.go, a new State each
// way, a new model: the worker before issue 30's fourth round) and
// "reuse" (the worker's path now: the learner's state into one reused
// State, decoded into another, restored into an existing model whose
// learner shares a Scratch).
func BenchmarkLocalCycle(b *testing.B) {
	for _, lc := range []struct {
		name    string
		d, k, b int
	}{{"small-d16-k2-B16", 16, 2, 16}, {"realistic-d16-k8-B64", 16, 8, 64}} {
		for _, format := range []string{"snapshot", "local", "reuse"} {
			b.Run(lc.name+"/"+format, func(b *testing.B) { benchLocalCycle(b, benchLearner(lc.d, lc.k, lc.b), format) })
		}
	}
}

func benchLocalCycle(b *testing.B, lc learners.Config, format string) {
	spec := &keymodel.Spec{Learner: lc}
	local, reuse := format != "snapshot", format == "reuse"
	if reuse {
		spec = spec.WithScratch()
	}
	var spill *learners.State
	dec := localDecoder{keep: true}
	st, err := localstore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const keys = 256
	models := make([]*keymodel.Model, keys)
	names := make([]string, keys)
	xs := vectors(3, 4*lc.Budget)
	for i := range models {
		names[i] = fmt.Sprint("key", i)
		if models[i], err = keymodel.New(spec); err != nil {
			b.Fatal(err)
		}
		var res keymodel.Result
		obs := make([]codec.Observation, 1)
		for j := range 2 * lc.Budget {
			obs[0].X = pad(xs[(i+j)%len(xs)], lc.Dim)
			if err := models[i].Apply(&res, obs, "k", uint64(j+1)); err != nil {
				b.Fatal(err)
			}
		}
	}
	cfg := lc.WithDefaults()
	items := make([]localstore.Item, 0, spillBatch)
	var buf, enc []byte
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += spillBatch {
		items, enc = items[:0], enc[:0]
		for j := range spillBatch {
			i := (n + j) % keys
			var s keymodel.State
			if reuse {
				spill = learners.StateInto(models[i].Learner(), spill)
				s.Learner = spill
			} else {
				s = models[i].Snapshot()
			}
			snap := &codec.Snapshot{Key: names[i], Pipeline: "p", State: s.Learner}
			var v []byte
			if local {
				at := len(enc)
				enc, err = appendLocal(enc, snap)
				v = enc[at:len(enc):len(enc)]
			} else {
				v, err = codec.EncodeSnapshot(snap)
			}
			if err != nil {
				b.Fatal(err)
			}
			items = append(items, localstore.Item{Key: names[i], Value: v})
		}
		if err := st.Put(items); err != nil {
			b.Fatal(err)
		}
		for j := range spillBatch {
			i := (n + j) % keys
			v, ok, err := st.Get(buf, names[i])
			if err != nil || !ok {
				b.Fatal(err, ok)
			}
			buf = v[:0]
			var snap *codec.Snapshot
			switch {
			case reuse:
				snap, err = dec.decode(v, cfg)
			case local:
				snap, err = decodeLocal(v, cfg)
			default:
				snap, err = codec.DecodeSnapshot(v)
			}
			if err != nil {
				b.Fatal(err)
			}
			if reuse {
				// The worker restores into a model a spill set free (restoreLocal).
				if err := models[i].Learner().Restore(snap.State); err != nil {
					b.Fatal(err)
				}
				continue
			}
			if models[i], _, err = keymodel.Restore(spec, keymodel.State{Learner: snap.State}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// pad returns x widened (or cut) to d values.
func pad(x []float64, d int) []float64 {
	out := make([]float64, d)
	for i := range out {
		out[i] = x[i%len(x)] * float64(1+i/len(x))
	}
	return out
}
