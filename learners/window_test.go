package learners

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func windowConfig(d, k, w, refresh int) Config {
	return Config{Learner: KindWindow, Dim: d, Components: k, Budget: w, Refresh: refresh,
		Kernel: Kernel{Name: KernelRBF, Gamma: 0.5}, Seed: 7}
}

// windowStream returns n seeded points in d dimensions: a noisy circle in
// the first two coordinates whose radius and centre move halfway through.
func windowStream(n, d int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float64, n*d)
	for i := range n {
		a, r, c := 2*math.Pi*rng.Float64(), 1.0, 0.0
		if i >= n/2 {
			r, c = 0.6, 0.8
		}
		for j := range d {
			x[i*d+j] = 0.1 * rng.NormFloat64()
		}
		x[i*d] += c + r*math.Cos(a)
		x[i*d+1] += 0.5 * r * math.Sin(a)
	}
	return x
}

// denseKPCA is a direct batch kernel PCA of the n×d points x with gonum's
// dense symmetric eigensolver: eigenvalues of K̃ (descending) and the
// coefficient vectors αᵢ = vᵢ/√λᵢ (n×k, column i).
type denseKPCA struct {
	kern   Kernel
	x      []float64
	n, d   int
	lambda []float64
	alpha  *mat.Dense
	rmean  []float64 // row means of K
	gmean  float64   // grand mean of K
}

func newDenseKPCA(t *testing.T, kern Kernel, x []float64, n, d, k int) *denseKPCA {
	t.Helper()
	K := kern.Gram(nil, x, n, d)
	b := &denseKPCA{kern: kern, x: x, n: n, d: d, rmean: make([]float64, n)}
	for i := range n {
		for j := range n {
			b.rmean[i] += K[i*n+j] / float64(n)
		}
		b.gmean += b.rmean[i] / float64(n)
	}
	kc := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			kc.SetSym(i, j, K[i*n+j]-b.rmean[i]-b.rmean[j]+b.gmean)
		}
	}
	var es mat.EigenSym
	if !es.Factorize(kc, true) {
		t.Fatal("dense eigendecomposition failed")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, c int) bool { return vals[idx[a]] > vals[idx[c]] })
	b.alpha = mat.NewDense(n, k, nil)
	for c := range k {
		l := vals[idx[c]]
		b.lambda = append(b.lambda, l)
		for j := range n {
			b.alpha.Set(j, c, vecs.At(j, idx[c])/math.Sqrt(l))
		}
	}
	return b
}

// project returns the batch projections of y onto the k components.
func (b *denseKPCA) project(y []float64) []float64 {
	_, k := b.alpha.Dims()
	kx := make([]float64, b.n)
	var mean float64
	for j := range b.n {
		kx[j] = b.kern.Eval(b.x[j*b.d:(j+1)*b.d], y)
		mean += kx[j] / float64(b.n)
	}
	out := make([]float64, k)
	for c := range k {
		for j := range b.n {
			out[c] += b.alpha.At(j, c) * (kx[j] - mean - b.rmean[j] + b.gmean)
		}
	}
	return out
}

func learnAll(t testing.TB, l Learner, x []float64, d int) {
	t.Helper()
	for i := range len(x) / d {
		if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
			t.Fatalf("Learn row %d: %v", i, err)
		}
	}
}

func TestNewWindowRejectsBadConfig(t *testing.T) {
	good := windowConfig(3, 2, 10, 1)
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"components equal to budget", func(c *Config) { c.Components = 10 }},
		{"components above budget", func(c *Config) { c.Components = 11 }},
		{"budget above maximum", func(c *Config) { c.Budget = WindowMaxBudget + 1 }},
		{"other learner", func(c *Config) { c.Learner = KindIKPCA }},
		{"zero dim", func(c *Config) { c.Dim = 0 }},
		{"zero components", func(c *Config) { c.Components = 0 }},
		{"negative refresh", func(c *Config) { c.Refresh = -1 }},
		{"unknown kernel", func(c *Config) { c.Kernel.Name = "cosine" }},
		{"negative gamma", func(c *Config) { c.Kernel.Gamma = -1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			l, err := NewWindow(cfg)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("NewWindow(%+v) = %v, %v; want ErrConfig", cfg, l, err)
			}
		})
	}
	if _, err := NewWindow(good); err != nil {
		t.Fatalf("NewWindow(good) = %v", err)
	}
	cfg := good
	cfg.Learner = ""
	if l, err := New(Config{Learner: KindWindow, Dim: 2, Components: 1, Budget: 5, Kernel: Kernel{Name: KernelLinear}}); err != nil || l.Kind() != KindWindow {
		t.Fatalf("New(window) = %v, %v", l, err)
	}
	if l, err := NewWindow(cfg); err != nil || l.cfg.Learner != KindWindow {
		t.Fatalf("NewWindow with empty learner = %v, %v", l, err)
	}
}

