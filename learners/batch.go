package learners

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Batch kernel PCA solvers for FitBatchWith.
const (
	SolverAuto    = ""        // dense up to DefaultLanczosAbove rows, Lanczos above
	SolverDense   = "dense"   // full eigendecomposition of the n×n centred Gram (gonum EigenSym)
	SolverLanczos = "lanczos" // Lanczos with full reorthogonalisation on the centred Gram as a matvec
)

// DefaultLanczosAbove is the number of rows above which SolverAuto uses
// Lanczos. Measured for k = 5 (rbf, d = 8, including the Gram): dense 45 ms
// and Lanczos 2.4 ms at n = 256, dense 0.67 s and Lanczos 10 ms at n = 600.
// Dense stays the default for small n because it resolves exactly repeated
// eigenvalues without relying on Lanczos restarts.
const DefaultLanczosAbove = 256

// RankTolerance is the relative threshold below which a component of a
// batch fit is treated as absent: a component whose eigenvalue λᵢ of K̃ is
// ≤ RankTolerance·λ₁ (or ≤ 0) has its eigenvalue reported as 0 and its
// coefficients set to 0, so it projects everything to 0. Such a component
// carries no variance; dividing its eigenvector by √λᵢ would only amplify
// round-off.
const RankTolerance = 1e-10

// BatchOptions tunes FitBatchWith. The zero value is the default.
type BatchOptions struct {
	// Solver is SolverAuto (default), SolverDense or SolverLanczos.
	Solver string
	// LanczosAbove is the row count above which SolverAuto uses Lanczos.
	// Default DefaultLanczosAbove.
	LanczosAbove int
	// Seed seeds Lanczos's start vector.
	Seed uint64
}

// BatchFit is an exact batch kernel PCA of n rows (Schölkopf, Smola and
// Müller 1998; Raykar and Duraiswami for the Lanczos solver), in the
// conventions of the reference data:
//
//	K̃ = H K H,  H = I − (1/n)11ᵀ,  K̃ vᵢ = λᵢ vᵢ,  αᵢ = vᵢ/√λᵢ,
//	yᵢ(x) = Σⱼ αⱼᵢ k̃(xⱼ, x),
//	k̃(xⱼ, x) = k(xⱼ, x) − (1/n)Σₗ k(xₗ, x) − cⱼ + g,
//
// with cⱼ the column means of K and g its grand mean. So αᵢᵀαᵢ = 1/λᵢ, the
// feature-space axis wᵢ = Σⱼ αⱼᵢ(φ(xⱼ) − m) has unit norm, and on training
// row j the projection is √λᵢ·vⱼᵢ. Signs follow scikit-learn: the entry of
// vᵢ with the largest magnitude is positive.
//
// Components beyond the numerical rank (see RankTolerance) have eigenvalue 0
// and zero coefficients. The exported fields are read-only. A BatchFit holds
// a scratch row for Transform, so it is not safe for concurrent use.
type BatchFit struct {
	Kernel  Kernel
	N, D, K int
	// X holds the n fitted rows, row-major n×d (a copy).
	X []float64
	// Eigenvalues are the top k eigenvalues λᵢ of K̃, descending; 0 beyond the rank.
	Eigenvalues []float64
	// EigenvaluesCov are λᵢ/n, the covariance-operator eigenvalues.
	EigenvaluesCov []float64
	// Next is eigenvalue number k+1 of K̃ (0 when k = n), for gap reporting.
	Next float64
	// Trace is trace(K̃), the total feature-space variance times n.
	Trace float64
	// Rank is the number of components with a non-zero eigenvalue.
	Rank int
	// Alpha holds the coefficients αⱼᵢ, row-major n×k.
	Alpha []float64
	// ColMeans are the column means cⱼ = (1/n)Σₗ K[l][j] of the uncentred Gram.
	ColMeans []float64
	// GrandMean is g = (1/n²)Σⱼₗ K[j][l].
	GrandMean float64

	rows *kernelRows
	kx   []float64 // n: scratch kernel row
}

