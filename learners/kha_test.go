package learners_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// khaData is a data set replayed as a shuffled stream.
type khaData struct {
	name string
	x    []float64
	n, d int
	kern learners.Kernel
}

func loadKHAData(t *testing.T, name string) khaData {
	t.Helper()
	dir := learnertest.DataDir(t)
	switch name {
	case "wine":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(dir, "wine.csv"), []string{"label"})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "wine.kpca_ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			Preprocessing struct{ Mean, Std []float64 }
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref.Preprocessing.Mean) != d || len(ref.Preprocessing.Std) != d {
			t.Fatalf("wine preprocessing has %d means and %d stds, want %d", len(ref.Preprocessing.Mean), len(ref.Preprocessing.Std), d)
		}
		for i := range n {
			for j := range d {
				x[i*d+j] = (x[i*d+j] - ref.Preprocessing.Mean[j]) / ref.Preprocessing.Std[j]
			}
		}
		return khaData{name, x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 0.02}}
	case "three_clusters":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(dir, "three_clusters.csv"), []string{"cluster"})
		if err != nil {
			t.Fatal(err)
		}
		return khaData{name, x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 10}}
	case "two_spirals":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(dir, "two_spirals.csv"), []string{"label"})
		if err != nil {
			t.Fatal(err)
		}
		return khaData{name, x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 0.1}}
	}
	t.Fatalf("unknown data set %q", name)
	return khaData{}
}

// syntheticEllipse returns n seeded points on a noisy ellipse in d = 3.
func syntheticEllipse(seed uint64, n int) khaData {
	rng := rand.New(rand.NewPCG(seed, 1))
	const d = 3
	x := make([]float64, n*d)
	for i := range n {
		th := 2 * math.Pi * rng.Float64()
		r := 1 + 0.05*rng.NormFloat64()
		x[i*d] = 1.0*r*math.Cos(th) + 0.05*rng.NormFloat64()
		x[i*d+1] = 0.5*r*math.Sin(th) + 0.05*rng.NormFloat64()
		x[i*d+2] = 0.1 * rng.NormFloat64()
	}
	return khaData{"ellipse", x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 1}}
}

// passesToSimilarity streams ds through l as up to maxPasses shuffled passes
// and returns the similarity with batch KPCA of all rows after each pass.
func passesToSimilarity(t *testing.T, l learners.Learner, ds khaData, ref *learners.BatchFit, maxPasses int, seed uint64, target float64) []float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	order := make([]int, ds.n)
	for i := range order {
		order[i] = i
	}
	var sims []float64
	for range maxPasses {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			if err := l.Learn(ds.x[i*ds.d : (i+1)*ds.d]); err != nil {
				t.Fatalf("%s: Learn: %v", ds.name, err)
			}
		}
		m, err := l.Model()
		if err != nil {
			sims = append(sims, 0)
			continue
		}
		rep, err := kpcaeval.CompareFit(ref, m)
		if err != nil {
			t.Fatalf("%s: CompareFit: %v", ds.name, err)
		}
		sims = append(sims, rep.Similarity)
		if rep.Similarity >= target {
			break
		}
	}
	return sims
}

// khaAccuracyConfig is the tuned configuration of the accuracy tests:
// η₀ = 0.1, t₀ = 1000, B = 200, k = 5.
func khaAccuracyConfig(ds khaData) learners.Config {
	return learners.Config{Learner: learners.KindKHA, Dim: ds.d, Components: 5, Budget: 200, Kernel: ds.kern,
		LearningRate: 0.1, Decay: 1000, Seed: 1}
}