func TestWindowBadInput(t *testing.T) {
	const d = 3
	l, err := NewWindow(windowConfig(d, 2, 10, 1))
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{1, 2, 3}
	if _, err := l.Transform(nil, x); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Transform before learning: %v, want ErrNotReady", err)
	}
	if _, _, err := l.Score(nil, x); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Score before learning: %v, want ErrNotReady", err)
	}
	if _, err := l.Model(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Model before learning: %v, want ErrNotReady", err)
	}
	if err := l.Sync(5); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Sync before learning: %v, want ErrNotReady", err)
	}
	if s := l.Summary(nil); s.Ready || s.Eigenvalues != nil {
		t.Fatalf("Summary before learning = %+v", s)
	}
	learnAll(t, l, windowStream(2, d, 1), d)
	if _, err := l.Transform(nil, x); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Transform with 2 points for k = 2: %v, want ErrNotReady", err)
	}
	learnAll(t, l, windowStream(20, d, 2), d)

	tests := []struct {
		name string
		x    []float64
		want error
	}{
		{"nil", nil, ErrDimension},
		{"short", []float64{1, 2}, ErrDimension},
		{"long", []float64{1, 2, 3, 4}, ErrDimension},
		{"NaN", []float64{1, math.NaN(), 3}, ErrNonFinite},
		{"+Inf", []float64{math.Inf(1), 2, 3}, ErrNonFinite},
		{"-Inf", []float64{1, 2, math.Inf(-1)}, ErrNonFinite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := l.State()
			in := slices.Clone(tc.x)
			if err := l.Learn(tc.x); !errors.Is(err, tc.want) {
				t.Errorf("Learn(%v) = %v, want %v", tc.x, err, tc.want)
			}
			if _, err := l.Transform(nil, tc.x); !errors.Is(err, tc.want) {
				t.Errorf("Transform(%v) = %v, want %v", tc.x, err, tc.want)
			}
			if _, _, err := l.Score(nil, tc.x); !errors.Is(err, tc.want) {
				t.Errorf("Score(%v) = %v, want %v", tc.x, err, tc.want)
			}
			if !reflect.DeepEqual(before, l.State()) {
				t.Errorf("state changed after bad input %v", tc.x)
			}
			if !slices.Equal(in, tc.x) && !(len(in) == len(tc.x)) {
				t.Errorf("input modified")
			}
		})
	}
	if err := l.Sync(0); !errors.Is(err, ErrConfig) {
		t.Errorf("Sync(0) = %v, want ErrConfig", err)
	}
	t.Run("poly overflow", func(t *testing.T) {
		cfg := windowConfig(d, 1, 5, 1)
		cfg.Kernel = Kernel{Name: KernelPoly, Gamma: 1, Degree: 32}
		p, err := NewWindow(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Learn([]float64{1e200, 0, 0}); !errors.Is(err, ErrNumerical) {
			t.Fatalf("Learn of a point with an infinite kernel value = %v, want ErrNumerical", err)
		}
		if p.Seen() != 0 || p.ring.Len() != 0 {
			t.Fatalf("state changed: seen %d, stored %d", p.Seen(), p.ring.Len())
		}
	})
}

func TestWindowTransformPanicsOnBadDst(t *testing.T) {
	const d = 2
	l, _ := NewWindow(windowConfig(d, 2, 10, 1))
	learnAll(t, l, windowStream(12, d, 3), d)
	defer func() {
		if recover() == nil {
			t.Fatal("Transform with a dst of length 3 for k = 2 did not panic")
		}
	}()
	l.Transform(make([]float64, 3), []float64{0, 0})
}