// FitBatch is FitBatchWith with default options: the top k components of
// the n rows of x (row-major n×d) under kern. It copies x. Cost: O(n²d) for
// the Gram and O(n³) (dense) or about O(n²·(k+30)) (Lanczos) for the
// eigenpairs; memory O(n²).
func FitBatch(kern Kernel, x []float64, n, d, k int) (*BatchFit, error) {
	return FitBatchWith(kern, x, n, d, k, BatchOptions{})
}

// FitBatchWith is FitBatch with options. It returns ErrConfig for a bad
// kernel or shape (n ≥ 1, d ≥ 1, 1 ≤ k ≤ n), ErrDimension when len(x) ≠ n·d,
// ErrNonFinite for NaN or ±Inf in x, and ErrNumerical when the eigensolver
// fails.
func FitBatchWith(kern Kernel, x []float64, n, d, k int, opt BatchOptions) (*BatchFit, error) {
	kern = kern.withDefaults(d)
	solver, err := checkBatch(kern, x, n, d, k, opt)
	if err != nil {
		return nil, err
	}
	gram := kern.Gram(nil, x, n, d)
	col, grand, diag := gramMeans(gram, n)
	want := min(k+1, n) // the (k+1)-th eigenvalue is wanted for the gap
	vals, vecs, err := centeredTop(solver, gram, col, grand, n, want, opt.Seed)
	if err != nil {
		return nil, err
	}
	f := &BatchFit{
		Kernel:         kern,
		N:              n,
		D:              d,
		K:              k,
		X:              append([]float64(nil), x...),
		Eigenvalues:    make([]float64, k),
		EigenvaluesCov: make([]float64, k),
		Trace:          diag - float64(n)*grand,
		Alpha:          make([]float64, n*k),
		ColMeans:       col,
		GrandMean:      grand,
	}
	f.setComponents(vals, vecs, want)
	f.init()
	return f, nil
}

// checkBatch validates the inputs of FitBatchWith and resolves its solver.
func checkBatch(kern Kernel, x []float64, n, d, k int, opt BatchOptions) (string, error) {
	if err := kern.Validate(); err != nil {
		return "", err
	}
	if n < 1 || d < 1 || k < 1 || k > n {
		return "", fmt.Errorf("%w: batch: need n ≥ 1, d ≥ 1 and 1 ≤ k ≤ n, got n=%d d=%d k=%d", ErrConfig, n, d, k)
	}
	if len(x) != n*d {
		return "", fmt.Errorf("%w: batch: %d values for %d×%d rows", ErrDimension, len(x), n, d)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", fmt.Errorf("%w: batch: row %d column %d is %v", ErrNonFinite, i/d, i%d, v)
		}
	}
	solver := opt.Solver
	if solver == SolverAuto {
		above := opt.LanczosAbove
		if above <= 0 {
			above = DefaultLanczosAbove
		}
		solver = SolverDense
		if n > above {
			solver = SolverLanczos
		}
	}
	if solver != SolverDense && solver != SolverLanczos {
		return "", fmt.Errorf("%w: batch: unknown solver %q (want dense or lanczos)", ErrConfig, solver)
	}
	return solver, nil
}

// gramMeans returns the column means c of the n×n Gram matrix, its grand
// mean g and its trace.
func gramMeans(gram []float64, n int) (col []float64, grand, diag float64) {
	col = make([]float64, n)
	for i := range n {
		row := gram[i*n : (i+1)*n]
		for j, v := range row {
			col[j] += v
		}
		diag += row[i]
	}
	for j := range col {
		col[j] /= float64(n)
		grand += col[j]
	}
	return col, grand / float64(n), diag
}

