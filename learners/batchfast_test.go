package learners_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/kpcastream/kpcastream/learners"
)

// featurePCA is the exact KPCA of a poly kernel with c₀ ≥ 0 as linear PCA
// of explicit features, built independently of the learners package: every
// exponent vector a with |a| ≤ p (an odometer over {0..p}^d), feature
// √(p!/(a!(p−|a|)!)·c₀^(p−|a|)·γ^|a|)·x^a, so φ(x)ᵀφ(y) = (γxᵀy + c₀)^p.
type featurePCA struct {
	exps  [][]int
	scale []float64
	mean  []float64
	vals  []float64  // top k eigenvalues of Φ̃ᵀΦ̃ (= those of K̃), descending
	axes  *mat.Dense // D×k unit eigenvectors
	gamma float64
}

func fact(n int) float64 { return math.Gamma(float64(n + 1)) }

func newFeaturePCA(t *testing.T, x []float64, n, d, p, k int, gamma, c0 float64) *featurePCA {
	t.Helper()
	fp := &featurePCA{gamma: gamma}
	a := make([]int, d)
	for {
		s := 0
		for _, v := range a {
			s += v
		}
		if s <= p {
			w := fact(p) / fact(p-s) * math.Pow(gamma, float64(s))
			if p > s {
				w *= math.Pow(c0, float64(p-s))
			}
			for _, v := range a {
				w /= fact(v)
			}
			if w != 0 {
				fp.exps = append(fp.exps, append([]int(nil), a...))
				fp.scale = append(fp.scale, math.Sqrt(w))
			}
		}
		i := 0
		for i < d {
			a[i]++
			if a[i] <= p {
				break
			}
			a[i] = 0
			i++
		}
		if i == d {
			break
		}
	}
	nf := len(fp.exps)
	phi := mat.NewDense(n, nf, nil)
	row := make([]float64, nf)
	fp.mean = make([]float64, nf)
	for j := range n {
		fp.phi(row, x[j*d:(j+1)*d])
		phi.SetRow(j, row)
		for i, v := range row {
			fp.mean[i] += v / float64(n)
		}
	}
	for j := range n {
		for i := range nf {
			phi.Set(j, i, phi.At(j, i)-fp.mean[i])
		}
	}
	var cov mat.SymDense
	cov.SymOuterK(1, phi.T())
	var es mat.EigenSym
	if !es.Factorize(&cov, true) {
		t.Fatal("feature covariance: EigenSym failed")
	}
	all := es.Values(nil)
	var v mat.Dense
	es.VectorsTo(&v)
	fp.axes = mat.NewDense(nf, k, nil)
	for i := range k {
		fp.vals = append(fp.vals, all[nf-1-i])
		fp.axes.SetCol(i, mat.Col(nil, nf-1-i, &v))
	}
	return fp
}

func (fp *featurePCA) phi(dst, x []float64) {
	for f, e := range fp.exps {
		v := fp.scale[f]
		for i, p := range e {
			for range p {
				v *= x[i]
			}
		}
		dst[f] = v
	}
}

// project writes the projections of x onto the top k axes.
func (fp *featurePCA) project(dst, x []float64) {
	row := make([]float64, len(fp.exps))
	fp.phi(row, x)
	for i := range row {
		row[i] -= fp.mean[i]
	}
	for c := range dst {
		dst[c] = 0
		for i, r := range row {
			dst[c] += r * fp.axes.At(i, c)
		}
	}
}

func gaussRows(n, d int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 99))
	x := make([]float64, n*d)
	for i := range x {
		x[i] = rng.NormFloat64() * (1 + float64(i%d)/2)
	}
	return x
}

// checkAgainstFeatures compares a fit with explicit-feature PCA:
// eigenvalues relative to each, projections of the training rows and of
// fresh rows up to one sign per component, relative to the largest.
func checkAgainstFeatures(t *testing.T, f *learners.BatchFit, fp *featurePCA, x []float64, n, d int, tol float64) {
	t.Helper()
	k := f.K
	for i := range k {
		if e := math.Abs(f.Eigenvalues[i]-fp.vals[i]) / fp.vals[i]; !(e <= tol) {
			t.Errorf("eigenvalue %d: got %.12g, features %.12g (rel %.2g)", i, f.Eigenvalues[i], fp.vals[i], e)
		}
	}
	fresh := gaussRows(200, d, 12345)
	pts := append(append([]float64(nil), x[:min(n, 2000)*d]...), fresh...)
	m := len(pts) / d
	got := make([]float64, m*k)
	want := make([]float64, m*k)
	y := make([]float64, k)
	for j := range m {
		f.Transform(got[j*k:(j+1)*k], pts[j*d:(j+1)*d])
		fp.project(y, pts[j*d:(j+1)*d])
		copy(want[j*k:], y)
	}
	for c := range k {
		var dp, big float64
		for j := range m {
			dp += got[j*k+c] * want[j*k+c]
			big = math.Max(big, math.Abs(want[j*k+c]))
		}
		sign := 1.0
		if dp < 0 {
			sign = -1
		}
		var worst float64
		for j := range m {
			worst = math.Max(worst, math.Abs(sign*got[j*k+c]-want[j*k+c]))
		}
		if !(worst <= tol*big) {
			t.Errorf("component %d: projections differ by %.3g (largest %.3g, tol %.1g relative)", c, worst, big, tol)
		}
	}
}

