package learners

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// poison fills the whole of ws with NaN, so that a learner that read its
// working memory before writing it in a call would carry NaN into its
// state or its outputs.
func poison(ws *Scratch) {
	buf := ws.buf[:cap(ws.buf)]
	for i := range buf {
		buf[i] = math.NaN()
	}
}

// TestSharedScratchIdentical runs keys with learners that share one
// Scratch, poisoned with NaN before every call and interleaved with keys
// of other configurations (a larger one grows it), against the same keys
// with learners of their own: every projection, score and summary, and the
// final states, must be identical bit for bit.
func TestSharedScratchIdentical(t *testing.T) {
	rbf := Kernel{Name: KernelRBF, Gamma: 0.5}
	poly := Kernel{Name: KernelPoly, Degree: 2, Coef0: 1}
	cfgs := []Config{
		{Learner: KindIKPCA, Dim: 4, Components: 2, Budget: 16, Kernel: rbf, Seed: 1},
		{Learner: KindIKPCA, Dim: 4, Components: 2, Budget: 16, Kernel: rbf, Seed: 2, Eviction: "lli"},
		{Learner: KindIKPCA, Dim: 4, Components: 3, Budget: 12, Kernel: poly, Seed: 3, Eviction: "fifo", Forget: 0.99},
		{Learner: KindIKPCA, Dim: 4, Components: 2, Budget: 24, Kernel: rbf, Seed: 4, Eviction: "contribution", Forget: 0.995},
		{Learner: KindIKPCA, Dim: 4, Components: 3, Budget: 40, Kernel: rbf, Seed: 5, Refresh: 3},
	}
	const keysPer, steps = 3, 400
	ws := NewScratch()
	type key struct {
		own, shared *IKPCA
		rng         *rand.Rand
	}
	var keys []key
	for i, c := range cfgs {
		for j := range keysPer {
			own, err := NewIKPCA(c)
			if err != nil {
				t.Fatal(err)
			}
			sh, err := NewIKPCA(c)
			if err != nil {
				t.Fatal(err)
			}
			if !ShareScratch(sh, ws) {
				t.Fatal("ShareScratch refused an IKPCA")
			}
			if got, want := sh.MemoryBytes(), own.MemoryBytes()-8*own.scratchLen(); got != want {
				t.Fatalf("%+v: MemoryBytes shared %d, want own %d less its scratch = %d", c, got, own.MemoryBytes(), want)
			}
			keys = append(keys, key{own, sh, rand.New(rand.NewPCG(uint64(i), uint64(j)))})
		}
	}
	order := rand.New(rand.NewPCG(9, 9))
	x := make([]float64, 4)
	for step := range steps * len(keys) {
		k := keys[order.IntN(len(keys))]
		// A drifting mixture: the stream leaves regions the dictionary holds.
		shift := float64(step) / float64(steps*len(keys)) * 4
		for i := range x {
			x[i] = k.rng.NormFloat64() + shift*float64(i%2)
			if k.rng.IntN(3) == 0 {
				x[i] += 3
			}
		}
		poison(ws)
		err1 := k.own.Learn(x)
		err2 := k.shared.Learn(x)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("step %d: Learn own %v, shared %v", step, err1, err2)
		}
		poison(ws)
		y1, n1, err1 := k.own.Score(nil, x)
		y2, n2, err2 := k.shared.Score(nil, x)
		if (err1 == nil) != (err2 == nil) || !sameBits(y1, y2) || !sameBits([]float64{n1.SPE, n1.T2}, []float64{n2.SPE, n2.T2}) {
			t.Fatalf("step %d: Score own %v %v %v, shared %v %v %v", step, y1, n1, err1, y2, n2, err2)
		}
		if step%97 == 0 && k.own.ready {
			poison(ws)
			if err1, err2 = k.own.Sync(3), k.shared.Sync(3); (err1 == nil) != (err2 == nil) {
				t.Fatalf("step %d: Sync own %v, shared %v", step, err1, err2)
			}
		}
		s1, s2 := k.own.Summary(nil), k.shared.Summary(nil)
		if !reflect.DeepEqual(s1, s2) {
			t.Fatalf("step %d: Summary own %+v, shared %+v", step, s1, s2)
		}
		if !reflect.DeepEqual(k.own.State(), k.shared.State()) {
			t.Fatalf("step %d: key of %+v: states differ after %d observations", step, k.own.cfg, k.own.seen)
		}
	}
	moved := 0
	for i, k := range keys {
		if !reflect.DeepEqual(k.own.State(), k.shared.State()) {
			t.Errorf("key %d (%+v): states differ after %d observations", i, k.own.cfg, k.own.seen)
		}
		if k.own.cnt != nil {
			moved += int(k.own.moveRate * 1000)
		}
	}
	if moved == 0 {
		t.Error("no centroid move in the run: the carried statistics were not exercised")
	}
	if want, _ := ScratchBytes(cfgs[len(cfgs)-1]); ws.Bytes() != want {
		t.Errorf("scratch holds %d B, want the largest learner's %d", ws.Bytes(), want)
	}
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestScratchBytes checks ScratchBytes against an IKPCA's layout and a
// kind that keeps its own working memory.
func TestScratchBytes(t *testing.T) {
	c := Config{Learner: KindIKPCA, Dim: 16, Components: 2, Budget: 16, Kernel: Kernel{Name: KernelRBF, Gamma: 0.5}}
	l, err := NewIKPCA(c)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ScratchBytes(c)
	ws := NewScratch()
	ShareScratch(l, ws)
	if err != nil || n != ws.Bytes() || n < 8*l.scratchLen() {
		t.Fatalf("ScratchBytes(ikpca) = %d, %v; want what a shared Scratch holds for it, %d ≥ %d", n, err, ws.Bytes(), 8*l.scratchLen())
	}
	c.Learner = KindKHA
	if n, err := ScratchBytes(c); err != nil || n != 0 {
		t.Fatalf("ScratchBytes(kha) = %d, %v; want 0", n, err)
	}
	c.Budget = -1
	if _, err := ScratchBytes(c); err == nil {
		t.Fatal("ScratchBytes of a bad config: no error")
	}
}

// TestStateInto checks that StateInto into a reused State equals State(),
// whatever the State held before (another shape, another policy's
// matrices), and allocates nothing once warm.
func TestStateInto(t *testing.T) {
	rbf := Kernel{Name: KernelRBF, Gamma: 0.5}
	var ls []*IKPCA
	for i, ev := range []string{EvictCentroid, "lli", "fifo", EvictCentroid} {
		l, err := NewIKPCA(Config{Learner: KindIKPCA, Dim: 3, Components: 2, Budget: 8 + 4*i, Kernel: rbf, Seed: uint64(i), Eviction: ev})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var s *State
	for step := range 200 {
		l := ls[step%len(ls)]
		x := []float64{rng.NormFloat64(), rng.NormFloat64() * 2, rng.NormFloat64() + 1}
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
		s = StateInto(l, s)
		if want := l.State(); !reflect.DeepEqual(s, want) {
			t.Fatalf("step %d (%s, B=%d): StateInto into a reused State differs from State()", step, l.cfg.Eviction, l.b)
		}
	}
	l := ls[0]
	s = l.StateInto(nil)
	if n := testing.AllocsPerRun(20, func() { s = l.StateInto(s) }); n != 0 {
		t.Errorf("StateInto into a warm State: %v allocations, want 0", n)
	}
}