// centeredTop returns the want largest eigenvalues of the centred Gram
// matrix K̃ = K − 1cᵀ − c1ᵀ + g11ᵀ and their eigenvectors (n×want,
// row-major). The dense solver centres gram in place; Lanczos never forms K̃.
func centeredTop(solver string, gram, col []float64, grand float64, n, want int, seed uint64) (vals, vecs []float64, err error) {
	if solver == SolverLanczos {
		// K̃v = Kv − 1(cᵀv) − c(1ᵀv) + g(1ᵀv)1.
		op := func(dst, v []float64) {
			var cv, sv float64
			for j, vj := range v {
				cv += col[j] * vj
				sv += vj
			}
			symv(dst, gram, n, v)
			for i := range dst {
				dst[i] += -cv - col[i]*sv + grand*sv
			}
		}
		vals, vecs, err = lanczosTop(n, want, op, lanczosOptions{Seed: seed})
		if err != nil {
			return nil, nil, fmt.Errorf("%w: batch: %w", ErrNumerical, err)
		}
		return vals, vecs, nil
	}
	// K̃ in place: K̃[i][j] = K[i][j] − cᵢ − cⱼ + g.
	for i := range n {
		row := gram[i*n : (i+1)*n]
		for j := range row {
			row[j] += grand - col[i] - col[j]
		}
	}
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(n, gram), true) {
		return nil, nil, fmt.Errorf("%w: batch: dense eigendecomposition did not converge", ErrNumerical)
	}
	all := es.Values(nil) // ascending
	var v mat.Dense
	es.VectorsTo(&v)
	vals = make([]float64, want)
	vecs = make([]float64, n*want)
	for i := range want {
		src := n - 1 - i
		vals[i] = all[src]
		for j := range n {
			vecs[j*want+i] = v.At(j, src)
		}
	}
	return vals, vecs, nil
}

// setComponents fills Rank, Eigenvalues, EigenvaluesCov, Next and Alpha
// from the top eigenpairs of K̃ (vecs n×want): a component is kept when its
// eigenvalue is positive and above RankTolerance·λ₁; its coefficients are
// the eigenvector over √λ, signed so that its largest entry is positive.
func (f *BatchFit) setComponents(vals, vecs []float64, want int) {
	n, k := f.N, f.K
	if want > k {
		f.Next = vals[k]
	}
	cut := RankTolerance * vals[0]
	for i := range k {
		lam := vals[i]
		if !(lam > 0) || lam <= cut {
			continue // absent component: eigenvalue and coefficients stay 0
		}
		f.Rank++
		f.Eigenvalues[i] = lam
		f.EigenvaluesCov[i] = lam / float64(n)
		big, at := 0.0, 0
		for j := range n {
			if a := math.Abs(vecs[j*want+i]); a > big {
				big, at = a, j
			}
		}
		s := 1 / math.Sqrt(lam)
		if vecs[at*want+i] < 0 {
			s = -s
		}
		for j := range n {
			f.Alpha[j*k+i] = s * vecs[j*want+i]
		}
	}
}

// init builds the kernel-row evaluator and scratch from X.
func (f *BatchFit) init() {
	f.rows = newKernelRows(f.Kernel, f.D, f.N)
	f.rows.Reset(f.X, f.N)
	f.kx = make([]float64, f.N)
}

// project writes the projection of x into dst and returns ‖φ(x) − m‖²,
// where m is the feature-space mean of the fitted rows. x must have length D
// and dst length K.
func (f *BatchFit) project(dst, x []float64) float64 {
	kx := f.rows.Row(f.kx, x, norm2(x))
	var mx float64
	for _, v := range kx {
		mx += v
	}
	mx /= float64(f.N)
	// k̃(xⱼ, x) into kx.
	for j := range kx {
		kx[j] += f.GrandMean - mx - f.ColMeans[j]
	}
	for i := range dst {
		dst[i] = 0
	}
	k := f.K
	for j, kc := range kx {
		a := f.Alpha[j*k : (j+1)*k]
		for i, ai := range a {
			dst[i] += ai * kc
		}
	}
	return f.Kernel.Self(x) - 2*mx + f.GrandMean
}

// Transform writes the k projections of x (length D) into dst and returns
// it; a nil dst is allocated, one of length K reused, any other length
// panics. Cost O(n(d+k)); it does not allocate when dst is given.
func (f *BatchFit) Transform(dst, x []float64) []float64 {
	if len(x) != f.D {
		panic(fmt.Sprintf("learners: batch transform of %d values, want %d", len(x), f.D))
	}
	dst = prepareDst(dst, f.K)
	f.project(dst, x)
	return dst
}