// TestFitBatchFastPolyExact: the fast solver's poly products are exact, so
// eigenvalues and projections equal explicit-feature PCA to 1e-6.
func TestFitBatchFastPolyExact(t *testing.T) {
	const n, d, k = 3000, 5, 4
	x := gaussRows(n, d, 1)
	for _, c := range []struct {
		name   string
		solver string
		kern   learners.Kernel
		p      int
		c0     float64
	}{
		{"poly3_c1_fast", learners.SolverFast, learners.Kernel{Name: learners.KernelPoly, Gamma: 0.2, Coef0: 1, Degree: 3}, 3, 1},
		{"poly3_c1_auto", learners.SolverAuto, learners.Kernel{Name: learners.KernelPoly, Gamma: 0.2, Coef0: 1, Degree: 3}, 3, 1},
		{"poly2_c0", learners.SolverFast, learners.Kernel{Name: learners.KernelPoly, Gamma: 0.5, Degree: 2}, 2, 0},
		{"linear", learners.SolverAuto, learners.Kernel{Name: learners.KernelLinear}, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := learners.FitBatchWith(c.kern, x, n, d, k, learners.BatchOptions{Solver: c.solver, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			if f.Solver != learners.SolverFast || f.Product != learners.ProductFeatures {
				t.Fatalf("solver %q product %q, want fast on features", f.Solver, f.Product)
			}
			gamma := c.kern.Gamma
			if c.kern.Name == learners.KernelLinear {
				gamma = 1
			}
			fp := newFeaturePCA(t, x, n, d, c.p, k, gamma, c.c0)
			checkAgainstFeatures(t, f, fp, x, n, d, 1e-6)
		})
	}
}

// TestFitBatchFastPolyNegativeCoef0: with c₀ < 0 the feature weights are
// signed; the fast product still equals the Gram (checked against dense).
func TestFitBatchFastPolyNegativeCoef0(t *testing.T) {
	const n, d, k = 240, 3, 3
	x := gaussRows(n, d, 2)
	kern := learners.Kernel{Name: learners.KernelPoly, Gamma: 0.3, Coef0: -0.5, Degree: 3}
	dense, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Solver: learners.SolverDense})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Solver: learners.SolverFast, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range k {
		if e := math.Abs(fast.Eigenvalues[i]-dense.Eigenvalues[i]) / dense.Eigenvalues[0]; !(e <= 1e-9) {
			t.Errorf("eigenvalue %d: fast %v dense %v", i, fast.Eigenvalues[i], dense.Eigenvalues[i])
		}
	}
	for i := range k {
		if e := math.Abs(fast.ColMeans[i] - dense.ColMeans[i]); !(e <= 1e-9*math.Abs(dense.GrandMean)+1e-12) {
			t.Errorf("column mean %d: fast %v dense %v", i, fast.ColMeans[i], dense.ColMeans[i])
		}
	}
}

// TestFitBatchMatrixFreeLanczos: with a Gram cap too small for the Gram,
// lanczos runs on the blocked exact product and matches dense.
func TestFitBatchMatrixFreeLanczos(t *testing.T) {
	const n, d, k = 300, 4, 3
	x := gaussRows(n, d, 3)
	for _, kern := range []learners.Kernel{
		{Name: learners.KernelRBF, Gamma: 0.2},
		{Name: learners.KernelLaplacian, Gamma: 0.2},
	} {
		dense, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Solver: learners.SolverDense})
		if err != nil {
			t.Fatal(err)
		}
		for _, solver := range []string{learners.SolverLanczos, learners.SolverAuto} {
			f, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Solver: solver, GramCap: 1024, Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			if f.Product != learners.ProductBlocked {
				t.Fatalf("%s %s: product %q, want blocked", kern.Name, solver, f.Product)
			}
			for i := range k {
				if e := math.Abs(f.Eigenvalues[i]-dense.Eigenvalues[i]) / dense.Eigenvalues[0]; !(e <= 1e-9) {
					t.Errorf("%s %s eigenvalue %d: %v, dense %v", kern.Name, solver, i, f.Eigenvalues[i], dense.Eigenvalues[i])
				}
			}
			if e := math.Abs(f.Trace-dense.Trace) / dense.Trace; !(e <= 1e-12) {
				t.Errorf("%s trace %v, dense %v", kern.Name, f.Trace, dense.Trace)
			}
		}
	}
}