// TestWindowMatchesBatch compares the window learner, synced, with a dense
// batch KPCA of its last W points: eigenvalues, projections (up to sign),
// novelty scores and the model export.
func TestWindowMatchesBatch(t *testing.T) {
	const d, k, W, n = 3, 3, 60, 400
	x := windowStream(n, d, 11)
	test := windowStream(10, d, 12)
	for _, refresh := range []int{1, 7, 100} {
		l, err := NewWindow(windowConfig(d, k, W, refresh))
		if err != nil {
			t.Fatal(err)
		}
		for c, upto := range []int{5, 30, 60, 61, 150, 230, 400} {
			from := 0
			if c > 0 {
				from = []int{5, 30, 60, 61, 150, 230, 400}[c-1]
			}
			learnAll(t, l, x[from*d:upto*d], d)
			if err := l.Sync(500); err != nil {
				t.Fatalf("refresh %d, after %d rows: Sync: %v", refresh, upto, err)
			}
			if r := l.Residual(); r > 1e-9 {
				t.Errorf("refresh %d, after %d rows: residual %g after Sync", refresh, upto, r)
			}
			m := min(upto, W)
			kk := min(k, m-1)
			b := newDenseKPCA(t, l.cfg.Kernel, x[(upto-m)*d:upto*d], m, d, kk)
			s := l.Summary(nil)
			if s.Stored != m || !s.Ready {
				t.Fatalf("summary %+v, want %d stored and ready", s, m)
			}
			var sumB, traceB float64
			for i := range kk {
				want := b.lambda[i] / float64(m)
				if got := s.Eigenvalues[i]; math.Abs(got-want) > 1e-9*want {
					t.Errorf("refresh %d, after %d rows: eigenvalue %d = %.12g, want %.12g", refresh, upto, i, got, want)
				}
				sumB += b.lambda[i]
			}
			for i := range m {
				traceB += 1 - b.rmean[i]*2 + b.gmean // rbf: K_ii = 1
			}
			if math.Abs(s.ExplainedVariance-sumB/traceB) > 1e-9 {
				t.Errorf("explained variance %v, want %v", s.ExplainedVariance, sumB/traceB)
			}
			model, err := l.Model()
			if err != nil {
				t.Fatal(err)
			}
			if err := model.Validate(); err != nil {
				t.Fatalf("model: %v", err)
			}
			for r := range 10 {
				y := test[r*d : (r+1)*d]
				got, nov, err := l.Score(nil, y)
				if err != nil {
					t.Fatal(err)
				}
				want := b.project(y)
				var captured float64
				for i := range kk {
					if math.Abs(math.Abs(got[i])-math.Abs(want[i])) > 1e-7 {
						t.Errorf("refresh %d, after %d rows, test row %d: component %d = %v, want ±%v", refresh, upto, r, i, got[i], want[i])
					}
					captured += want[i] * want[i]
				}
				if mt := model.Transform(nil, y); !floatsClose(mt, got, 1e-12) {
					t.Errorf("model transform %v, want %v", mt, got)
				}
				if kk == k {
					// ‖φ(y) − m‖² from the batch, then SPE and T².
					var mean float64
					for j := range m {
						mean += b.kern.Eval(b.x[j*d:(j+1)*d], y) / float64(m)
					}
					dist := 1 - 2*mean + b.gmean
					if spe := max(dist-captured, 0); math.Abs(nov.SPE-spe) > 1e-8 {
						t.Errorf("SPE %v, want %v", nov.SPE, spe)
					}
					var t2 float64
					for i := range k {
						t2 += want[i] * want[i] * float64(m) / b.lambda[i]
					}
					if math.Abs(nov.T2-t2) > 1e-7*max(1, t2) {
						t.Errorf("T2 %v, want %v", nov.T2, t2)
					}
				}
			}
		}
	}
}

func floatsClose(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// TestWindowTracksWithoutSync checks the published components of the
// plain stream (one iteration per refresh, no Sync) against the batch KPCA
// of the window at the last refresh.
func TestWindowTracksWithoutSync(t *testing.T) {
	const d, k, W, n = 3, 3, 80, 600
	x := windowStream(n, d, 21)
	l, _ := NewWindow(windowConfig(d, k, W, 1))
	for i := range n {
		if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
			t.Fatal(err)
		}
		if i+1 < 2*k || (i+1)%50 != 0 {
			continue
		}
		m := min(i+1, W)
		b := newDenseKPCA(t, l.cfg.Kernel, x[(i+1-m)*d:(i+1)*d], m, d, k)
		s := l.Summary(nil)
		for c := range k {
			want := b.lambda[c] / float64(m)
			if math.Abs(s.Eigenvalues[c]-want) > 1e-3*want {
				t.Errorf("after %d rows: eigenvalue %d = %v, want %v", i+1, c, s.Eigenvalues[c], want)
			}
		}
	}
}