// TestKHAAccuracy replays each data set as a stream of shuffled passes and
// requires a similarity (mean cos² of the 5 principal angles) of at least
// 0.95 with batch KPCA of all rows within 10 passes.
func TestKHAAccuracy(t *testing.T) {
	for _, name := range []string{"ellipse", "wine", "three_clusters", "two_spirals"} {
		t.Run(name, func(t *testing.T) {
			var ds khaData
			if name == "ellipse" {
				ds = syntheticEllipse(7, 400)
			} else {
				ds = loadKHAData(t, name)
			}
			ref, err := learners.FitBatch(ds.kern, ds.x, ds.n, ds.d, 5)
			if err != nil {
				t.Fatal(err)
			}
			if gap := (ref.Eigenvalues[4] - ref.Next) / ref.Eigenvalues[4]; gap < 0.1 {
				t.Fatalf("%s: reference gap λ5/λ6 is %.3f, the test needs ≥ 0.1", name, gap)
			}
			l, err := learners.NewKHA(khaAccuracyConfig(ds))
			if err != nil {
				t.Fatal(err)
			}
			sims := passesToSimilarity(t, l, ds, ref, 10, 3, 0.95)
			got := sims[len(sims)-1]
			t.Logf("%s: n=%d, similarity %.4f after %d passes (per pass %.3f)", name, ds.n, got, len(sims), sims)
			if got < 0.95 {
				t.Fatalf("%s: similarity %.4f after 10 passes, want ≥ 0.95", name, got)
			}
			m, err := l.Model()
			if err != nil {
				t.Fatal(err)
			}
			rep, err := kpcaeval.CompareFit(ref, m)
			if err != nil {
				t.Fatal(err)
			}
			sum := l.Summary(nil)
			t.Logf("%s: eigenvalues %.4f, batch %.4f, explained %.3f, basis version %d", name, sum.Eigenvalues, rep.RefEigenvalues, sum.ExplainedVariance, sum.BasisVersion)
			// λ̂ is a noisy running average: check only the scale of the top eigenvalue.
			if e := rep.EigRelErr[0]; e > 0.3 {
				t.Errorf("%s: top eigenvalue %.4f, batch %.4f (relative error %.2f, want ≤ 0.3)", name, sum.Eigenvalues[0], rep.RefEigenvalues[0], e)
			}
		})
	}
}

func khaTestConfig() learners.Config {
	return learners.Config{Learner: learners.KindKHA, Dim: 3, Components: 3, Budget: 30, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 9}
}

// khaFeed teaches l n points of the seeded ellipse stream starting at from.
func khaFeed(t testing.TB, l learners.Learner, seed uint64, from, n int) {
	t.Helper()
	x := make([]float64, l.Dim())
	for i := from; i < from+n; i++ {
		if err := l.Learn(learnertest.Stream(x, seed, i)); err != nil {
			t.Fatalf("Learn(%d): %v", i, err)
		}
	}
}

func TestNewKHABadConfig(t *testing.T) {
	good := khaTestConfig()
	for _, tc := range []struct {
		name string
		mod  func(*learners.Config)
	}{
		{"dim_zero", func(c *learners.Config) { c.Dim = 0 }},
		{"components_zero", func(c *learners.Config) { c.Components = 0 }},
		{"components_above_budget", func(c *learners.Config) { c.Components = 31 }},
		{"budget_negative", func(c *learners.Config) { c.Budget = -1 }},
		{"kernel_missing", func(c *learners.Config) { c.Kernel = learners.Kernel{} }},
		{"kernel_unknown", func(c *learners.Config) { c.Kernel.Name = "cosine" }},
		{"gamma_negative", func(c *learners.Config) { c.Kernel.Gamma = -1 }},
		{"learning_rate_negative", func(c *learners.Config) { c.LearningRate = -0.1 }},
		{"learning_rate_inf", func(c *learners.Config) { c.LearningRate = math.Inf(1) }},
		{"decay_nan", func(c *learners.Config) { c.Decay = math.NaN() }},
		{"jitter_one", func(c *learners.Config) { c.Jitter = 1 }},
		{"refresh_negative", func(c *learners.Config) { c.Refresh = -2 }},
		{"other_learner", func(c *learners.Config) { c.Learner = learners.KindIKPCA }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.mod(&cfg)
			l, err := learners.NewKHA(cfg)
			if !errors.Is(err, learners.ErrConfig) || l != nil {
				t.Fatalf("NewKHA(%+v) = %v, %v; want nil, ErrConfig", cfg, l, err)
			}
		})
	}
	cfg := good
	cfg.Learner = ""
	if l, err := learners.NewKHA(cfg); err != nil || l.Kind() != learners.KindKHA {
		t.Fatalf("NewKHA with an empty learner name: %v, %v; want a kha learner", l, err)
	}
	if l, err := learners.New(good); err != nil || l.Kind() != learners.KindKHA {
		t.Fatalf("learners.New(kha config): %v, %v; want a kha learner", l, err)
	}
}