// TestFitBatchSolverSelection: which solver and product auto picks.
func TestFitBatchSolverSelection(t *testing.T) {
	poly := learners.Kernel{Name: learners.KernelPoly, Gamma: 0.2, Coef0: 1, Degree: 3}
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}
	for _, c := range []struct {
		name         string
		kern         learners.Kernel
		n, d         int
		opt          learners.BatchOptions
		solver, prod string
	}{
		{"small dense", rbf, 200, 2, learners.BatchOptions{}, learners.SolverDense, learners.ProductGram},
		{"rbf gram fits", rbf, 400, 2, learners.BatchOptions{}, learners.SolverLanczos, learners.ProductGram},
		{"poly features", poly, 400, 2, learners.BatchOptions{}, learners.SolverFast, learners.ProductFeatures},
		// d = 12, p = 3: D = 455 > n/2, and the Gram fits.
		{"poly wide", poly, 400, 12, learners.BatchOptions{}, learners.SolverLanczos, learners.ProductGram},
		{"poly wide over cap", poly, 400, 12, learners.BatchOptions{GramCap: 1 << 10}, learners.SolverFast, learners.ProductFeatures},
		{"explicit dense", poly, 400, 2, learners.BatchOptions{Solver: "dense"}, learners.SolverDense, learners.ProductGram},
		{"auto word", rbf, 200, 2, learners.BatchOptions{Solver: "auto"}, learners.SolverDense, learners.ProductGram},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := gaussRows(c.n, c.d, 4)
			f, err := learners.FitBatchWith(c.kern, x, c.n, c.d, 2, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if f.Solver != c.solver || f.Product != c.prod {
				t.Errorf("solver %q product %q, want %q %q", f.Solver, f.Product, c.solver, c.prod)
			}
		})
	}
}

// TestFitBatchBadOptions: bad options are ErrConfig naming the option.
func TestFitBatchBadOptions(t *testing.T) {
	x := gaussRows(10, 2, 5)
	kern := learners.Kernel{Name: learners.KernelRBF, Gamma: 1}
	for _, opt := range []learners.BatchOptions{
		{Solver: "fastest"},
		{Precision: -1e-3},
		{Precision: 0.5},
		{Precision: math.NaN()},
		{GramCap: -1},
		{MaxKrylov: -3},
	} {
		if _, err := learners.FitBatchWith(kern, x, 10, 2, 2, opt); !errors.Is(err, learners.ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", opt, err)
		}
	}
	b, err := learners.NewBatch(learners.Config{Dim: 2, Components: 1, Budget: 8, Kernel: kern})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetFitOptions(learners.BatchOptions{Solver: "gpu"}); !errors.Is(err, learners.ErrConfig) {
		t.Errorf("SetFitOptions(gpu): %v, want ErrConfig", err)
	}
}