func TestWindowStateRoundTrip(t *testing.T) {
	const d, k, W = 3, 2, 30
	x := windowStream(200, d, 31)
	for _, upto := range []int{2, 3, 17, 30, 31, 95} {
		a, _ := NewWindow(windowConfig(d, k, W, 4))
		learnAll(t, a, x[:upto*d], d)
		st := a.State()
		b, _ := NewWindow(windowConfig(d, k, W, 4))
		if err := b.Restore(st); err != nil {
			t.Fatalf("after %d rows: Restore: %v", upto, err)
		}
		if !reflect.DeepEqual(st, b.State()) {
			t.Fatalf("after %d rows: restored state differs", upto)
		}
		lr, err := Restore(st)
		if err != nil || lr.Kind() != KindWindow {
			t.Fatalf("learners.Restore = %v, %v", lr, err)
		}
		learnAll(t, a, x[upto*d:], d)
		learnAll(t, b, x[upto*d:], d)
		if !reflect.DeepEqual(a.State(), b.State()) {
			t.Fatalf("after %d rows: states differ after continuing", upto)
		}
		ya, _ := a.Transform(nil, x[:d])
		yb, _ := b.Transform(nil, x[:d])
		if !slices.Equal(ya, yb) {
			t.Fatalf("projections differ: %v and %v", ya, yb)
		}
	}
}

