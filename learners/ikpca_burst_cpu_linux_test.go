package learners

import (
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"
)

// TestLearnCPUBurst measures, in thread CPU time, ikpca's Learn at (B, d, k)
// = (2048, 784, 32) on the isotropic benchmark stream after 2B observations
// with centroid's move bursts (the default, moveBurstSize) and without
// (burst 1, the schedule before), and kha's beside them. Opt-in:
//
//	KPCASTREAM_BENCH=1 go test ./learners -run TestLearnCPUBurst -v
func TestLearnCPUBurst(t *testing.T) {
	if os.Getenv("KPCASTREAM_BENCH") == "" {
		t.Skip("a measurement, not a check: set KPCASTREAM_BENCH=1")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const b, d, k, n = 2048, 784, 32, 128
	rng := rand.New(rand.NewPCG(42, uint64(d)))
	xs := make([][]float64, 4096)
	for i := range xs {
		xs[i] = make([]float64, d)
		for j := range xs[i] {
			xs[i][j] = rng.NormFloat64()
		}
	}
	cfg := Config{Dim: d, Components: k, Budget: b, Kernel: Kernel{Name: KernelRBF, Gamma: 1 / float64(d)}}
	measure := func(l Learner) time.Duration {
		for i := range 2 * b {
			if err := l.Learn(xs[i%len(xs)]); err != nil {
				t.Fatal(err)
			}
		}
		var r []time.Duration
		i := 2 * b
		for range 5 {
			start := threadCPU(t)
			for range n {
				if err := l.Learn(xs[i%len(xs)]); err != nil {
					t.Fatal(err)
				}
				i++
			}
			r = append(r, (threadCPU(t)-start)/n)
		}
		sort.Slice(r, func(a, b int) bool { return r[a] < r[b] })
		return r[2]
	}
	cfg.Learner = KindKHA
	kl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kha := measure(kl)
	for _, burst := range []int64{moveBurstSize, 1} {
		cfg.Learner = KindIKPCA
		l, err := NewIKPCA(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.moveBurst = burst
		ik := measure(l)
		t.Logf("Learn (%d, %d, %d), burst %d: ikpca %v, kha %v CPU/op, ratio %.2f", b, d, k, burst, ik, kha, float64(ik)/float64(kha))
	}
}