// TestFitBatchFastRBFWithinPrecision: the fast rbf solver (improved fast
// Gauss transform) puts each covariance eigenvalue within its stated bound
// ε of the dense solver's, and its projections of the training rows stay
// close; where the expansion does not pay it falls back to the exact
// product and says so.
func TestFitBatchFastRBFWithinPrecision(t *testing.T) {
	const k = 4
	for _, c := range []struct {
		n, d  int
		gamma float64
		eps   float64
	}{
		{800, 2, 0.5, 1e-6},
		{800, 3, 0.02, 1e-4},
	} {
		x := gaussRows(c.n, c.d, 6)
		kern := learners.Kernel{Name: learners.KernelRBF, Gamma: c.gamma}
		dense, err := learners.FitBatchWith(kern, x, c.n, c.d, k, learners.BatchOptions{Solver: learners.SolverDense})
		if err != nil {
			t.Fatal(err)
		}
		fast, err := learners.FitBatchWith(kern, x, c.n, c.d, k, learners.BatchOptions{Solver: learners.SolverFast, Precision: c.eps, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if fast.Product != learners.ProductIFGT || fast.ErrorBound != c.eps {
			t.Fatalf("d=%d γ=%v: product %q bound %v (%s), want ifgt at %v", c.d, c.gamma, fast.Product, fast.ErrorBound, fast.Note, c.eps)
		}
		var worst float64
		for i := range k {
			e := math.Abs(fast.EigenvaluesCov[i] - dense.EigenvaluesCov[i])
			worst = math.Max(worst, e)
			if !(e <= c.eps) {
				t.Errorf("d=%d γ=%v eigenvalue %d: fast %.10g dense %.10g, error %.3g > ε %.1g", c.d, c.gamma, i, fast.EigenvaluesCov[i], dense.EigenvaluesCov[i], e, c.eps)
			}
		}
		t.Logf("d=%d γ=%v ε=%v: worst covariance eigenvalue error %.3g", c.d, c.gamma, c.eps, worst)
	}
	// Standard normal rows in 8-d at γ = 1/d: the expansion does not pay.
	// The fallback is the stored Gram while it fits the cap (what auto
	// runs), the blocked exact product above it; the note says which.
	x := gaussRows(400, 8, 7)
	for _, c := range []struct {
		gramCap int64
		product string
		says    string
	}{{0, learners.ProductGram, "stored Gram"}, {1024, learners.ProductBlocked, "matrix-free"}} {
		var plans []learners.BatchPlan
		f, err := learners.FitBatchWith(learners.Kernel{Name: learners.KernelRBF}, x, 400, 8, 2, learners.BatchOptions{Solver: learners.SolverFast, GramCap: c.gramCap,
			OnPlan: func(p learners.BatchPlan) { plans = append(plans, p) }})
		if err != nil {
			t.Fatal(err)
		}
		if f.Product != c.product || !strings.Contains(f.Note, "does not pay") || !strings.Contains(f.Note, c.says) || f.ErrorBound != 0 {
			t.Errorf("8-d rbf, Gram cap %d: product %q note %q bound %v, want the %s fallback with a note", c.gramCap, f.Product, f.Note, f.ErrorBound, c.product)
		}
		if len(plans) != 1 || plans[0].Product != f.Product || plans[0].Note != f.Note || plans[0].Rows != 400 {
			t.Errorf("OnPlan calls %+v, want one announcing the fit's product and note", plans)
		}
		auto, err := learners.FitBatchWith(learners.Kernel{Name: learners.KernelRBF}, x, 400, 8, 2, learners.BatchOptions{GramCap: c.gramCap})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if e := math.Abs(f.Eigenvalues[i]-auto.Eigenvalues[i]) / auto.Eigenvalues[0]; !(e <= 1e-9) {
				t.Errorf("Gram cap %d eigenvalue %d: fast fallback %v, auto %v", c.gramCap, i, f.Eigenvalues[i], auto.Eigenvalues[i])
			}
		}
	}
}

// TestFitBatchFastPoly200k is the target at full size: poly
// (d 5, degree 3, default γ = 1/d and c₀ = 1) KPCA of 200,000 rows equals
// explicit-feature PCA to 1e-6 in eigenvalues and projections.
func TestFitBatchFastPoly200k(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000-row fit and explicit-feature reference: about 10 s on 2 cores; run without -short")
	}
	const n, d, k = 200_000, 5, 2
	x := gaussRows(n, d, 11)
	kern := learners.Kernel{Name: learners.KernelPoly, Coef0: 1, Degree: 3}
	f, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f.Solver != learners.SolverFast || f.Product != learners.ProductFeatures {
		t.Fatalf("auto picked solver %q product %q, want fast on features", f.Solver, f.Product)
	}
	fp := newFeaturePCA(t, x, n, d, 3, k, 1.0/d, 1)
	checkAgainstFeatures(t, f, fp, x, n, d, 1e-6)
}

