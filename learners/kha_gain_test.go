package learners_test

import (
	"errors"
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

// TestKHAGainConfig checks the options' validation: unknown values, gain
// smd or dictionary kmeans on another learner, smd with another rule or β,
// each an error naming the field; "et" and "first" are normalised to the
// empty default (so configurations and snapshots compare as before).
func TestKHAGainConfig(t *testing.T) {
	base := learners.Config{Learner: learners.KindKHA, Dim: 2, Components: 2, Budget: 10, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}}
	for _, tc := range []struct {
		name  string
		edit  func(c *learners.Config)
		field string
	}{
		{"unknown gain", func(c *learners.Config) { c.Gain = "adam" }, "gain"},
		{"smd on ikpca", func(c *learners.Config) { c.Learner, c.Gain = learners.KindIKPCA, learners.GainSMD }, "gain"},
		{"smd with apex", func(c *learners.Config) { c.Rule, c.Gain = learners.RuleAPEX, learners.GainSMD }, "gain"},
		{"smd with beta 2", func(c *learners.Config) { c.Beta, c.Gain = 2, learners.GainSMD }, "gain"},
		{"unknown dictionary", func(c *learners.Config) { c.Dictionary = "random" }, "dictionary"},
		{"kmeans on window", func(c *learners.Config) { c.Learner, c.Dictionary = learners.KindWindow, learners.DictKMeans }, "dictionary"},
	} {
		c := base
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !errors.Is(err, learners.ErrConfig) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: Validate() = %v, want an ErrConfig naming %q", tc.name, err, tc.field)
		}
		if _, err := learners.New(c); err == nil {
			t.Errorf("%s: New accepted the config", tc.name)
		}
	}
	c := base
	c.Gain, c.Dictionary = learners.GainET, learners.DictFirst
	if d := c.WithDefaults(); d.Gain != "" || d.Dictionary != "" {
		t.Errorf("WithDefaults kept gain %q, dictionary %q; want both empty (the defaults)", d.Gain, d.Dictionary)
	}
	c.Gain, c.Dictionary = learners.GainSMD, learners.DictKMeans
	if err := c.Validate(); err != nil {
		t.Errorf("smd with kmeans: %v", err)
	}
}

// TestKHAGainAccuracy checks what the options are for, on real data:
//   - gain smd converges faster than et on wine (B = n = 178, k 5): mean
//     similarity over three seeds after one pass ≥ 0.85 and at least 0.1
//     above et's (measured 0.888 against 0.716), and ≥ 0.99 after 10;
//   - dictionary kmeans lifts kha on satellite (B 200, k 8) above the
//     ceiling of its first-B memorised set: ≥ 0.99 after 3 passes, where
//     the first-B set stays below 0.99 with either gain (measured 0.996
//     against 0.986 with et, seed 1).
func TestKHAGainAccuracy(t *testing.T) {
	wine := gainSet(t, "wine")
	mean := func(ds ruleSet, cfg learners.Config, passes int) []float64 {
		m := make([]float64, passes)
		for seed := uint64(1); seed <= 3; seed++ {
			cfg.Seed = seed
			for p, s := range gainPasses(t, ds, cfg, passes, seed) {
				m[p] += s / 3
			}
		}
		return m
	}
	et := mean(wine, learners.Config{Learner: learners.KindKHA, Budget: wine.n}, 1)
	smd := mean(wine, learners.Config{Learner: learners.KindKHA, Budget: wine.n, Gain: learners.GainSMD}, 10)
	t.Logf("wine: et %.4f after 1 pass; smd %.4f", et, smd)
	if smd[0] < 0.85 || smd[0] < et[0]+0.1 {
		t.Errorf("wine: smd %.4f after one pass, want ≥ 0.85 and ≥ et's %.4f + 0.1", smd[0], et[0])
	}
	if smd[9] < 0.99 {
		t.Errorf("wine: smd %.4f after 10 passes, want ≥ 0.99", smd[9])
	}
	if testing.Short() {
		t.Skip("satellite part: 3 passes of 6,435 rows per learner (seconds); run without -short")
	}
	sat := gainSet(t, "satellite")
	first := gainPasses(t, sat, learners.Config{Learner: learners.KindKHA, Budget: 200, Seed: 1}, 3, 1)
	km := gainPasses(t, sat, learners.Config{Learner: learners.KindKHA, Budget: 200, Seed: 1, Dictionary: learners.DictKMeans}, 3, 1)
	t.Logf("satellite: first-B %.4f, kmeans %.4f", first, km)
	if km[2] < 0.99 {
		t.Errorf("satellite: kmeans %.4f after 3 passes, want ≥ 0.99", km[2])
	}
	if first[2] >= 0.99 {
		t.Errorf("satellite: the first-B set reached %.4f after 3 passes; the ceiling this test documents (< 0.99) has moved", first[2])
	}
}

// BenchmarkKHAGain measures one Learn per op of kha with each gain and
// dictionary on the isotropic benchmark stream over the learner benchmark
// grid (as BenchmarkKHARules). The kmeans cells include the centroid move
// of every Learn and whatever rebases fall in the timed loop (the first at
// 4B observations; amortised only in long runs); the rebase alone
// is BenchmarkKHARebase:
//
//	go test ./learners -run '^$' -bench KHAGain -benchmem
func BenchmarkKHAGain(b *testing.B) {
	for _, v := range []struct{ name, gain, dict string }{
		{"et", "", ""}, {"smd", learners.GainSMD, ""}, {"kmeans", "", learners.DictKMeans}, {"smd_kmeans", learners.GainSMD, learners.DictKMeans},
	} {
		for _, c := range benchCells {
			b.Run(fmt.Sprintf("%s/B%d_d%d_k%d", v.name, c.b, c.d, c.k), func(b *testing.B) {
				l, err := learners.NewKHA(learners.Config{Learner: learners.KindKHA, Gain: v.gain, Dictionary: v.dict, Dim: c.d, Components: c.k, Budget: c.b,
					Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(c.d)}})
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(42, uint64(c.d)))
				pool := make([][]float64, 4096)
				for i := range pool {
					pool[i] = make([]float64, c.d)
					for j := range pool[i] {
						pool[i][j] = rng.NormFloat64()
					}
				}
				for i := range 2 * c.b {
					if err := l.Learn(pool[i%len(pool)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := l.Learn(pool[i%len(pool)]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
