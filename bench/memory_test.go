package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/internal/procstat"
	"github.com/kpcastream/kpcastream/learners"
)

// memoryBytes returns the learner's documented memory formula, or -1.
func memoryBytes(l learners.Learner) int64 {
	switch m := l.(type) {
	case interface{ MemoryBytes() int }:
		return int64(m.MemoryBytes())
	case interface{ MemoryBytes() int64 }:
		return m.MemoryBytes()
	}
	return -1
}

// heapInUse returns the live heap after two full collections.
func heapInUse() uint64 {
	h, _ := heapAndMallocs()
	return h
}

// heapAndMallocs returns the live heap after two full collections and the
// cumulative count of heap allocations.
func heapAndMallocs() (uint64, uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.Mallocs
}

// memFeeder feeds learners round-robin from a stream of vectors, without
// allocating per observation.
type memFeeder struct {
	ls     []learners.Learner
	x      []float64
	rng    *rand.Rand
	stream string
	i      int
}

func newMemFeeder(t testing.TB, keys int, cfg learners.Config, stream string) *memFeeder {
	t.Helper()
	f := &memFeeder{x: make([]float64, cfg.Dim), rng: rand.New(rand.NewPCG(5, 6)), stream: stream}
	for range keys {
		l, err := learners.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.ls = append(f.ls, l)
	}
	return f
}

// feed teaches n more observations, spread round-robin over the learners.
func (f *memFeeder) feed(t testing.TB, n int) {
	t.Helper()
	for range n {
		if f.stream == "isotropic" {
			for j := range f.x {
				f.x[j] = f.rng.NormFloat64()
			}
		} else {
			// learnertest.Stream's noisy ellipse, drawn from one
			// generator: Stream builds a generator per call, and that
			// garbage would move the RSS figures.
			for j := range f.x {
				f.x[j] = 0.05 * f.rng.NormFloat64()
			}
			th := 2 * math.Pi * f.rng.Float64()
			f.x[0] += math.Cos(th)
			f.x[1] += 0.5 * math.Sin(th)
		}
		if err := f.ls[f.i%len(f.ls)].Learn(f.x); err != nil {
			t.Fatalf("observation %d: %v", f.i, err)
		}
		f.i++
	}
}

func (f *memFeeder) formula() int64 {
	var s int64
	for _, l := range f.ls {
		s += memoryBytes(l)
	}
	return s
}

// TestMemoryFlat feeds an ikpca learner (B = 64, d = 16, k = 8) isotropic
// vectors, so that every observation past the budget evicts, and checks
// that the live heap grows by less than 5 % between 10·B and 100·B
// observations, and that the heap taken by the learner is within 50 % of
// its documented MemoryBytes.
func TestMemoryFlat(t *testing.T) {
	const b = 64
	cfg := learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 8, Budget: b,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1.0 / 16}}
	before := heapInUse()
	f := newMemFeeder(t, 1, cfg, "isotropic")
	f.feed(t, 10*b)
	h10, m10 := heapAndMallocs()
	f.feed(t, 90*b)
	h100, m100 := heapAndMallocs()
	runtime.KeepAlive(f)
	t.Logf("allocations: %.3f per observation between 10·B and 100·B", float64(m100-m10)/float64(90*b))
	grow := (float64(h100) - float64(h10)) / float64(h10)
	taken := int64(h10) - int64(before)
	t.Logf("heap: %d B before, %d after 10·B, %d after 100·B (growth %.2f %%); learner took %d B, MemoryBytes %d B; stored %d",
		before, h10, h100, 100*grow, taken, f.formula(), f.ls[0].Summary(nil).Stored)
	if grow >= 0.05 {
		t.Errorf("heap grew %.2f %% between 10·B and 100·B observations (%d → %d B), want < 5 %%", 100*grow, h10, h100)
	}
	if mb := f.formula(); float64(taken) > 1.5*float64(mb)+64<<10 || float64(taken) < 0.5*float64(mb) {
		t.Errorf("learner took %d B of heap, MemoryBytes says %d B: want within 50 %% (+64 KiB)", taken, mb)
	}
}

// TestMemoryLong reports the Go heap, RSS and the MemoryBytes formula
// after 1M and 10M observations: one ikpca learner (B = 512, d = 16,
// k = 8) and 1000 learners (B = 64) fed round-robin, on the stationary
// stream (learnertest.Stream). It takes minutes:
//
//	KPCASTREAM_BENCH=1 go test ./bench -run TestMemoryLong -v -timeout 60m
//
// With -short it stops at 1M. The heap after 10M must be within 5 % of
// the heap after 1M, and the RSS (measured after debug.FreeOSMemory; the
// raw RSS is logged too) below 1.1·MemoryBytes + 32 MiB.
func TestMemoryLong(t *testing.T) {
	benchEnabled(t)
	for _, tc := range []struct {
		name   string
		keys   int
		budget int
	}{{"one key B=512", 1, 512}, {"1000 keys B=64", 1000, 64}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 8, Budget: tc.budget,
				Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1.0 / 16}}
			debug.FreeOSMemory()
			base := heapInUse()
			f := newMemFeeder(t, tc.keys, cfg, "stationary")
			fed := 0
			var heap1, rss1 int64
			for _, n := range []int{1_000_000, 10_000_000} {
				if testing.Short() && n > 1_000_000 {
					break
				}
				_, m0 := heapAndMallocs()
				start := time.Now()
				f.feed(t, n-fed)
				took := time.Since(start)
				batch := n - fed
				fed = n
				h, m1 := heapAndMallocs()
				heap := int64(h)
				t.Logf("%s: %.4f allocations per observation", tc.name, float64(m1-m0)/float64(batch))
				rawRSS, peak, err := procstat.ProcessRSS()
				if err != nil {
					t.Fatal(err)
				}
				// RSS after the runtime returns freed pages to the OS: the
				// raw figure also moves with the scavenger's timing.
				debug.FreeOSMemory()
				rss, _, err := procstat.ProcessRSS()
				if err != nil {
					t.Fatal(err)
				}
				stored := 0
				for _, l := range f.ls {
					stored += l.Summary(nil).Stored
				}
				t.Logf("%s after %d: heap %s (learners %s over the %s baseline), MemoryBytes %s, RSS %s (raw %s, peak %s), stored %d, %.1f µs/obs",
					tc.name, n, mib(heap), mib(heap-int64(base)), mib(int64(base)), mib(f.formula()), mib(rss), mib(rawRSS), mib(peak), stored,
					float64(took.Microseconds())/float64(batch))
				if n == 1_000_000 {
					heap1, rss1 = heap, rss
					continue
				}
				if g := float64(heap-heap1) / float64(heap1); g >= 0.05 {
					t.Errorf("heap grew %.1f %% from 1M to 10M (%s → %s), want < 5 %%", 100*g, mib(heap1), mib(heap))
				}
				// RSS may still rise towards the formula as more of the
				// preallocated matrices are touched (dictionaries filling);
				// it must stay under the formula plus the runtime's share.
				t.Logf("RSS growth from 1M to 10M: %.1f %% (%s → %s)", 100*float64(rss-rss1)/float64(rss1), mib(rss1), mib(rss))
				if lim := int64(1.1*float64(f.formula())) + 32<<20; rss > lim {
					t.Errorf("RSS %s after 10M, above 1.1·MemoryBytes + 32 MiB = %s", mib(rss), mib(lim))
				}
			}
			runtime.KeepAlive(f)
		})
	}
}

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
