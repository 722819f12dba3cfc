package learners_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func TestIKPCAConformance(t *testing.T) {
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 1}
	for _, tc := range []struct {
		name string
		cfg  learners.Config
	}{
		{"rbf_ald_centroid", learners.Config{Dim: 3, Components: 3, Budget: 24, Kernel: rbf, Seed: 3}},
		{"rbf_ald_lli", learners.Config{Dim: 3, Components: 3, Budget: 24, Kernel: rbf, Seed: 3, Eviction: "lli"}},
		{"rbf_ald_centroid_forget", learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: rbf, Eviction: learners.EvictCentroid, Forget: 0.99}},
		// γ = 4 and f = 0.9: members are replaced (swaps with the dropped
		// coordinate carried) as well as moved.
		{"rbf_centroid_swaps", learners.Config{Dim: 3, Components: 2, Budget: 12, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 4}, Forget: 0.9}},
		{"rbf_coherence_centroid", learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: rbf, Admission: "coherence", Coherence: 0.5}},
		{"poly_centroid", learners.Config{Dim: 2, Components: 3, Budget: 10, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Coef0: 1, Degree: 3}, Eviction: learners.EvictCentroid}},
		{"rbf_ald_fifo_forget", learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: rbf, Eviction: "fifo", Forget: 0.99}},
		{"rbf_coherence_contribution", learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: rbf, Admission: "coherence", Coherence: 0.5, Eviction: "contribution"}},
		{"poly_d2", learners.Config{Dim: 2, Components: 4, Budget: 12, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Coef0: 1, Degree: 2}}},
		{"laplacian_refresh1", learners.Config{Dim: 4, Components: 2, Budget: 30, Refresh: 1, Kernel: learners.Kernel{Name: learners.KernelLaplacian, Gamma: 0.5}}},
		{"linear_d2", learners.Config{Dim: 2, Components: 1, Budget: 8, Kernel: learners.Kernel{Name: learners.KernelLinear}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newL := func() learners.Learner {
				l, err := learners.New(tc.cfg)
				if err != nil {
					t.Fatalf("New(%+v): %v", tc.cfg, err)
				}
				return l
			}
			learnertest.Check(t, newL, learnertest.Options{Dim: tc.cfg.Dim, Budget: tc.cfg.Budget, Seed: 7, Optional: ikpcaOptional})
		})
	}
}

// ikpcaOptional are the ikpca state scalars added after its first
// snapshots (the budget-fit figures).
var ikpcaOptional = []string{"dropped", "swap_rate", "move_rate", "outside"}

func TestIKPCAConfigErrors(t *testing.T) {
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 1}
	for _, tc := range []struct {
		name  string
		cfg   learners.Config
		field string
	}{
		{"no_dim", learners.Config{Components: 2, Kernel: rbf}, "dim"},
		{"k_above_budget", learners.Config{Dim: 2, Components: 9, Budget: 8, Kernel: rbf}, "components"},
		{"forget_above_1", learners.Config{Dim: 2, Components: 2, Kernel: rbf, Forget: 1.5}, "forget"},
		{"unknown_eviction", learners.Config{Dim: 2, Components: 2, Kernel: rbf, Eviction: "random"}, "eviction"},
		{"unknown_admission", learners.Config{Dim: 2, Components: 2, Kernel: rbf, Admission: "all"}, "admission"},
		{"tolerance_1", learners.Config{Dim: 2, Components: 2, Kernel: rbf, Tolerance: 1}, "tolerance"},
		{"swap_ratio_below_1", learners.Config{Dim: 2, Components: 2, Kernel: rbf, SwapRatio: 0.5}, "swap_ratio"},
		{"swap_ratio_inf", learners.Config{Dim: 2, Components: 2, Kernel: rbf, SwapRatio: math.Inf(1)}, "swap_ratio"},
		{"unknown_kernel", learners.Config{Dim: 2, Components: 2, Kernel: learners.Kernel{Name: "cosine"}}, "kernel"},
		{"negative_gamma", learners.Config{Dim: 2, Components: 2, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: -1}}, "gamma"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := learners.NewIKPCA(tc.cfg)
			if !errors.Is(err, learners.ErrConfig) {
				t.Fatalf("NewIKPCA(%+v) = %v, want ErrConfig", tc.cfg, err)
			}
			if got := err.Error(); !strings.Contains(got, tc.field) {
				t.Fatalf("error %q does not name %q", got, tc.field)
			}
		})
	}
	// Every problem at once.
	err := learners.Config{Learner: "x", Components: 0, Budget: -1, Forget: 2}.Validate()
	for _, f := range []string{"kind", "dim", "budget", "components", "kernel", "forget"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Validate() = %v, does not name %q", err, f)
		}
	}
}

