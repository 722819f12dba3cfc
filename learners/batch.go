package learners

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Batch kernel PCA solvers for FitBatchWith.
const (
	SolverAuto    = ""        // dense up to DefaultLanczosAbove rows, Lanczos above
	SolverDense   = "dense"   // full eigendecomposition of the n×n centred Gram (gonum EigenSym)
	SolverLanczos = "lanczos" // Lanczos with full reorthogonalisation on the centred Gram as a matvec
)

// DefaultLanczosAbove is the number of rows above which SolverAuto uses Lanczos.
const DefaultLanczosAbove = 600

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

	rows *Rows
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
	if err := kern.Validate(); err != nil {
		return nil, err
	}
	if n < 1 || d < 1 || k < 1 || k > n {
		return nil, fmt.Errorf("%w: batch: need n ≥ 1, d ≥ 1 and 1 ≤ k ≤ n, got n=%d d=%d k=%d", ErrConfig, n, d, k)
	}
	if len(x) != n*d {
		return nil, fmt.Errorf("%w: batch: %d values for %d×%d rows", ErrDimension, len(x), n, d)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: batch: row %d column %d is %v", ErrNonFinite, i/d, i%d, v)
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
		return nil, fmt.Errorf("%w: batch: unknown solver %q (want dense or lanczos)", ErrConfig, solver)
	}

	gram := kern.Gram(nil, x, n, d)
	col := make([]float64, n)
	var grand, diag float64
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
	grand /= float64(n)

	want := min(k+1, n)      // the (k+1)-th eigenvalue is wanted for the gap
	var vals, vecs []float64 // want values, n×want vectors
	switch solver {
	case SolverDense:
		// K̃ in place: K̃[i][j] = K[i][j] − cᵢ − cⱼ + g.
		for i := range n {
			row := gram[i*n : (i+1)*n]
			for j := range row {
				row[j] += grand - col[i] - col[j]
			}
		}
		var es mat.EigenSym
		if !es.Factorize(mat.NewSymDense(n, gram), true) {
			return nil, fmt.Errorf("%w: batch: dense eigendecomposition did not converge", ErrNumerical)
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
	case SolverLanczos:
		// K̃v = Kv − 1(cᵀv) − c(1ᵀv) + g(1ᵀv)1, so K̃ is never formed.
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
		var err error
		vals, vecs, err = LanczosTop(n, want, op, LanczosOptions{Seed: opt.Seed})
		if err != nil {
			return nil, fmt.Errorf("%w: batch: %w", ErrNumerical, err)
		}
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
		// Sign: the entry of largest magnitude is positive.
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
	f.init()
	return f, nil
}

// init builds the kernel-row evaluator and scratch from X.
func (f *BatchFit) init() {
	f.rows = NewRows(f.Kernel, f.D, f.N)
	f.rows.Reset(f.X, f.N)
	f.kx = make([]float64, f.N)
}

// symv writes A·v into dst for the row-major n×n matrix a.
func symv(dst, a []float64, n int, v []float64) {
	for i := range n {
		dst[i] = dot(a[i*n:(i+1)*n], v)
	}
}

// project writes the projection of x into dst and returns ‖φ(x) − m‖²,
// where m is the feature-space mean of the fitted rows. x must have length D
// and dst length K.
func (f *BatchFit) project(dst, x []float64) float64 {
	kx := f.rows.Row(f.kx, x, Norm2(x))
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