func TestKHABadInput(t *testing.T) {
	for _, phase := range []struct {
		name string
		n    int
	}{{"storing", 10}, {"ready", 80}} {
		t.Run(phase.name, func(t *testing.T) {
			l, err := learners.NewKHA(khaTestConfig())
			if err != nil {
				t.Fatal(err)
			}
			khaFeed(t, l, 1, 0, phase.n)
			before := l.State()
			for _, tc := range []struct {
				name string
				x    []float64
				want error
			}{
				{"nil", nil, learners.ErrDimension},
				{"short", []float64{1, 2}, learners.ErrDimension},
				{"long", []float64{1, 2, 3, 4}, learners.ErrDimension},
				{"nan", []float64{1, math.NaN(), 3}, learners.ErrNonFinite},
				{"inf", []float64{math.Inf(-1), 0, 0}, learners.ErrNonFinite},
			} {
				if err := l.Learn(tc.x); !errors.Is(err, tc.want) {
					t.Errorf("Learn(%s) = %v, want %v", tc.name, err, tc.want)
				}
				if _, err := l.Transform(nil, tc.x); !errors.Is(err, tc.want) {
					t.Errorf("Transform(%s) = %v, want %v", tc.name, err, tc.want)
				}
				if _, _, err := l.Score(nil, tc.x); !errors.Is(err, tc.want) {
					t.Errorf("Score(%s) = %v, want %v", tc.name, err, tc.want)
				}
			}
			if after := l.State(); !reflect.DeepEqual(after, before) {
				t.Errorf("state changed by rejected input")
			}
			_, err = l.Transform(nil, []float64{0, 0, 0})
			_, merr := l.Model()
			if phase.n < 30 {
				if !errors.Is(err, learners.ErrNotReady) || !errors.Is(merr, learners.ErrNotReady) {
					t.Errorf("before the set is complete: Transform %v, Model %v; want ErrNotReady", err, merr)
				}
			} else if err != nil || merr != nil {
				t.Errorf("ready: Transform %v, Model %v; want no error", err, merr)
			}
		})
	}
}

// TestKHANotReadyUntilKPlusOne checks the k+1 rule when B = k.
func TestKHANotReadyUntilKPlusOne(t *testing.T) {
	cfg := khaTestConfig()
	cfg.Budget, cfg.Components = 3, 3
	l, err := learners.NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	khaFeed(t, l, 2, 0, 3)
	if s := l.Summary(nil); s.Ready || s.Stored != 3 {
		t.Fatalf("after B = k = 3 observations: ready %v stored %d; want not ready, 3 stored", s.Ready, s.Stored)
	}
	if _, err := l.Transform(nil, []float64{0, 0, 0}); !errors.Is(err, learners.ErrNotReady) {
		t.Fatalf("Transform after 3 observations: %v, want ErrNotReady", err)
	}
	khaFeed(t, l, 2, 3, 1)
	if _, err := l.Transform(nil, []float64{0, 0, 0}); err != nil {
		t.Fatalf("Transform after 4 observations: %v", err)
	}
}

