package learners_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func batchConfig() learners.Config {
	return learners.Config{
		Learner:    learners.KindBatch,
		Dim:        3,
		Components: 3,
		Budget:     40,
		Kernel:     learners.Kernel{Name: learners.KernelRBF, Gamma: 1},
		Seed:       11,
	}
}

func fitBatchLearner(l learners.Learner) error {
	b, ok := l.(*learners.Batch)
	if !ok {
		return errors.New("not a *learners.Batch")
	}
	return b.Fit()
}

func TestBatchConformance(t *testing.T) {
	cfg := batchConfig()
	learnertest.Check(t, func() learners.Learner {
		l, err := learners.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, learnertest.Options{Dim: cfg.Dim, Budget: cfg.Budget, Seed: 5, AfterLearn: fitBatchLearner})
}

// TestBatchLearnerMatchesFit: the learner's fit of its ring equals FitBatch
// of the last B rows, oldest first.
func TestBatchLearnerMatchesFit(t *testing.T) {
	cfg := batchConfig()
	b, err := learners.NewBatch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const total = 97 // wraps the ring of 40 twice and a bit
	rows := make([]float64, 0, total*cfg.Dim)
	for i := range total {
		x := learnertest.Stream(make([]float64, cfg.Dim), 9, i)
		rows = append(rows, x...)
		if err := b.Learn(x); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Transform(nil, rows[:cfg.Dim]); !errors.Is(err, learners.ErrNotReady) {
		t.Fatalf("Transform before Fit: %v, want ErrNotReady", err)
	}
	if err := b.Fit(); err != nil {
		t.Fatal(err)
	}
	last := rows[(total-cfg.Budget)*cfg.Dim:]
	ref, err := learners.FitBatch(cfg.Kernel, last, cfg.Budget, cfg.Dim, cfg.Components)
	if err != nil {
		t.Fatal(err)
	}
	sum := b.Summary(nil)
	for i := range cfg.Components {
		if sum.Eigenvalues[i] != ref.EigenvaluesCov[i] {
			t.Errorf("eigenvalue %d: learner %v, FitBatch %v", i, sum.Eigenvalues[i], ref.EigenvaluesCov[i])
		}
	}
	x := learnertest.Stream(make([]float64, cfg.Dim), 9, 1000)
	y, nov, err := b.Score(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Transform(nil, x)
	var captured, t2 float64
	for i := range y {
		if y[i] != want[i] {
			t.Errorf("projection %d: learner %v, FitBatch %v", i, y[i], want[i])
		}
		captured += y[i] * y[i]
		t2 += y[i] * y[i] / ref.EigenvaluesCov[i]
	}
	// ‖φ(x) − m‖² from the Gram directly.
	n := cfg.Budget
	var mx, grand float64
	for j := range n {
		mx += cfg.Kernel.Eval(x, last[j*cfg.Dim:(j+1)*cfg.Dim])
		for l := range n {
			grand += cfg.Kernel.Eval(last[j*cfg.Dim:(j+1)*cfg.Dim], last[l*cfg.Dim:(l+1)*cfg.Dim])
		}
	}
	dist := 1 - 2*mx/float64(n) + grand/float64(n*n)
	if math.Abs(nov.SPE-(dist-captured)) > 1e-12 || math.Abs(nov.T2-t2) > 1e-9*t2 {
		t.Errorf("novelty %+v, want SPE %v T² %v", nov, dist-captured, t2)
	}
	if sum.BasisVersion != 1 || !sum.Ready || sum.Stored != cfg.Budget {
		t.Errorf("summary %+v, want basis version 1, ready, %d stored", sum, cfg.Budget)
	}
	// Fit without new rows is a no-op; a new row makes it stale.
	if err := b.Fit(); err != nil || b.Summary(nil).BasisVersion != 1 {
		t.Errorf("second Fit: %v, basis version %d; want nil, 1", err, b.Summary(nil).BasisVersion)
	}
	if err := b.Learn(x); err != nil || !b.Stale() {
		t.Errorf("Learn: %v, stale %v; want nil, true", err, b.Stale())
	}
}

func TestBatchFitNeedsRows(t *testing.T) {
	b, err := learners.NewBatch(batchConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Fit(); !errors.Is(err, learners.ErrNotReady) {
		t.Errorf("Fit of no rows: %v, want ErrNotReady", err)
	}
	b.Learn([]float64{1, 2, 3})
	b.Learn([]float64{1, 2, 4})
	if err := b.Fit(); !errors.Is(err, learners.ErrNotReady) {
		t.Errorf("Fit of 2 rows with k = 3: %v, want ErrNotReady", err)
	}
}

func TestFitBatchErrors(t *testing.T) {
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 1}
	x := []float64{0, 0, 1, 0, 0, 1}
	cases := []struct {
		name    string
		kern    learners.Kernel
		x       []float64
		n, d, k int
		solver  string
		want    error
	}{
		{"k_zero", rbf, x, 3, 2, 0, "", learners.ErrConfig},
		{"k_above_n", rbf, x, 3, 2, 4, "", learners.ErrConfig},
		{"n_zero", rbf, nil, 0, 2, 1, "", learners.ErrConfig},
		{"short_x", rbf, x[:5], 3, 2, 1, "", learners.ErrDimension},
		{"nan", rbf, []float64{0, 0, math.NaN(), 0, 0, 1}, 3, 2, 1, "", learners.ErrNonFinite},
		{"inf", rbf, []float64{0, 0, 1, 0, 0, math.Inf(-1)}, 3, 2, 1, "", learners.ErrNonFinite},
		{"bad_kernel", learners.Kernel{Name: "cosine"}, x, 3, 2, 1, "", learners.ErrConfig},
		{"bad_solver", rbf, x, 3, 2, 1, "qr", learners.ErrConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := learners.FitBatchWith(c.kern, c.x, c.n, c.d, c.k, learners.BatchOptions{Solver: c.solver})
			if !errors.Is(err, c.want) || f != nil {
				t.Errorf("got %v, %v; want nil, %v", f, err, c.want)
			}
		})
	}
}

// TestFitBatchRankDeficient: identical rows have a zero centred Gram, and
// the linear kernel on 2-D data has rank 2; absent components are zero, not NaN.
func TestFitBatchRankDeficient(t *testing.T) {
	for _, solver := range []string{learners.SolverDense, learners.SolverLanczos} {
		t.Run("constant/"+solver, func(t *testing.T) {
			x := []float64{1, 2, 1, 2, 1, 2, 1, 2}
			f, err := learners.FitBatchWith(learners.Kernel{Name: learners.KernelRBF, Gamma: 1}, x, 4, 2, 2, learners.BatchOptions{Solver: solver})
			if err != nil {
				t.Fatal(err)
			}
			y := f.Transform(nil, []float64{0, 0})
			if f.Rank != 0 || y[0] != 0 || y[1] != 0 || f.Eigenvalues[0] != 0 {
				t.Errorf("rank %d, eigenvalues %v, projection %v; want 0, zeros, zeros", f.Rank, f.Eigenvalues, y)
			}
		})
		t.Run("linear/"+solver, func(t *testing.T) {
			x := make([]float64, 0, 40)
			for i := range 20 {
				x = append(x, learnertest.Stream(make([]float64, 2), 3, i)...)
			}
			f, err := learners.FitBatchWith(learners.Kernel{Name: learners.KernelLinear}, x, 20, 2, 4, learners.BatchOptions{Solver: solver})
			if err != nil {
				t.Fatal(err)
			}
			if f.Rank != 2 || f.Eigenvalues[2] != 0 || f.Eigenvalues[3] != 0 {
				t.Errorf("rank %d eigenvalues %v, want rank 2 and two zeros", f.Rank, f.Eigenvalues)
			}
			m := f.Model(learners.KindBatch, 20)
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, v := range f.Transform(nil, []float64{3, -1}) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite projection %v", v)
				}
			}
		})
	}
}

