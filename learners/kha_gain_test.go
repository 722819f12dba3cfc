package learners_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// gainPasses streams ds through a learner made by cfg (Dim, Components and
// Kernel are set here) as shuffled passes (shuffle seed seed) and returns
// the similarity with batch KPCA after each pass (0 while the learner
// cannot export a model).
func gainPasses(t testing.TB, ds ruleSet, cfg learners.Config, passes int, seed uint64) []float64 {
	t.Helper()
	cfg.Dim, cfg.Components, cfg.Kernel = ds.d, ds.k, ds.kern
	l, err := learners.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	order := rng.Perm(ds.n)
	var sims []float64
	for range passes {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			if err := l.Learn(ds.x[i*ds.d : (i+1)*ds.d]); err != nil {
				t.Fatalf("%s: Learn: %v", ds.name, err)
			}
		}
		if s, ok := l.(interface{ Sync() error }); ok {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		m, err := l.Model()
		if err != nil {
			sims = append(sims, 0)
			continue
		}
		sims = append(sims, ds.sim(t, m))
	}
	return sims
}

// gainSet loads one of the data sets of the gain comparison: those of
// TestKHARulesFigures plus iris (standardised, rbf γ = 0.25, k 3),
// three_clusters (γ 10, k 3) and two_spirals (γ 0.1, k 5).
func gainSet(t testing.TB, name string) ruleSet {
	t.Helper()
	switch name {
	case "wine", "satellite", "drift":
		return loadRuleSet(t, name)
	case "three_clusters", "two_spirals":
		ds := loadKHAData(t.(*testing.T), name)
		k := 3
		if name == "two_spirals" {
			k = 5
		}
		return batchRuleSet(t, name, ds.x, ds.n, ds.d, k, ds.kern)
	case "iris":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(learnertest.DataDir(t), "iris.csv"), []string{"label"})
		if err != nil {
			t.Fatal(err)
		}
		standardise(x, n, d)
		return batchRuleSet(t, name, x, n, d, 3, learners.Kernel{Name: learners.KernelRBF, Gamma: 0.25})
	}
	t.Fatalf("unknown data set %q", name)
	return ruleSet{}
}

// standardise scales each column of the n×d rows to mean 0 and standard deviation 1.
func standardise(x []float64, n, d int) {
	for j := range d {
		var m, v float64
		for i := range n {
			m += x[i*d+j]
		}
		m /= float64(n)
		for i := range n {
			v += (x[i*d+j] - m) * (x[i*d+j] - m)
		}
		sd := 1.0
		if v > 0 {
			sd = math.Sqrt(v / float64(n))
		}
		for i := range n {
			x[i*d+j] = (x[i*d+j] - m) / sd
		}
	}
}

// TestKHAGainFigures prints kha's similarity to batch KPCA after 1, 3 and 10
// shuffled passes (mean of three seeds: learner seed and shuffle 1–3) with
// the default gain (et) and gain smd, beside ikpca, at B = min(200, n) on
// every data set of the repository (bench/RESULTS.md §17):
//
//	KPCASTREAM_BENCH=1 go test ./learners -run TestKHAGainFigures -v
//
// KPCASTREAM_GAIN_SETS narrows the sets (comma-separated). Opt-in: minutes.
func TestKHAGainFigures(t *testing.T) {
	if os.Getenv("KPCASTREAM_BENCH") == "" {
		t.Skip("opt-in figures (minutes): set KPCASTREAM_BENCH=1")
	}
	sets := []string{"wine", "iris", "three_clusters", "two_spirals", "drift", "satellite"}
	if s := os.Getenv("KPCASTREAM_GAIN_SETS"); s != "" {
		sets = strings.Split(s, ",")
	}
	type variant struct {
		name string
		cfg  learners.Config
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-15s %-12s %7s %7s %7s\n", "data", "learner", "1 pass", "3", "10")
	for _, name := range sets {
		ds := gainSet(t, name)
		bud := min(200, ds.n)
		vs := []variant{
			{"kha et", learners.Config{Learner: learners.KindKHA, Budget: bud}},
			{"kha smd", learners.Config{Learner: learners.KindKHA, Budget: bud, Gain: learners.GainSMD}},
			{"kha kmeans", learners.Config{Learner: learners.KindKHA, Budget: bud, Dictionary: learners.DictKMeans}},
			{"kha smd+km", learners.Config{Learner: learners.KindKHA, Budget: bud, Gain: learners.GainSMD, Dictionary: learners.DictKMeans}},
			{"ikpca", learners.Config{Learner: learners.KindIKPCA, Budget: bud}},
		}
		for _, v := range vs {
			if only := os.Getenv("KPCASTREAM_GAIN_VARIANTS"); only != "" && !strings.Contains(only, v.name) {
				continue
			}
			mean := make([]float64, 10)
			for seed := uint64(1); seed <= 3; seed++ {
				cfg := v.cfg
				cfg.Seed = seed
				ss := gainPasses(t, ds, cfg, 10, seed)
				t.Logf("%s %s seed %d: %.4f", name, v.name, seed, ss)
				for p, s := range ss {
					mean[p] += s / 3
				}
			}
			fmt.Fprintf(&b, "%-15s %-12s %7.4f %7.4f %7.4f\n", name, v.name, mean[0], mean[2], mean[9])
		}
	}
	t.Log(b.String())
}