// streamOnce feeds the rows of ds in the given order and returns the learner's model.
func streamOnce(t *testing.T, l learners.Learner, x []float64, d int, order []int) *learners.Model {
	t.Helper()
	for _, i := range order {
		if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
			t.Fatalf("Learn(row %d): %v", i, err)
		}
	}
	m, err := l.Model()
	if err != nil {
		t.Fatalf("Model: %v", err)
	}
	return m
}

// TestIKPCAStationaryAccuracy replays each data set once as a shuffled
// stream through ikpca with B = 200 and requires a similarity (mean cos² of
// the k = 5 principal angles) of at least 0.99 against batch KPCA on all rows.
func TestIKPCAStationaryAccuracy(t *testing.T) {
	sets := []khaData{syntheticRing(5, 6000)}
	for _, name := range []string{"wine", "three_clusters", "two_spirals"} {
		sets = append(sets, loadKHAData(t, name))
	}
	for _, ds := range sets {
		t.Run(ds.name, func(t *testing.T) {
			ref, err := learners.FitBatch(ds.kern, ds.x, ds.n, ds.d, 5)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(9, 9))
			order := rng.Perm(ds.n)
			l, err := learners.NewIKPCA(learners.Config{Dim: ds.d, Components: 5, Budget: 200, Kernel: ds.kern})
			if err != nil {
				t.Fatal(err)
			}
			live, err := kpcaeval.CompareFit(ref, streamOnce(t, l, ds.x, ds.d, order))
			if err != nil {
				t.Fatal(err)
			}
			// The published basis lags by up to Refresh observations (a
			// tenth of these short files); Sync catches up before export.
			m, rep := syncedReport(t, l, ref)
			t.Logf("%s: live similarity before Sync %.6f", ds.name, live.Similarity)
			if live.Similarity < 0.95 {
				t.Errorf("%s: live similarity %.5f, want ≥ 0.95", ds.name, live.Similarity)
			}
			t.Logf("%s: n=%d gap(5,6)=%.3f similarity=%.6f cos=%.5f eig rel err=%.2g stored=%d recon=%.4g (batch %.4g)",
				ds.name, ds.n, rep.Gap, rep.Similarity, rep.Cosines, rep.EigRelErr, len(m.Points), rep.ReconError, rep.ReconErrorBatch)
			if rep.Gap < 0.10 {
				t.Fatalf("%s: gap %.3f below 10%%: the top-5 subspace is ill-defined; pick another kernel", ds.name, rep.Gap)
			}
			if rep.Similarity < 0.99 {
				t.Errorf("%s: similarity %.5f, want ≥ 0.99", ds.name, rep.Similarity)
			}
			for i, e := range rep.EigRelErr {
				if e > 0.05 {
					t.Errorf("%s: eigenvalue %d relative error %.3g, want ≤ 0.05", ds.name, i, e)
				}
			}
		})
	}
}

// syntheticRing returns n seeded points on a noisy ring in d = 4 whose
// radius varies with the angle: a stationary stream with a well-separated
// top-5 kernel subspace under rbf γ = 1.
func syntheticRing(seed uint64, n int) khaData {
	ds := syntheticEllipse(seed, n)
	ds.name = fmt.Sprintf("synthetic_%d", n)
	return ds
}

// TestIKPCATracking replays drift_stream.csv (abrupt change at row 10,000)
// through ikpca with forgetting and requires a similarity of at least 0.95
// with the batch KPCA of the last 2,000 rows within 3,000 rows of the change.
func TestIKPCATracking(t *testing.T) {
	x, n, d, _, err := learnertest.LoadCSV(filepath.Join(learnertest.DataDir(t), "drift_stream.csv"), []string{"phase"})
	if err != nil {
		t.Fatal(err)
	}
	kern := learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}
	const w, k = 2000, 5
	l, err := learners.NewIKPCA(learners.Config{Dim: d, Components: k, Budget: 200, Kernel: kern, Forget: 0.999})
	if err != nil {
		t.Fatal(err)
	}
	checkpoints := map[int]float64{10000: 0.99, 13000: 0.95, 15000: 0.95, 20000: 0.95}
	for i := range n {
		if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
			t.Fatal(err)
		}
		want, ok := checkpoints[i+1]
		if !ok {
			continue
		}
		win := x[(i+1-w)*d : (i+1)*d]
		m, err := l.Model()
		if err != nil {
			t.Fatal(err)
		}
		rep, err := kpcaeval.Compare(m, win, w, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("row %d: similarity %.4f (want ≥ %.2f) gap %.3f eig rel err %.2g", i+1, rep.Similarity, want, rep.Gap, rep.EigRelErr)
		if rep.Similarity < want {
			t.Errorf("row %d: similarity %.4f, want ≥ %.2f", i+1, rep.Similarity, want)
		}
	}
}