func TestKHAModelMatchesTransform(t *testing.T) {
	l, err := learners.NewKHA(khaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	khaFeed(t, l, 3, 0, 200)
	m, err := l.Model()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if p, d, k := m.Dims(); p != 30 || d != 3 || k != 3 || m.Learner != learners.KindKHA || m.Seen != 200 {
		t.Fatalf("model dims %d×%d, k %d, learner %q, seen %d; want 30×3, 3, kha, 200", p, d, k, m.Learner, m.Seen)
	}
	x := make([]float64, 3)
	for i := range 20 {
		learnertest.Stream(x, 99, i)
		got, err := l.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Transform(nil, x)
		for c := range got {
			if math.Abs(got[c]-want[c]) > 1e-10 {
				t.Fatalf("x%d component %d: Transform %v, Model %v", i, c, got[c], want[c])
			}
		}
	}
}

func TestKHAScore(t *testing.T) {
	l, err := learners.NewKHA(khaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	khaFeed(t, l, 4, 0, 300)
	sum := l.Summary(nil)
	var inSPE, farSPE float64
	x := make([]float64, 3)
	for i := range 50 {
		learnertest.Stream(x, 4, 10_000+i)
		y, nov, err := l.Score(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		var t2 float64
		for c, v := range y {
			t2 += v * v / sum.Eigenvalues[c]
		}
		if nov.SPE < 0 || math.Abs(nov.T2-t2) > 1e-9*(1+t2) {
			t.Fatalf("x%d: SPE %v, T² %v; want SPE ≥ 0 and T² = Σy²/λ = %v", i, nov.SPE, nov.T2, t2)
		}
		inSPE += nov.SPE / 50
		for j := range x {
			x[j] = 3 + 2*x[j]
		}
		_, nov, err = l.Score(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		farSPE += nov.SPE / 50
	}
	if !(farSPE > 2*inSPE) {
		t.Errorf("mean SPE of far points %v, of stream points %v; want far > 2× stream", farSPE, inSPE)
	}
}

func TestKHASummary(t *testing.T) {
	l, err := learners.NewKHA(khaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	khaFeed(t, l, 5, 0, 29)
	if s := l.Summary(nil); s.Ready || s.Eigenvalues != nil || s.Stored != 29 || s.BasisVersion != 0 {
		t.Fatalf("before completion: %+v; want not ready, no eigenvalues, 29 stored, version 0", s)
	}
	khaFeed(t, l, 5, 29, 1)
	s := l.Summary(nil)
	if !s.Ready || len(s.Eigenvalues) != 3 || s.Stored != 30 || s.BasisVersion < 1 {
		t.Fatalf("at completion: %+v; want ready, 3 eigenvalues, 30 stored, version ≥ 1", s)
	}
	khaFeed(t, l, 5, 30, 600)
	s = l.Summary(nil)
	for i, e := range s.Eigenvalues {
		if !(e > 0) || (i > 0 && e > s.Eigenvalues[i-1]) {
			t.Fatalf("eigenvalues %v not positive and non-increasing", s.Eigenvalues)
		}
	}
	if !(s.ExplainedVariance > 0.5 && s.ExplainedVariance <= 1) {
		t.Errorf("explained variance %v, want in (0.5, 1] for a noisy ellipse with 3 components", s.ExplainedVariance)
	}
}

// TestKHAResume checks that a restored learner projects identically and
// continues exactly like the original.
func TestKHAResume(t *testing.T) {
	for _, n := range []int{0, 17, 30, 95} {
		a, _ := learners.NewKHA(khaTestConfig())
		khaFeed(t, a, 6, 0, n)
		st := a.State()
		b, err := learners.Restore(st)
		if err != nil {
			t.Fatalf("n=%d: Restore: %v", n, err)
		}
		khaFeed(t, a, 6, n, 77)
		khaFeed(t, b, 6, n, 77)
		if !reflect.DeepEqual(a.State(), b.State()) {
			t.Fatalf("n=%d: states differ after resuming", n)
		}
		x := []float64{0.3, -0.2, 0.1}
		ya, _ := a.Transform(nil, x)
		yb, _ := b.Transform(nil, x)
		if !slices.Equal(ya, yb) {
			t.Fatalf("n=%d: projections %v and %v differ", n, ya, yb)
		}
	}
}

func TestKHARestoreRejects(t *testing.T) {
	l, _ := learners.NewKHA(khaTestConfig())
	khaFeed(t, l, 7, 0, 60)
	good := l.State()
	early, _ := learners.NewKHA(khaTestConfig())
	khaFeed(t, early, 7, 0, 10)
	goodEarly := early.State()
	setM := func(name string, i int, v float64) func(*learners.State) {
		return func(s *learners.State) { s.Matrices[name].Data[i] = v }
	}
	for _, tc := range []struct {
		name  string
		early bool
		mod   func(*learners.State)
	}{
		{"wrong_kind", false, func(s *learners.State) { s.Kind = learners.KindIKPCA }},
		{"wrong_version", false, func(s *learners.State) { s.Version = 99 }},
		{"other_config", false, func(s *learners.State) { s.Config.Seed = 1234 }},
		{"negative_seen", true, func(s *learners.State) { s.Seen = -1 }},
		{"points_count", true, func(s *learners.State) { s.Seen = 11 }},
		{"missing_coef", false, func(s *learners.State) { delete(s.Matrices, "coef") }},
		{"missing_version", false, func(s *learners.State) { delete(s.Ints, "version") }},
		{"missing_kxx", false, func(s *learners.State) { delete(s.Scalars, "kxx") }},
		{"coef_shape", false, func(s *learners.State) { m := s.Matrices["coef"]; m.Rows--; s.Matrices["coef"] = m }},
		{"coef_nan", false, setM("coef", 3, math.NaN())},
		{"mean_inf", false, setM("mean_row", 0, math.Inf(1))},
		{"lambda_negative", false, setM("lambda", 1, -1)},
		{"eigenvalues_increasing", false, setM("eigenvalues", 2, 1e9)},
		{"sign_two", false, setM("sign", 0, 2)},
		{"perm_repeat", false, setM("perm", 0, 1)},
		{"perm_fraction", false, setM("ref_perm", 0, 0.5)},
		{"version_zero", false, func(s *learners.State) { s.Ints["version"] = 0 }},
		{"since_refresh_range", false, func(s *learners.State) { s.Ints["since_refresh"] = 1 << 40 }},
		{"points_nan", false, setM("points", 4, math.NaN())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := good
			if tc.early {
				src = goodEarly
			}
			st := deepCopyState(src)
			tc.mod(st)
			target, _ := learners.NewKHA(khaTestConfig())
			khaFeed(t, target, 8, 0, 45)
			before := target.State()
			if err := target.Restore(st); !errors.Is(err, learners.ErrState) {
				t.Fatalf("Restore(%s) = %v, want ErrState", tc.name, err)
			}
			if !reflect.DeepEqual(target.State(), before) {
				t.Fatalf("Restore(%s) changed the learner", tc.name)
			}
		})
	}
}

// deepCopyState copies s (State() already returns copies; this protects the shared fixture).
func deepCopyState(s *learners.State) *learners.State {
	c := *s
	c.Ints = maps.Clone(s.Ints)
	c.Scalars = maps.Clone(s.Scalars)
	c.Matrices = map[string]learners.Matrix{}
	for k, m := range s.Matrices {
		m.Data = slices.Clone(m.Data)
		c.Matrices[k] = m
	}
	return &c
}

func TestKHASeeds(t *testing.T) {
	run := func(seed uint64) *learners.State {
		cfg := khaTestConfig()
		cfg.Seed = seed
		l, _ := learners.NewKHA(cfg)
		khaFeed(t, l, 10, 0, 120)
		return l.State()
	}
	a, b, c := run(1), run(1), run(2)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed and data gave different states")
	}
	if slices.Equal(a.Matrices["coef"].Data, c.Matrices["coef"].Data) {
		t.Fatal("different seeds gave identical coefficients")
	}
}

func TestKHAAllocs(t *testing.T) {
	l, _ := learners.NewKHA(khaTestConfig())
	khaFeed(t, l, 12, 0, 100)
	x := []float64{0.5, 0.1, -0.2}
	dst := make([]float64, 3)
	if n := testing.AllocsPerRun(200, func() { _ = l.Learn(x) }); n != 0 {
		t.Errorf("Learn allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = l.Transform(dst, x) }); n != 0 {
		t.Errorf("Transform allocates %v times per call", n)
	}
	if n := testing.AllocsPerRun(200, func() { _, _, _ = l.Score(dst, x) }); n != 0 {
		t.Errorf("Score allocates %v times per call", n)
	}
}

func TestKHAMemoryBytes(t *testing.T) {
	for _, c := range []struct{ b, d, k, want int }{
		{30, 3, 3, 8 * (900 + 90 + 360 + 270 + 45 + 33)},
		{200, 13, 5, 8 * (40000 + 2600 + 4000 + 1800 + 125 + 55)},
	} {
		cfg := khaTestConfig()
		cfg.Budget, cfg.Dim, cfg.Components = c.b, c.d, c.k
		l, err := learners.NewKHA(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.MemoryBytes(); got != c.want {
			t.Errorf("MemoryBytes(B=%d, d=%d, k=%d) = %d, want %d", c.b, c.d, c.k, got, c.want)
		}
	}
}

func BenchmarkKHA(b *testing.B) {
	for _, c := range []struct{ d, k, budget int }{{8, 5, 100}, {8, 5, 400}, {32, 10, 400}} {
		cfg := learners.Config{Learner: learners.KindKHA, Dim: c.d, Components: c.k, Budget: c.budget, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}}
		l, err := learners.NewKHA(cfg)
		if err != nil {
			b.Fatal(err)
		}
		khaFeed(b, l, 1, 0, c.budget+10)
		x := learnertest.Stream(make([]float64, c.d), 2, 0)
		dst := make([]float64, c.k)
		name := fmt.Sprintf("d=%d/k=%d/B=%d", c.d, c.k, c.budget)
		b.Run("Learn/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Learn(x); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Transform/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Transform(dst, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func ExampleKHA() {
	l, err := learners.NewKHA(learners.Config{Dim: 2, Components: 2, Budget: 50, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, Seed: 1})
	if err != nil {
		panic(err)
	}
	x := make([]float64, 2)
	for i := range 49 {
		if err := l.Learn(learnertest.Stream(x, 1, i)); err != nil {
			panic(err)
		}
	}
	_, err = l.Transform(nil, x)
	fmt.Println("after 49:", err)
	for i := 49; i < 500; i++ {
		if err := l.Learn(learnertest.Stream(x, 1, i)); err != nil {
			panic(err)
		}
	}
	y, err := l.Transform(nil, []float64{1, 0})
	s := l.Summary(nil)
	fmt.Println("after 500:", len(y), err, s.Ready, s.Stored, s.Eigenvalues[0] >= s.Eigenvalues[1])
	// Output:
	// after 49: learners: not ready: kha: 49 of 50 memorised points, 49 observations
	// after 500: 2 <nil> true 50 true
}