// Model returns the portable export of the fit: Points are the n rows,
//
//	Coefficients[j][i] = αⱼᵢ − sᵢ/n,   Offsets[i] = Σⱼ αⱼᵢcⱼ − g·sᵢ,
//
// with sᵢ = Σⱼ αⱼᵢ, which reproduces Transform exactly (sᵢ is 0 up to
// round-off, since K̃1 = 0). Eigenvalues are λᵢ/n.
func (f *BatchFit) Model(kind string, seen int64) *Model {
	n, k := f.N, f.K
	s := make([]float64, k)
	off := make([]float64, k)
	for j := range n {
		for i := range k {
			a := f.Alpha[j*k+i]
			s[i] += a
			off[i] += a * f.ColMeans[j]
		}
	}
	coef := make([]float64, n*k)
	for j := range n {
		for i := range k {
			coef[j*k+i] = f.Alpha[j*k+i] - s[i]/float64(n)
		}
	}
	for i := range k {
		off[i] -= f.GrandMean * s[i]
	}
	return modelFrom(kind, f.Kernel, f.X, n, f.D, coef, k, off, f.EigenvaluesCov, seen)
}

func init() {
	constructors[KindBatch] = func(c Config) (Learner, error) { return NewBatch(c) }
}

// Batch is the "batch" learner: it keeps the last Budget observations in a
// ring and, when Fit is called, computes exact batch kernel PCA of them
// (FitBatch; Lanczos above DefaultLanczosAbove rows, seeded by
// Config.Seed). Learn only stores a row and marks the fit stale;
// Transform, Score, Summary and Model use the last fit and return
// ErrNotReady before the first one. It serves as the reference learner and
// for periodic offline fits.
//
// Memory: the ring holds B·d values and a fit holds n·(d+k+2) values for
// its n ≤ B rows; Fit allocates a transient B×B Gram (and B×B eigenvectors
// for the dense solver). Learn, Transform and Score do not allocate. A
// Batch is not safe for concurrent use.
//
// State names (see State):
//
//	Ints:     "count" stored rows (≤ B), "stale" 1 when rows changed since
//	          the fit, "basis_version" number of fits, "fitted" 0 or 1,
//	          and when fitted "fit_rows" n and "fit_rank"
//	Scalars:  when fitted "fit_grand_mean", "fit_trace", "fit_next"
//	Matrices: "rows" count×d oldest first; when fitted "fit_points" n×d,
//	          "fit_alpha" n×k, "fit_col_means" 1×n, "fit_eigenvalues" 1×k
//	          (eigenvalues of K̃, not divided by n)
type Batch struct {
	cfg     Config
	ring    []float64 // B×d
	count   int       // stored rows
	head    int       // next slot to write
	seen    int64
	stale   bool
	version uint64
	fit     *BatchFit
}

// NewBatch returns an empty batch learner after validating cfg.
func NewBatch(cfg Config) (*Batch, error) {
	cfg.Learner = KindBatch
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Batch{cfg: cfg, ring: make([]float64, cfg.Budget*cfg.Dim)}, nil
}

// Kind returns "batch".
func (b *Batch) Kind() string { return KindBatch }

// Dim returns the input dimension d.
func (b *Batch) Dim() int { return b.cfg.Dim }

// Components returns k.
func (b *Batch) Components() int { return b.cfg.Components }

// Seen returns the number of observations learned.
func (b *Batch) Seen() int64 { return b.seen }

// Stale reports whether rows were learned since the last fit.
func (b *Batch) Stale() bool { return b.stale }

// MemoryBytes is the learner's steady memory in bytes: the ring B·d plus a
// fit of B rows B·(d+k+2) plus the fit's kernel-row cache, in float64s.
// Fit needs about 2·B² more float64s transiently.
func (b *Batch) MemoryBytes() int {
	bb, d, k := b.cfg.Budget, b.cfg.Dim, b.cfg.Components
	return 8 * (bb*d + bb*(2*d+k+3) + k)
}