// TestIKPCATightBudget measures each eviction policy when the data need
// more dictionary points than the budget allows (a noisy ring in d = 4,
// rbf γ = 1, B = 40): accuracy degrades gracefully, and the figures are
// the basis of the README's advice on choosing a policy.
//
//	go test ./learners -run TestIKPCATightBudget -v
func TestIKPCATightBudget(t *testing.T) {
	x, n, d, k, kern := tightRing()
	ref, err := learners.FitBatch(kern, x, n, d, k)
	if err != nil {
		t.Fatal(err)
	}
	order := identity(n)
	sims := map[string]float64{}
	for _, ev := range []string{"lli", "fifo", "contribution"} {
		for _, b := range []int{40, 160} {
			l, err := learners.NewIKPCA(learners.Config{Dim: d, Components: k, Budget: b, Kernel: kern, Eviction: ev})
			if err != nil {
				t.Fatal(err)
			}
			streamOnce(t, l, x, d, order)
			_, rep := syncedReport(t, l, ref)
			t.Logf("eviction %-12s B=%3d: similarity %.4f (gap %.3f)", ev, b, rep.Similarity, rep.Gap)
			if b == 40 {
				sims[ev] = rep.Similarity
			} else if rep.Similarity < 0.99 {
				t.Errorf("eviction %s, B=%d: similarity %.4f, want ≥ 0.99 with room for the data", ev, b, rep.Similarity)
			}
		}
	}
	for ev, s := range sims {
		if s < 0.5 {
			t.Errorf("eviction %s, B=40: similarity %.4f, want a graceful degradation (≥ 0.5)", ev, s)
		}
	}
}

// tightRing returns the stream of TestIKPCATightBudget: 1,200 points of a
// noisy ring in d = 4 that needs more than B = 40 dictionary points under
// rbf γ = 1, with k = 5.
func tightRing() (x []float64, n, d, k int, kern learners.Kernel) {
	rng := rand.New(rand.NewPCG(3, 4))
	n, d, k = 1200, 4, 5
	x = make([]float64, n*d)
	for i := range n {
		th := 2 * math.Pi * rng.Float64()
		r := 1 + 0.1*rng.NormFloat64()
		x[i*d] = 1.5 * r * math.Cos(th)
		x[i*d+1] = 0.7 * r * math.Sin(th)
		x[i*d+2] = 0.4 * rng.NormFloat64()
		x[i*d+3] = 0.4 * rng.NormFloat64()
	}
	return x, n, d, k, learners.Kernel{Name: learners.KernelRBF, Gamma: 1}
}

func identity(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return order
}

// TestIKPCASwapRatio compares lli eviction without hysteresis (SwapRatio
// 1) and with the default (2) on the tight-budget ring: the hysteresis must
// admit fewer points (fewer swaps) and end closer to batch KPCA.
//
//	go test ./learners -run TestIKPCASwapRatio -v
func TestIKPCASwapRatio(t *testing.T) {
	x, n, d, k, kern := tightRing()
	ref, err := learners.FitBatch(kern, x, n, d, k)
	if err != nil {
		t.Fatal(err)
	}
	const b = 40
	sim := map[float64]float64{}
	adm := map[float64]int64{}
	for _, ratio := range []float64{1, 0} { // 0: the default
		l, err := learners.NewIKPCA(learners.Config{Dim: d, Components: k, Budget: b, Kernel: kern, SwapRatio: ratio, Eviction: "lli"})
		if err != nil {
			t.Fatal(err)
		}
		streamOnce(t, l, x, d, identity(n))
		_, rep := syncedReport(t, l, ref)
		sim[ratio], adm[ratio] = rep.Similarity, l.State().Ints["clock"]
		t.Logf("swap_ratio %v (effective %v), B=%d: %d admissions (%d swaps), similarity %.4f",
			ratio, l.Config().SwapRatio, b, adm[ratio], adm[ratio]-b, rep.Similarity)
	}
	if adm[0] >= adm[1] {
		t.Errorf("default swap ratio admitted %d points, ratio 1 %d: want fewer swaps", adm[0], adm[1])
	}
	if sim[0] < sim[1] || sim[0] < 0.85 {
		t.Errorf("similarity with the default swap ratio %.4f (ratio 1: %.4f), want ≥ ratio 1 and ≥ 0.85", sim[0], sim[1])
	}
}

// syncedReport brings l's published basis up to date (Sync) and compares
// its model with the batch reference.
func syncedReport(t *testing.T, l *learners.IKPCA, ref *learners.BatchFit) (*learners.Model, *kpcaeval.Report) {
	t.Helper()
	if err := l.Sync(100); err != nil {
		t.Fatal(err)
	}
	m, err := l.Model()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kpcaeval.CompareFit(ref, m)
	if err != nil {
		t.Fatal(err)
	}
	return m, rep
}