// TestLanczosRankDeficientStops: on an operator of rank r ≪ n Lanczos
// accepts the invariant range after one restart that finds nothing new,
// instead of walking the null space to n steps; the values are exact.
func TestLanczosRankDeficientStops(t *testing.T) {
	const n, r, k = 3000, 8, 3
	rng := rand.New(rand.NewPCG(4, 4))
	u := make([]float64, n*r) // A = U diag(w) Uᵀ, rank r
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	w := []float64{9, 7, 5, 3, 2, 1, 0.5, 0.25}
	calls := 0
	op := func(dst, v []float64) {
		calls++
		c := make([]float64, r)
		for i := range n {
			for j := range r {
				c[j] += u[i*r+j] * v[i]
			}
		}
		for i := range n {
			var s float64
			for j := range r {
				s += u[i*r+j] * w[j] * c[j]
			}
			dst[i] = s
		}
	}
	vals, _, err := learners.LanczosTop(n, k, op, learners.LanczosOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if calls > 2*r+4 {
		t.Errorf("%d products for rank %d, want about r+1", calls, r)
	}
	// Exact top eigenvalues: those of diag(√w) UᵀU diag(√w).
	g := mat.NewSymDense(r, nil)
	for a := range r {
		for b := a; b < r; b++ {
			var s float64
			for i := range n {
				s += u[i*r+a] * u[i*r+b]
			}
			g.SetSym(a, b, s*math.Sqrt(w[a]*w[b]))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(g, false) {
		t.Fatal("EigenSym failed")
	}
	want := es.Values(nil)
	for i := range k {
		if e := math.Abs(vals[i]-want[r-1-i]) / want[r-1]; !(e <= 1e-10) {
			t.Errorf("value %d: %v, want %v", i, vals[i], want[r-1-i])
		}
	}
}

// TestFastRBFProjection: a fast rbf fit projects through its expansion;
// each projection is within ε(‖αᵢ‖₁ + |sᵢ|) of the exact projection by the
// same coefficients (the model export's arithmetic), and close to the
// dense fit's; a Batch learner's state carries the precision, so a
// restored learner projects identically.
func TestFastRBFProjection(t *testing.T) {
	const n, d, k, eps = 800, 2, 3, 1e-4
	x := gaussRows(n, d, 21)
	kern := learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}
	f, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Solver: learners.SolverFast, Precision: eps, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f.Product != learners.ProductIFGT {
		t.Fatalf("product %q (%s), want ifgt", f.Product, f.Note)
	}
	bound := make([]float64, k)
	for i := range k {
		var l1, s float64
		for j := range n {
			l1 += math.Abs(f.Alpha[j*k+i])
			s += f.Alpha[j*k+i]
		}
		bound[i] = eps * (l1 + math.Abs(s))
	}
	m := f.Model(learners.KindBatch, int64(n))
	dense, err := learners.FitBatchWith(kern, x, n, d, k, learners.BatchOptions{Solver: learners.SolverDense})
	if err != nil {
		t.Fatal(err)
	}
	pts := append(append([]float64(nil), x[:300*d]...), gaussRows(100, d, 22)...)
	got, exact, ref := make([]float64, k), make([]float64, k), make([]float64, k)
	worst := make([]float64, k)
	var worstDense float64
	for j := range len(pts) / d {
		p := pts[j*d : (j+1)*d]
		f.Transform(got, p)
		m.Transform(exact, p)
		dense.Transform(ref, p)
		for i := range k {
			worst[i] = math.Max(worst[i], math.Abs(got[i]-exact[i]))
			if !(math.Abs(got[i]-exact[i]) <= bound[i]) {
				t.Fatalf("row %d component %d: expansion %v, exact %v, bound %.3g", j, i, got[i], exact[i], bound[i])
			}
			// Up to the component's sign.
			worstDense = math.Max(worstDense, math.Abs(math.Abs(got[i])-math.Abs(ref[i])))
		}
	}
	if worstDense > 1e-3 {
		t.Errorf("projections differ from the dense fit's by %.3g in magnitude", worstDense)
	}
	t.Logf("expansion vs exact projection: worst %v against bounds %v; vs dense %.3g", worst, bound, worstDense)

	cfg := learners.Config{Learner: learners.KindBatch, Dim: d, Components: k, Budget: n, Kernel: kern, Seed: 1}
	b, err := learners.NewBatch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetFitOptions(learners.BatchOptions{Solver: learners.SolverFast, Precision: eps}); err != nil {
		t.Fatal(err)
	}
	for j := range n {
		if err := b.Learn(x[j*d : (j+1)*d]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Fit(); err != nil {
		t.Fatal(err)
	}
	st := b.State()
	if st.Scalars["fit_precision"] != eps {
		t.Fatalf("state fit_precision %v, want %v", st.Scalars["fit_precision"], eps)
	}
	c, err := learners.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	for j := range 50 {
		p := pts[j*d : (j+1)*d]
		y1, err1 := b.Transform(nil, p)
		y2, err2 := c.Transform(nil, p)
		if err1 != nil || err2 != nil || !slices.Equal(y1, y2) {
			t.Fatalf("row %d: learner %v (%v), restored %v (%v)", j, y1, err1, y2, err2)
		}
	}
	for _, bad := range []float64{0, -1, 0.5, math.NaN()} {
		st := b.State()
		st.Scalars["fit_precision"] = bad
		if _, err := learners.Restore(st); !errors.Is(err, learners.ErrState) {
			t.Errorf("fit_precision %v: %v, want ErrState", bad, err)
		}
	}
}