// Learn stores a copy of x as the newest row, dropping the oldest when B
// rows are stored, and marks the fit stale. It never allocates.
func (b *Batch) Learn(x []float64) error {
	d := b.cfg.Dim
	if err := checkInput(x, d); err != nil {
		return err
	}
	copy(b.ring[b.head*d:(b.head+1)*d], x)
	b.head = (b.head + 1) % b.cfg.Budget
	b.count = min(b.count+1, b.cfg.Budget)
	b.seen++
	b.stale = true
	return nil
}

// rows returns the stored rows oldest first in a new count×d slice.
func (b *Batch) rows() []float64 {
	d := b.cfg.Dim
	out := make([]float64, 0, b.count*d)
	if b.count < b.cfg.Budget {
		return append(out, b.ring[:b.count*d]...)
	}
	out = append(out, b.ring[b.head*d:]...)
	return append(out, b.ring[:b.head*d]...)
}

// Fit computes batch kernel PCA of the stored rows. It needs at least
// max(2, k) rows (else ErrNotReady) and does nothing when the fit is up to
// date. On failure (ErrNumerical) the previous fit stays.
func (b *Batch) Fit() error {
	if b.fit != nil && !b.stale {
		return nil
	}
	if need := max(2, b.cfg.Components); b.count < need {
		return fmt.Errorf("%w: batch fit needs %d rows, has %d", ErrNotReady, need, b.count)
	}
	f, err := FitBatchWith(b.cfg.Kernel, b.rows(), b.count, b.cfg.Dim, b.cfg.Components, BatchOptions{Seed: b.cfg.Seed})
	if err != nil {
		if errors.Is(err, ErrNumerical) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNumerical, err)
	}
	b.fit = f
	b.stale = false
	b.version++
	return nil
}

// Transform projects x onto the k components of the last fit. See Learner.
func (b *Batch) Transform(dst, x []float64) ([]float64, error) {
	if err := checkInput(x, b.cfg.Dim); err != nil {
		return nil, err
	}
	if b.fit == nil {
		return nil, fmt.Errorf("%w: batch learner has not been fitted", ErrNotReady)
	}
	dst = prepareDst(dst, b.cfg.Components)
	b.fit.project(dst, x)
	return dst, nil
}

// Score is Transform plus the novelty of x: SPE = ‖φ(x) − m‖² − Σᵢ yᵢ² and
// T² = Σᵢ yᵢ²/(λᵢ/n) over the components with λᵢ > 0, m and n those of the fit.
func (b *Batch) Score(dst, x []float64) ([]float64, Novelty, error) {
	if err := checkInput(x, b.cfg.Dim); err != nil {
		return nil, Novelty{}, err
	}
	if b.fit == nil {
		return nil, Novelty{}, fmt.Errorf("%w: batch learner has not been fitted", ErrNotReady)
	}
	dst = prepareDst(dst, b.cfg.Components)
	dist := b.fit.project(dst, x)
	var nov Novelty
	var captured float64
	for i, y := range dst {
		captured += y * y
		if l := b.fit.EigenvaluesCov[i]; l > 0 {
			nov.T2 += y * y / l
		}
	}
	nov.SPE = max(0, dist-captured)
	return dst, nov, nil
}

// Summary reports the last fit's eigenvalues λᵢ/n, written into dst.
func (b *Batch) Summary(dst []float64) Summary {
	s := Summary{BasisVersion: b.version, Stored: b.count}
	if b.fit == nil {
		return s
	}
	s.Ready = true
	s.Eigenvalues = prepareDst(dst, b.cfg.Components)
	copy(s.Eigenvalues, b.fit.EigenvaluesCov)
	var sum float64
	for _, l := range b.fit.Eigenvalues {
		sum += l
	}
	if b.fit.Trace > 0 {
		s.ExplainedVariance = min(1, max(0, sum/b.fit.Trace))
	}
	return s
}

// Model exports the last fit (see BatchFit.Model).
func (b *Batch) Model() (*Model, error) {
	if b.fit == nil {
		return nil, fmt.Errorf("%w: batch learner has not been fitted", ErrNotReady)
	}
	return b.fit.Model(KindBatch, b.seen), nil
}

