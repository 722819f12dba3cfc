package keymodel

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// heapPerModel builds n models of s, feeds each past its budget with seeded
// messages of dimension d, and returns the heap they hold per model (the
// spec's shared Scratch, if any, not counted: a worker's, charged once).
func heapPerModel(t testing.TB, s *Spec, n, msgs, d int) (float64, int) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rng := rand.New(rand.NewPCG(3, 4))
	ms := make([]*Model, n)
	var res Result
	for i := range ms {
		m, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		for j := range msgs {
			x := make([]float64, d)
			for c := range x {
				x[c] = rng.NormFloat64()
			}
			obs := []codec.Observation{{X: x}}
			if s.Classes != nil {
				obs[0].Y = codec.String(s.Classes.Names()[j%2])
			}
			if err := m.Apply(&res, obs, "k", uint64(j+1)); err != nil {
				t.Fatal(err)
			}
		}
		ms[i] = m
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(after.HeapAlloc - before.HeapAlloc)
	if s.Scratch != nil {
		// The working memory the models share is charged once per
		// worker (ScratchBytes), not per key.
		held -= float64(s.Scratch.Bytes())
	}
	per := held / float64(n)
	b := ms[0].Bytes()
	runtime.KeepAlive(ms)
	return per, b
}

// TestBytesCoversHeap checks Model.Bytes against the heap that warm models
// really hold: never below it (a budget divided by Bytes must not overrun),
// and not more than 2.5 times it (nor would it fill the budget).
func TestBytesCoversHeap(t *testing.T) {
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}
	small := learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 2, Budget: 16, Kernel: rbf, Seed: 1}
	large := learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 8, Budget: 128, Kernel: rbf, Seed: 1}
	mon := monitor.Config{Dim: 16}.WithDefaults(16)
	for _, tc := range []struct {
		name string
		spec *Spec
		d    int
		msgs int
		n    int
	}{
		{"ikpca B=16 d=16 k=2", &Spec{Learner: small}, 16, 40, 200},
		{"ikpca B=16 d=16 k=2 shared scratch", &Spec{Learner: small, Scratch: learners.NewScratch()}, 16, 40, 200},
		{"ikpca B=128 d=16 k=8 shared scratch", &Spec{Learner: large, Scratch: learners.NewScratch()}, 16, 140, 20},
		{"ikpca B=128 d=16 k=8", &Spec{Learner: large}, 16, 140, 20},
		{"ikpca B=16 with monitor", &Spec{Learner: small, Monitor: &mon}, 16, 40, 200},
		{"every part (B=16 d=3)", fullSpec(nil), 3, 60, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			if testing.Short() {
				n = max(n/4, 10)
			}
			per, b := heapPerModel(t, tc.spec, n, tc.msgs, tc.d)
			sb, err := tc.spec.Bytes()
			if err != nil || sb != b {
				t.Fatalf("Spec.Bytes = %d, %v; want the model's %d", sb, err, b)
			}
			if tc.spec.Scratch != nil {
				if sb, err := tc.spec.ScratchBytes(); err != nil || sb != tc.spec.Scratch.Bytes() {
					t.Errorf("ScratchBytes %d, %v; the shared Scratch holds %d B", sb, err, tc.spec.Scratch.Bytes())
				}
			}
			t.Logf("heap per model %.0f B, Bytes %d B (KeyOverhead %d)", per, b, KeyOverhead)
			if float64(b) < per || float64(b) > 2.5*per+KeyOverhead {
				t.Errorf("Bytes %d B for a model holding %.0f B of heap: want between 1× and 2.5× (+KeyOverhead)", b, per)
			}
		})
	}
}

// BenchmarkModelBytes reports the heap of a warm model of the bench's small
// learner beside its Bytes (heap-B/model, bytes-B/model).
func BenchmarkModelBytes(b *testing.B) {
	s := &Spec{Learner: learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 2, Budget: 16,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1}}
	b.ReportAllocs()
	var per float64
	var by int
	for b.Loop() {
		per, by = heapPerModel(b, s, 100, 40, 16)
	}
	b.ReportMetric(per, "heap-B/model")
	b.ReportMetric(float64(by), "bytes-B/model")
}