// TestBatchLearnerReference feeds the toy parabola to a batch learner with
// a budget of all 100 rows and checks its Summary and projections against
// the stored scikit-learn reference, before and after a State round trip.
func TestBatchLearnerReference(t *testing.T) {
	ref, x, n, d := loadRef(t, "toy_parabola.kpca_ref.json")
	e := ref.References[0]
	cfg := learners.Config{Learner: learners.KindBatch, Dim: d, Components: e.NComponents, Budget: n, Kernel: e.Kernel.kernel()}
	l, err := learners.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.(*learners.Batch).Fit(); err != nil {
		t.Fatal(err)
	}
	restored, err := learners.Restore(l.State())
	if err != nil {
		t.Fatal(err)
	}
	for name, lr := range map[string]learners.Learner{"fitted": l, "restored": restored} {
		sum := lr.Summary(nil)
		for i, v := range sum.Eigenvalues {
			if r := relErr(v, e.EigenvaluesOver[i]); r > 1e-11 {
				t.Errorf("%s: eigenvalue %d = %.15g, want %.15g", name, i, v, e.EigenvaluesOver[i])
			}
		}
		var captured float64
		for _, v := range e.EigenvaluesKc {
			captured += v
		}
		if r := relErr(sum.ExplainedVariance, captured/e.TraceKc); r > 1e-12 {
			t.Errorf("%s: explained variance %v, want %v", name, sum.ExplainedVariance, captured/e.TraceKc)
		}
		y := make([]float64, e.NComponents)
		for r, row := range e.ProjectionRows {
			if _, err := lr.Transform(y, x[row*d:(row+1)*d]); err != nil {
				t.Fatal(err)
			}
			for i, want := range e.Projections[r] {
				if diff := math.Min(math.Abs(y[i]-want), math.Abs(y[i]+want)); diff > 1e-11 {
					t.Errorf("%s: row %d component %d: %.15g, want ±%.15g", name, row, i, y[i], want)
				}
			}
		}
	}
}