// State returns a deep copy of the learner; see Batch for the names.
func (b *Batch) State() *State {
	s := newState(KindBatch, b.cfg, b.seen)
	d, k := b.cfg.Dim, b.cfg.Components
	s.Ints["count"] = int64(b.count)
	s.Ints["stale"] = b2i(b.stale)
	s.Ints["basis_version"] = int64(b.version)
	s.Ints["fitted"] = b2i(b.fit != nil)
	s.Matrices["rows"] = Matrix{Rows: b.count, Cols: d, Data: b.rows()}
	if f := b.fit; f != nil {
		s.Ints["fit_rows"] = int64(f.N)
		s.Ints["fit_rank"] = int64(f.Rank)
		s.Scalars["fit_grand_mean"] = f.GrandMean
		s.Scalars["fit_trace"] = f.Trace
		s.Scalars["fit_next"] = f.Next
		s.putMatrix("fit_points", f.N, d, f.X)
		s.putMatrix("fit_alpha", f.N, k, f.Alpha)
		s.putMatrix("fit_col_means", 1, f.N, f.ColMeans)
		s.putMatrix("fit_eigenvalues", 1, k, f.Eigenvalues)
	}
	return s
}

// Restore replaces the learner's state with s after checking it: header,
// shapes, finiteness, counts within the budget, eigenvalues non-negative
// and descending. On error (ErrState) the learner is unchanged.
func (b *Batch) Restore(s *State) error {
	r := &stateReader{s: s}
	r.header(KindBatch, b.cfg)
	if r.err != nil {
		return r.err
	}
	d, k, bud := b.cfg.Dim, b.cfg.Components, b.cfg.Budget
	count := int(r.int("count", 0, min(int64(bud), s.Seen)))
	stale := r.int("stale", 0, 1) == 1
	version := r.int("basis_version", 0, math.MaxInt64)
	fitted := r.int("fitted", 0, 1) == 1
	rows := r.matrix("rows", count, d)
	var f *BatchFit
	if fitted && r.err == nil {
		n := int(r.int("fit_rows", int64(max(2, k)), int64(bud)))
		rank := int(r.int("fit_rank", 0, int64(k)))
		f = &BatchFit{
			Kernel:    b.cfg.Kernel,
			N:         n,
			D:         d,
			K:         k,
			Rank:      rank,
			GrandMean: r.scalar("fit_grand_mean", -math.MaxFloat64, math.MaxFloat64),
			Trace:     r.scalar("fit_trace", 0, math.MaxFloat64),
			Next:      r.scalar("fit_next", -math.MaxFloat64, math.MaxFloat64),
		}
		f.X = slices.Clone(r.matrix("fit_points", n, d))
		f.Alpha = slices.Clone(r.matrix("fit_alpha", n, k))
		f.ColMeans = slices.Clone(r.matrix("fit_col_means", 1, n))
		f.Eigenvalues = slices.Clone(r.matrix("fit_eigenvalues", 1, k))
		if r.err == nil {
			present := 0
			for i, l := range f.Eigenvalues {
				if l < 0 || (i > 0 && l > f.Eigenvalues[i-1]) {
					r.fail("fit eigenvalues %v are not non-negative and descending", f.Eigenvalues)
					break
				}
				if l > 0 {
					present++
				}
			}
			if present != rank {
				r.fail("fit rank %d but %d positive eigenvalues", rank, present)
			}
		}
		if r.err == nil {
			f.EigenvaluesCov = make([]float64, k)
			for i, l := range f.Eigenvalues {
				f.EigenvaluesCov[i] = l / float64(n)
			}
			f.init()
		}
	} else if !fitted && version != 0 {
		r.fail("unfitted state with basis version %d", version)
	}
	if r.err != nil {
		return r.err
	}
	clear(b.ring)
	copy(b.ring, rows)
	b.count = count
	b.head = count % bud
	b.seen = s.Seen
	b.stale = stale
	b.version = uint64(version)
	b.fit = f
	return nil
}
