package processor

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
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
	w := &worker{p: &Processor{}, eig: make([]float64, cfg.Components)}
	e := &entry{key: "k", pipe: pl, l: l, stored: 1}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, cfg.Dim)
	w.obs = []codec.Observation{{X: x, TS: float64(time.Now().UnixNano()) / 1e9}}
	for i := range 400 {
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		if err := apply(&w.res, e.l, nil, nil, w.obs, "k", uint64(i+1), w.eig); err != nil {
			tb.Fatal(err)
		}
	}
	if len(w.res.outs) != 1 {
		tb.Fatal("learner not ready after 400 observations")
	}
	return w, e
}

// TestWatch checks the hook: nothing recorded for an unwatched key, the
// outputs recorded once it is watched, and the record dropped when the
// watch is stopped.
func TestWatch(t *testing.T) {
	w, e := watchFixture(t)
	ws := &w.p.watch
	w.watchOut(e, time.Now(), time.Millisecond)
	if ws.n.Load() != 0 || ws.get(e.pipe, "k") != nil {
		t.Fatal("an unwatched key has a record")
	}
	kw, err := ws.watch(e.pipe, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.watchOut(e, time.Now(), time.Millisecond)
	}
	v := w.p.view(e.pipe, "k", kw)
	if v.Count != 3 || len(v.Samples.SPE) != 3 || len(v.Samples.Z) != 8 || len(v.Buckets.Eig) != 8 || v.Buckets.Stored[0] == 0 {
		t.Fatalf("record %+v", v.View)
	}
	if v.Samples.SPE[0] != w.res.outs[0].SPE || v.Buckets.Age[0] < 0 || v.Buckets.Learn[0] != 1e-3 {
		t.Errorf("recorded spe %v age %v learn %v, want %v, ≥ 0, 1e-3", v.Samples.SPE[0], v.Buckets.Age[0], v.Buckets.Learn[0], w.res.outs[0].SPE)
	}
	if v.Budget != 128 || v.Components != 8 || v.Learner != "ikpca" {
		t.Errorf("key view header %+v", v)
	}
	for i := range maxWatched - 1 {
		if _, err := ws.watch(e.pipe, "other-"+string(rune('a'+i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ws.watch(e.pipe, "one too many", nil); err == nil {
		t.Errorf("watched more than %d keys", maxWatched)
	}
	ws.stop()
	if ws.n.Load() != 0 || ws.get(e.pipe, "k") != nil {
		t.Error("records kept after stop")
	}
}

// TestWatchExpires checks that a watch ends by itself after its TTL.
func TestWatchExpires(t *testing.T) {
	ws := &watches{}
	pl := &pipeline{}
	kw, err := ws.watch(pl, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	kw.timer.Reset(10 * time.Millisecond) // as if the TTL were 10ms
	deadline := time.Now().Add(5 * time.Second)
	for ws.n.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not expire")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ws.get(pl, "k") != nil {
		t.Error("expired watch still listed")
	}
}

func TestLabels(t *testing.T) {
	for _, c := range []struct {
		o           codec.Output
		label, pred string
	}{
		{codec.Output{}, "", ""},
		{codec.Output{Y: codec.Number(2)}, "2", ""},
		{codec.Output{Pred: codec.String("cat")}, "", "cat"},
		{codec.Output{Y: codec.String("dog"), Pred: codec.String("cat")}, "dog", "cat"},
	} {
		if l, p := labels(&c.o); l != c.label || p != c.pred {
			t.Errorf("labels of %+v = %q, %q; want %q, %q", c.o, l, p, c.label, c.pred)
		}
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
		if _, err := w.p.watch.watch(e.pipe, "k", nil); err != nil {
			b.Fatal(err)
		}
		defer w.p.watch.stop()
		start := time.Now()
		for b.Loop() {
			w.watchOut(e, start, time.Microsecond)
		}
	})
}