func ExampleBatch() {
	l, err := learners.NewBatch(learners.Config{
		Dim:        2,
		Components: 2,
		Budget:     8,
		Kernel:     learners.Kernel{Name: learners.KernelRBF, Gamma: 1},
	})
	if err != nil {
		panic(err)
	}
	for i := range 8 {
		th := float64(i) * math.Pi / 4
		if err := l.Learn([]float64{math.Cos(th), math.Sin(th)}); err != nil {
			panic(err)
		}
	}
	if _, err := l.Transform(nil, []float64{1, 0}); err != nil {
		fmt.Println("before Fit:", err)
	}
	if err := l.Fit(); err != nil {
		panic(err)
	}
	y, err := l.Transform(nil, []float64{1, 0})
	if err != nil {
		panic(err)
	}
	// Eight points on the unit circle: the Gram is circulant, the top pair
	// is the first Fourier mode, λ/n = (1/8)Σⱼ e^{−(2−2cos(jπ/4))}cos(jπ/4),
	// and a training point's projection has norm √(λ/4).
	sum := l.Summary(nil)
	fmt.Printf("eigenvalues %.4f, projection norm %.4f\n", sum.Eigenvalues, math.Hypot(y[0], y[1]))
	// Output:
	// before Fit: learners: not ready: batch learner has not been fitted
	// eigenvalues [0.2153 0.2153], projection norm 0.6562
}

func BenchmarkBatch(b *testing.B) {
	for _, c := range []struct{ d, k, budget int }{{8, 5, 64}, {8, 5, 256}, {32, 10, 256}} {
		cfg := learners.Config{Learner: learners.KindBatch, Dim: c.d, Components: c.k, Budget: c.budget,
			Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}}
		l, err := learners.NewBatch(cfg)
		if err != nil {
			b.Fatal(err)
		}
		rows := make([][]float64, c.budget)
		for i := range rows {
			rows[i] = learnertest.Stream(make([]float64, c.d), 1, i)
			l.Learn(rows[i])
		}
		name := fmt.Sprintf("d=%d/k=%d/B=%d", c.d, c.k, c.budget)
		b.Run("Fit/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				l.Learn(rows[i%len(rows)])
				if err := l.Fit(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Learn/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				l.Learn(rows[i%len(rows)])
			}
		})
		dst := make([]float64, c.k)
		b.Run("Transform/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := l.Transform(dst, rows[i%len(rows)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