func TestWindowRestoreRejects(t *testing.T) {
	const d, k, W = 3, 2, 30
	a, _ := NewWindow(windowConfig(d, k, W, 4))
	learnAll(t, a, windowStream(45, d, 41), d)
	good := a.State()
	clone := func() *State {
		s := *good
		s.Ints = maps(good.Ints)
		s.Scalars = maps(good.Scalars)
		s.Matrices = map[string]Matrix{}
		for n, m := range good.Matrices {
			s.Matrices[n] = Matrix{Rows: m.Rows, Cols: m.Cols, Data: slices.Clone(m.Data)}
		}
		return &s
	}
	tests := []struct {
		name string
		edit func(*State)
	}{
		{"kind", func(s *State) { s.Kind = KindKHA }},
		{"version", func(s *State) { s.Version = 99 }},
		{"config", func(s *State) { s.Config.Budget = 31 }},
		{"seen", func(s *State) { s.Seen = 3 }},
		{"stored too large", func(s *State) { s.Ints["stored"] = 31 }},
		{"head", func(s *State) { s.Ints["head"] = 30 }},
		{"ready", func(s *State) { s.Ints["ready"] = 2 }},
		{"since", func(s *State) { s.Ints["since"] = 4 }},
		{"missing rng", func(s *State) { delete(s.Ints, "rng") }},
		{"basis rows", func(s *State) { s.Ints["basis_rows"] = 30 }},
		{"published", func(s *State) { s.Ints["published"] = 2 }},
		{"version zero", func(s *State) { s.Ints["basis_version"] = 0 }},
		{"NaN sum", func(s *State) { s.Scalars["pub_sum"] = math.NaN() }},
		{"negative residual", func(s *State) { s.Scalars["residual"] = -1 }},
		{"missing points", func(s *State) { delete(s.Matrices, "points") }},
		{"points shape", func(s *State) { m := s.Matrices["points"]; m.Rows--; s.Matrices["points"] = m }},
		{"points Inf", func(s *State) { s.Matrices["points"].Data[4] = math.Inf(1) }},
		{"basis not orthonormal", func(s *State) { s.Matrices["basis"].Data[0] += 0.1 }},
		{"eigenvalues ascending", func(s *State) {
			e := s.Matrices["eigenvalues"].Data
			e[0], e[1] = e[1], e[0]
		}},
		{"negative eigenvalue", func(s *State) { s.Matrices["eigenvalues"].Data[1] = -1 }},
		{"vectors norm", func(s *State) { s.Matrices["vectors"].Data[0] *= 3 }},
		{"coefficients NaN", func(s *State) { s.Matrices["coefficients"].Data[0] = math.NaN() }},
		{"offsets shape", func(s *State) { s.Matrices["offsets"] = Matrix{Rows: 1, Cols: 1, Data: []float64{0}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := NewWindow(windowConfig(d, k, W, 4))
			learnAll(t, b, windowStream(7, d, 42), d)
			before := b.State()
			s := clone()
			tc.edit(s)
			if err := b.Restore(s); !errors.Is(err, ErrState) {
				t.Fatalf("Restore = %v, want ErrState", err)
			}
			if !reflect.DeepEqual(before, b.State()) {
				t.Fatal("learner changed by a failed Restore")
			}
		})
	}
	if err := a.Restore(nil); !errors.Is(err, ErrState) {
		t.Fatalf("Restore(nil) = %v", err)
	}
}

func maps[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestWindowDeterministic(t *testing.T) {
	const d = 4
	x := windowStream(150, d, 51)
	a, _ := NewWindow(windowConfig(d, 3, 40, 3))
	b, _ := NewWindow(windowConfig(d, 3, 40, 3))
	learnAll(t, a, x, d)
	learnAll(t, b, x, d)
	if !reflect.DeepEqual(a.State(), b.State()) {
		t.Fatal("same config and inputs gave different states")
	}
}

func TestWindowMemoryBytes(t *testing.T) {
	l, _ := NewWindow(windowConfig(8, 5, 200, 2))
	var floats int
	for _, s := range [][]float64{l.ring.pts, l.ring.norms, l.pub.pts, l.pub.norms, l.gram, l.block, l.img, l.s1, l.s2, l.z, l.u,
		l.vecs, l.coef, l.off, l.eig, l.krow, l.rsum, l.saveRow, l.diff, l.y, l.ones, l.savePt, l.t, l.theta, l.tmp, l.avg, l.bval, l.work, l.cosm, l.normU, l.normV, l.sm, l.gsum} {
		floats += cap(s)
	}
	floats += cap(l.kept) // ints, 8 bytes each
	if got := l.MemoryBytes(); got != 8*floats {
		t.Fatalf("MemoryBytes = %d, want %d (allocated)", got, 8*floats)
	}
	learnAll(t, l, windowStream(2000, 8, 52), 8)
	var after int
	for _, s := range [][]float64{l.ring.pts, l.pub.pts, l.gram, l.block, l.img, l.s1, l.s2, l.z, l.u, l.vecs, l.coef} {
		after += cap(s)
	}
	if want := 8 * (2*200*8 + 200*200 + 3*12*200 + 3*17*200 + 2*5*200); 8*after != want {
		t.Fatalf("memory after 10× the window = %d, want %d", 8*after, want)
	}
}

func TestWindowNoAllocs(t *testing.T) {
	const d = 4
	x := windowStream(300, d, 61)
	l, _ := NewWindow(windowConfig(d, 3, 50, 2))
	learnAll(t, l, x[:100*d], d)
	dst := make([]float64, 3)
	i := 100
	if a := testing.AllocsPerRun(100, func() {
		l.Learn(x[i*d : (i+1)*d])
		i++
	}); a != 0 {
		t.Errorf("Learn allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { l.Transform(dst, x[:d]) }); a != 0 {
		t.Errorf("Transform allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { l.Score(dst, x[:d]) }); a != 0 {
		t.Errorf("Score allocates %v times per call", a)
	}
}

func TestWindowConstantStream(t *testing.T) {
	l, _ := NewWindow(windowConfig(2, 2, 10, 1))
	for range 15 {
		if err := l.Learn([]float64{1, 1}); err != nil {
			t.Fatal(err)
		}
	}
	y, nov, err := l.Score(nil, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if y[0] != 0 || y[1] != 0 || nov.T2 != 0 || nov.SPE > 1e-12 {
		t.Fatalf("constant stream: y = %v, novelty %+v, want zeros", y, nov)
	}
	if s := l.Summary(nil); s.Eigenvalues[0] != 0 || s.ExplainedVariance != 0 {
		t.Fatalf("constant stream summary %+v", s)
	}
}

func TestWindowBasisVersion(t *testing.T) {
	// An ellipse in the (x0, x1) plane, then in the (x2, x3) plane.
	const d, n = 4, 600
	rng := rand.New(rand.NewPCG(71, 1))
	x := make([]float64, n*d)
	for i := range n {
		a := 2 * math.Pi * rng.Float64()
		for j := range d {
			x[i*d+j] = 0.05 * rng.NormFloat64()
		}
		o := 0
		if i >= n/2 {
			o = 2
		}
		x[i*d+o] += math.Cos(a)
		x[i*d+o+1] += 0.5 * math.Sin(a)
	}
	l, _ := NewWindow(windowConfig(d, 2, 100, 5))
	var v []uint64
	for _, upto := range []int{200, 300, 500, 600} {
		learnAll(t, l, x[int(l.Seen())*d:upto*d], d)
		v = append(v, l.Summary(nil).BasisVersion)
	}
	t.Logf("basis versions at rows 200, 300, 500, 600: %v", v)
	if v[0] < 1 {
		t.Errorf("basis version %d after publishing", v[0])
	}
	if v[1]-v[0] > 2 || v[3]-v[2] > 2 {
		t.Errorf("basis versions %v: more than 2 changes within a stationary phase", v)
	}
	if v[2] <= v[1] {
		t.Errorf("basis versions %v: no change across the switch of plane", v)
	}
}

func BenchmarkWindowLearn(b *testing.B) {
	for _, c := range []struct{ d, k, w, refresh int }{
		{8, 5, 256, 0}, {8, 5, 2000, 0}, {8, 5, 2000, 1}, {8, 5, 2000, 50},
	} {
		b.Run(fmt.Sprintf("d=%d/k=%d/W=%d/refresh=%d", c.d, c.k, c.w, c.refresh), func(b *testing.B) {
			x := windowStream(c.w+1000, c.d, 81)
			l, err := NewWindow(windowConfig(c.d, c.k, c.w, c.refresh))
			if err != nil {
				b.Fatal(err)
			}
			n := len(x) / c.d
			learnAll(b, l, x[:c.w*c.d], c.d)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := (c.w + i) % n
				if err := l.Learn(x[j*c.d : (j+1)*c.d]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWindowTransform(b *testing.B) {
	for _, c := range []struct{ d, k, w int }{{8, 5, 256}, {8, 5, 2000}} {
		b.Run(fmt.Sprintf("d=%d/k=%d/W=%d", c.d, c.k, c.w), func(b *testing.B) {
			x := windowStream(c.w+1, c.d, 82)
			l, _ := NewWindow(windowConfig(c.d, c.k, c.w, 50))
			learnAll(b, l, x, c.d)
			dst := make([]float64, c.k)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Transform(dst, x[:c.d]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWindowKernelsAndSmallWindows compares synced window learners with
// dense batch KPCA for every kernel and for the smallest windows (W = k+1).
func TestWindowKernelsAndSmallWindows(t *testing.T) {
	const d = 3
	x := windowStream(120, d, 91)
	cases := []struct {
		name string
		kern Kernel
		k, w int
	}{
		{"linear", Kernel{Name: KernelLinear}, 2, 30},
		{"poly", Kernel{Name: KernelPoly, Gamma: 0.5, Coef0: 1, Degree: 2}, 3, 30},
		{"laplacian", Kernel{Name: KernelLaplacian, Gamma: 0.7}, 3, 30},
		{"sigmoid", Kernel{Name: KernelSigmoid, Gamma: 0.1, Coef0: 0}, 1, 30},
		{"rbf W=k+1", Kernel{Name: KernelRBF, Gamma: 0.5}, 2, 3},
		{"rbf W=2", Kernel{Name: KernelRBF, Gamma: 0.5}, 1, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := windowConfig(d, tc.k, tc.w, 3)
			cfg.Kernel = tc.kern
			l, err := NewWindow(cfg)
			if err != nil {
				t.Fatal(err)
			}
			learnAll(t, l, x, d)
			if err := l.Sync(1000); err != nil {
				t.Fatal(err)
			}
			n := len(x) / d
			b := newDenseKPCA(t, l.cfg.Kernel, x[(n-tc.w)*d:], tc.w, d, tc.k)
			s := l.Summary(nil)
			for i := range tc.k {
				want := b.lambda[i] / float64(tc.w)
				if math.Abs(s.Eigenvalues[i]-want) > 1e-8*max(want, 1e-12) {
					t.Errorf("eigenvalue %d = %.12g, want %.12g", i, s.Eigenvalues[i], want)
				}
			}
			y := x[:d]
			got, err := l.Transform(nil, y)
			if err != nil {
				t.Fatal(err)
			}
			want := b.project(y)
			for i := range tc.k {
				if math.Abs(math.Abs(got[i])-math.Abs(want[i])) > 1e-6*max(1, math.Abs(want[i])) {
					t.Errorf("component %d = %v, want ±%v", i, got[i], want[i])
				}
			}
		})
	}
}
