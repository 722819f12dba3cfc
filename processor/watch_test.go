package processor

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
)

// watchFixture is a worker with one ready ikpca key, without NATS: enough
// for the hook.
func watchFixture(tb testing.TB) (*worker, *entry) {
	tb.Helper()
	cfg := learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 8, Budget: 128, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.1}}
	l, err := learners.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	pl := &pipeline{cfg: PipelineConfig{Name: "p", Learner: cfg}}
	w := &worker{deps: deps{watch: &ops.Watches{}}}
	e := &entry{key: "k", pipe: pl, m: modelOf(tb, pl, l), stored: 1}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, cfg.Dim)
	w.obs = []codec.Observation{{X: x, TS: float64(time.Now().UnixNano()) / 1e9}}
	for i := range 400 {
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		if err := e.m.Apply(&w.res, w.obs, "k", uint64(i+1)); err != nil {
			tb.Fatal(err)
		}
	}
	if len(w.res.Outs) != 1 {
		tb.Fatal("learner not ready after 400 observations")
	}
	return w, e
}

// TestWatchOut checks the worker's hook: nothing recorded for an
// unwatched key, the outputs recorded once it is watched (with the
// learner's eigenvalues, fill and timing), nothing once the watch ended.
func TestWatchOut(t *testing.T) {
	w, e := watchFixture(t)
	ws := w.watch
	w.watchOut(e, time.Now(), time.Millisecond)
	if ws.Any() || ws.Get("p", "k") != nil {
		t.Fatal("an unwatched key has a record")
	}
	kw, err := ws.Start("p", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ws.Start("p", "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.watchOut(e, time.Now(), time.Millisecond)
	}
	v := kw.View()
	if v.Count != 3 || len(v.Samples.SPE) != 3 || len(v.Samples.Z) != 8 || len(v.Buckets.Eig) != 8 || v.Buckets.Stored[0] == 0 {
		t.Fatalf("record %+v", v)
	}
	if v.Samples.SPE[0] != w.res.Outs[0].SPE || v.Buckets.Age[0] < 0 || v.Buckets.Learn[0] != 1e-3 {
		t.Errorf("recorded spe %v age %v learn %v, want %v, ≥ 0, 1e-3", v.Samples.SPE[0], v.Buckets.Age[0], v.Buckets.Learn[0], w.res.Outs[0].SPE)
	}
	if n := other.View().Count; n != 0 {
		t.Errorf("another watched key recorded %d outputs of k", n)
	}
	ws.Stop()
	w.watchOut(e, time.Now(), time.Millisecond)
	if ws.Any() || kw.View().Count != 3 {
		t.Error("recorded after the watch ended")
	}
}

// BenchmarkWatchOut is the hook's cost per message: unwatched (the
// default for every key) and watched (kpcastream bench's learner: ikpca,
// B = 128, d = 16, k = 8).
func BenchmarkWatchOut(b *testing.B) {
	w, e := watchFixture(b)
	b.Run("unwatched", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			w.watchOut(e, start, time.Microsecond)
		}
	})
	b.Run("watched", func(b *testing.B) {
		if _, err := w.watch.Start("p", "k", nil); err != nil {
			b.Fatal(err)
		}
		defer w.watch.Stop()
		start := time.Now()
		for b.Loop() {
			w.watchOut(e, start, time.Microsecond)
		}
	})
}
