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
	// SolverAuto (also "auto") picks by size: dense up to LanczosAbove
	// rows; above, fast for poly and linear kernels whose feature count D
	// is below n/2 (exact), else lanczos while the stored Gram (8n² bytes)
	// fits GramCap, else fast.
	SolverAuto = ""
	// SolverDense is the full eigendecomposition of the n×n centred Gram
	// (gonum EigenSym): O(n³) time, about 3·8n² bytes.
	SolverDense = "dense"
	// SolverLanczos is Lanczos with full reorthogonalisation on the exact
	// centred product: through a stored Gram while 8n² bytes fit GramCap,
	// else matrix-free, one kernel row at a time (O(n²d) per product, no
	// n×n storage).
	SolverLanczos = "lanczos"
	// SolverFast is Lanczos on fast products (Raykar and Duraiswami):
	// exact through the explicit monomial features for poly and linear
	// (O(n·D) per product, D = C(d+p, p)), approximate for rbf through the
	// improved fast Gauss transform at Precision (see ifgt.go). Where the
	// expansion does not pay (high d, narrow kernel; poly features D ≥ n/2)
	// and for the other kernels it falls back to the exact product through
	// the stored Gram while 8n² bytes fit GramCap (as SolverAuto would),
	// else to the exact matrix-free product; BatchFit.Note says which.
	SolverFast = "fast"
)

// DefaultLanczosAbove is the number of rows above which SolverAuto uses
// Lanczos. Measured for k = 5 (rbf, d = 8, including the Gram): dense 45 ms
// and Lanczos 2.4 ms at n = 256, dense 0.67 s and Lanczos 10 ms at n = 600.
// Dense stays the default for small n because it resolves exactly repeated
// eigenvalues without relying on Lanczos restarts.
const DefaultLanczosAbove = 256

// DefaultGramCap is the default memory cap, in bytes, of a stored n×n Gram
// (8n² bytes): 512 MiB, n ≤ 8192. Above it SolverAuto uses the fast
// solver and SolverLanczos its matrix-free product.
const DefaultGramCap = 512 << 20

// DefaultPrecision is the default Precision ε of the fast rbf product.
const DefaultPrecision = 1e-4

// DefaultMaxKrylov caps the Krylov dimension m of the matrix-free solvers,
// whose basis takes 8·n·m bytes.
const DefaultMaxKrylov = 300

// Products of a BatchFit (BatchFit.Product): how K·v was computed.
const (
	ProductGram     = "gram"     // stored n×n Gram (dense, lanczos under GramCap)
	ProductBlocked  = "blocked"  // exact, matrix-free, kernel rows on the fly
	ProductFeatures = "features" // exact, explicit poly/linear features
	ProductIFGT     = "ifgt"     // improved fast Gauss transform (rbf), approximate
)

// RankTolerance is the relative threshold below which a component of a
// batch fit is treated as absent: a component whose eigenvalue λᵢ of K̃ is
// ≤ RankTolerance·λ₁ (or ≤ 0) has its eigenvalue reported as 0 and its
// coefficients set to 0, so it projects everything to 0. Such a component
// carries no variance; dividing its eigenvector by √λᵢ would only amplify
// round-off.
const RankTolerance = 1e-10

// BatchOptions tunes FitBatchWith. The zero value is the default.
type BatchOptions struct {
	// Solver is SolverAuto (default, or "auto"), SolverDense,
	// SolverLanczos or SolverFast.
	Solver string
	// LanczosAbove is the row count above which SolverAuto uses Lanczos.
	// Default DefaultLanczosAbove.
	LanczosAbove int
	// GramCap is the largest stored Gram in bytes (see SolverAuto and
	// SolverLanczos). Default DefaultGramCap.
	GramCap int64
	// Precision is ε of the fast rbf product, in (0, 0.1]: every kernel
	// sum Σⱼ k(x, xⱼ)vⱼ is within ε·Σⱼ|vⱼ| of the exact one, so each
	// covariance eigenvalue λᵢ/n is within ε of the exact one (plus the
	// Lanczos tolerance). Default DefaultPrecision.
	Precision float64
	// MaxKrylov caps the Krylov dimension of the Lanczos solvers (memory
	// 8·n·MaxKrylov bytes). Default DefaultMaxKrylov (all n for a stored
	// Gram).
	MaxKrylov int
	// Seed seeds Lanczos's start vector.
	Seed uint64
	// OnPlan, when set, is called once the solver and product are chosen
	// and before the eigensolver starts (a fallback to the exact
	// matrix-free product can take long: callers may say so first).
	OnPlan func(BatchPlan)
}

// BatchPlan is how a batch fit is about to run (BatchOptions.OnPlan).
type BatchPlan struct {
	Rows            int
	Solver, Product string
	// Note and ErrorBound as in BatchFit.
	Note       string
	ErrorBound float64
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
	// Solver and Product say how the fit was computed (SolverDense …,
	// ProductGram …); empty for a restored fit.
	Solver, Product string
	// Note describes the fast rbf expansion, or says why a fast solver
	// fell back to the exact matrix-free product (empty otherwise).
	Note string
	// Products is the number of kernel-matrix products the matrix-free
	// solvers used (0 with a stored Gram).
	Products int
	// ErrorBound is the stated bound on |λᵢ/n − exact| of the fast rbf
	// product (its Precision ε); 0 for the exact products.
	ErrorBound float64

	rows *kernelRows
	kx   []float64      // n: scratch kernel row
	poly *polyProjector // poly/linear fits: projection through the features
	// gauss is the fast rbf product of the fit (nil unless Product is
	// ProductIFGT or a restored fit had one); rbf projects through it.
	gauss *ifgtProduct
	rbf   *rbfProjector
}

// rbfProjector projects through the fitted rbf expansion: with the sums
// eᵢ = Σⱼ αⱼᵢ k(xⱼ, x) and eₖ = (1/n)Σⱼ k(xⱼ, x) from one evaluation,
// yᵢ = eᵢ − sᵢeₖ + oᵢ, sᵢ = Σⱼ αⱼᵢ, oᵢ = g·sᵢ − Σⱼ αⱼᵢcⱼ. Each kernel sum
// is within ε·(its weights' l1 norm), so |Δyᵢ| ≤ ε(‖αᵢ‖₁ + |sᵢ|).
type rbfProjector struct {
	e      *ifgtEval
	s, off []float64
	sums   []float64 // scratch k+1
}

func newRBFProjector(g *ifgtProduct, alpha []float64, n, k int, col []float64, grand float64) *rbfProjector {
	m := k + 1
	w := make([]float64, n*m)
	rp := &rbfProjector{s: make([]float64, k), off: make([]float64, k), sums: make([]float64, m)}
	for j := range n {
		a := alpha[j*k : (j+1)*k]
		copy(w[j*m:], a)
		w[j*m+k] = 1 / float64(n)
		for i, ai := range a {
			rp.s[i] += ai
			rp.off[i] -= ai * col[j]
		}
	}
	for i := range k {
		rp.off[i] += grand * rp.s[i]
	}
	rp.e = g.evaluator(w, m)
	return rp
}

// project writes the projections into dst and returns the mean kernel
// value (1/n)Σⱼ k(xⱼ, x).
func (rp *rbfProjector) project(dst, x []float64) float64 {
	rp.e.eval(rp.sums, x)
	k := len(dst)
	mx := rp.sums[k]
	for i := range dst {
		dst[i] = rp.sums[i] - rp.s[i]*mx + rp.off[i]
	}
	return mx
}

// FitBatch is FitBatchWith with default options: the top k components of
// the n rows of x (row-major n×d) under kern. It copies x. Cost with a
// stored Gram: O(n²d) for the Gram and O(n³) (dense) or about O(n²·(k+30))
// (Lanczos) for the eigenpairs, memory O(n²); see SolverFast and
// SolverLanczos for the matrix-free products used above the Gram cap.
func FitBatch(kern Kernel, x []float64, n, d, k int) (*BatchFit, error) {
	return FitBatchWith(kern, x, n, d, k, BatchOptions{})
}

// FitBatchWith is FitBatch with options. It returns ErrConfig for a bad
// kernel, shape (n ≥ 1, d ≥ 1, 1 ≤ k ≤ n) or option, ErrDimension when
// len(x) ≠ n·d, ErrNonFinite for NaN or ±Inf in x, and ErrNumerical when
// the eigensolver fails.
//
// Memory: dense and lanczos under GramCap hold the n×n Gram (dense also its
// n×n eigenvectors); the matrix-free products hold O(n·d + n·k) plus the
// Krylov basis n·m (m ≤ MaxKrylov) and the expansion (D values for poly,
// the clusters' coefficients for rbf), never an n×n matrix.
func FitBatchWith(kern Kernel, x []float64, n, d, k int, opt BatchOptions) (*BatchFit, error) {
	kern = kern.withDefaults(d)
	pl, err := checkBatch(kern, x, n, d, k, opt)
	if err != nil {
		return nil, err
	}
	if opt.OnPlan != nil {
		bp := BatchPlan{Rows: n, Solver: pl.solver, Product: pl.product, Note: pl.note}
		if pl.ifgt != nil {
			bp.ErrorBound = pl.ifgt.eps
		}
		opt.OnPlan(bp)
	}
	want := min(k+1, n) // the (k+1)-th eigenvalue is wanted for the gap
	f := &BatchFit{
		Kernel:         kern,
		N:              n,
		D:              d,
		K:              k,
		Solver:         pl.solver,
		Product:        pl.product,
		Note:           pl.note,
		X:              append([]float64(nil), x...),
		Eigenvalues:    make([]float64, k),
		EigenvaluesCov: make([]float64, k),
		Alpha:          make([]float64, n*k),
	}
	var vals, vecs []float64
	if pl.product == ProductGram {
		gram := kern.Gram(nil, x, n, d)
		col, grand, diag := gramMeans(gram, n)
		f.ColMeans, f.GrandMean, f.Trace = col, grand, diag-float64(n)*grand
		vals, vecs, err = centeredTop(pl.solver, gram, col, grand, n, want, opt.Seed)
	} else {
		vals, vecs, err = f.fitMatrixFree(pl, want, opt)
	}
	if err != nil {
		return nil, err
	}
	f.setComponents(vals, vecs, want)
	f.init()
	return f, nil
}

// fitMatrixFree computes the column means, the trace and the top want
// eigenpairs of K̃ through the product pl names, without an n×n matrix.
func (f *BatchFit) fitMatrixFree(pl batchPlan, want int, opt BatchOptions) (vals, vecs []float64, err error) {
	n, d, x := f.N, f.D, f.X
	var p product
	tol := 0.0 // lanczosTop's default
	switch pl.product {
	case ProductFeatures:
		p = newFeatureProduct(pl.features, x, n, d)
	case ProductIFGT:
		p = pl.ifgt
		f.gauss = pl.ifgt
		f.ErrorBound = pl.ifgt.eps
		// The product is only ε-accurate: converging far below that buys nothing.
		tol = max(1e-12, pl.ifgt.eps/100)
	default:
		p = newBlockedProduct(f.Kernel, x, n, d)
	}
	// Centring through the same product: c = K1/n, g = 1ᵀK1/n².
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	f.ColMeans = make([]float64, n)
	p.apply(f.ColMeans, ones)
	var diag float64
	for i := range n {
		f.ColMeans[i] /= float64(n)
		f.GrandMean += f.ColMeans[i]
		diag += f.Kernel.Self(x[i*d : (i+1)*d])
	}
	f.GrandMean /= float64(n)
	f.Trace = diag - float64(n)*f.GrandMean
	tmp := ones // scratch from here on
	f.Products = 1
	op := func(dst, v []float64) { f.Products++; centredApply(p, dst, v, tmp) }
	maxIter := opt.MaxKrylov
	if maxIter <= 0 {
		maxIter = DefaultMaxKrylov
	}
	vals, vecs, err = lanczosTop(n, want, op, lanczosOptions{Seed: opt.Seed, MaxIter: min(maxIter, n), Tol: tol})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: batch (%s product): %w", ErrNumerical, pl.product, err)
	}
	return vals, vecs, nil
}

// batchPlan is a resolved solver and the product it runs on.
type batchPlan struct {
	solver, product string
	features        *polyFeatures // ProductFeatures
	ifgt            *ifgtProduct  // ProductIFGT
	note            string        // why the product was chosen, for logs
}

// maxFeatures bounds the explicit poly feature count D considered.
const maxFeatures = 1 << 16

// checkBatch validates the inputs of FitBatchWith and resolves its solver
// and product.
func checkBatch(kern Kernel, x []float64, n, d, k int, opt BatchOptions) (batchPlan, error) {
	var pl batchPlan
	if err := kern.Validate(); err != nil {
		return pl, err
	}
	if n < 1 || d < 1 || k < 1 || k > n {
		return pl, fmt.Errorf("%w: batch: need n ≥ 1, d ≥ 1 and 1 ≤ k ≤ n, got n=%d d=%d k=%d", ErrConfig, n, d, k)
	}
	if len(x) != n*d {
		return pl, fmt.Errorf("%w: batch: %d values for %d×%d rows", ErrDimension, len(x), n, d)
	}
	if err := opt.validate(); err != nil {
		return pl, err
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return pl, fmt.Errorf("%w: batch: row %d column %d is %v", ErrNonFinite, i/d, i%d, v)
		}
	}
	gramCap := opt.GramCap
	if gramCap <= 0 {
		gramCap = DefaultGramCap
	}
	gramFits := 8*float64(n)*float64(n) <= float64(gramCap)
	nf := polyFeatureDim(kern, d, maxFeatures)
	featuresPay := nf > 0 && nf < n/2
	pl.solver = opt.Solver
	if pl.solver == SolverAuto || pl.solver == "auto" {
		above := opt.LanczosAbove
		if above <= 0 {
			above = DefaultLanczosAbove
		}
		switch {
		case n <= above:
			pl.solver = SolverDense
		case featuresPay || !gramFits:
			pl.solver = SolverFast
		default:
			pl.solver = SolverLanczos
		}
	}
	switch pl.solver {
	case SolverDense:
		pl.product = ProductGram
	case SolverLanczos:
		pl.product = ProductBlocked
		if gramFits {
			pl.product = ProductGram
		}
	case SolverFast:
		pl.fastProduct(kern, x, n, d, nf, gramFits, featuresPay, opt.Precision)
	}
	return pl, nil
}

// fastProduct resolves SolverFast's product: the explicit features for
// poly and linear, the fast Gauss transform for rbf where its expansion
// pays; where neither pays, the stored Gram when it fits the cap (what
// SolverAuto would run, so fast is never slower than auto there), else the
// exact matrix-free product. The note says which path was taken and why.
func (pl *batchPlan) fastProduct(kern Kernel, x []float64, n, d, nf int, gramFits, featuresPay bool, eps float64) {
	pl.product = ProductBlocked
	var why string
	switch {
	case nf > 0 && (featuresPay || !gramFits):
		pl.product, pl.features = ProductFeatures, newPolyFeatures(kern, d)
		return
	case nf > 0:
		why = fmt.Sprintf("%d explicit features for %d rows do not pay", nf, n)
	case kern.Name == KernelRBF:
		if eps == 0 {
			eps = DefaultPrecision
		}
		g, notPaying := newIFGT(x, n, d, kern.Gamma, eps)
		if g != nil {
			pl.product, pl.ifgt = ProductIFGT, g
			pl.note = fmt.Sprintf("%d clusters, ≤ %d Taylor terms, estimated %.2g of the exact product's flops", g.Clusters, g.MaxTerms, g.Cost/g.ExactCost)
			return
		}
		why = notPaying
	default:
		why = fmt.Sprintf("no fast product for the %s kernel", kern.Name)
	}
	if gramFits {
		pl.product = ProductGram
		pl.note = why + ": exact product through the stored Gram (it fits the Gram cap)"
		return
	}
	pl.note = why + ": exact matrix-free product (the Gram exceeds the Gram cap)"
}

// validate checks the options' values.
func (o BatchOptions) validate() error {
	switch o.Solver {
	case SolverAuto, "auto", SolverDense, SolverLanczos, SolverFast:
	default:
		return fmt.Errorf("%w: batch: unknown solver %q (want auto, dense, lanczos or fast)", ErrConfig, o.Solver)
	}
	if o.Precision != 0 && !(o.Precision > 0 && o.Precision <= 0.1) {
		return fmt.Errorf("%w: batch: precision %v outside (0, 0.1]", ErrConfig, o.Precision)
	}
	if o.GramCap < 0 || o.MaxKrylov < 0 || o.LanczosAbove < 0 {
		return fmt.Errorf("%w: batch: negative gram cap %d, max Krylov %d or Lanczos threshold %d", ErrConfig, o.GramCap, o.MaxKrylov, o.LanczosAbove)
	}
	return nil
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
	if solver == SolverLanczos || solver == SolverFast {
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

// init builds the kernel-row evaluator and scratch from X, or for a poly
// or linear kernel whose features make a projection cheaper (D(k+1) <
// n(d+k)/2) the feature projector instead.
func (f *BatchFit) init() {
	if nf := polyFeatureDim(f.Kernel, f.D, maxFeatures); nf > 0 && 2*nf*(f.K+1) < f.N*(f.D+f.K) {
		f.poly = newPolyProjector(newPolyFeatures(f.Kernel, f.D), f.X, f.N, f.D, f.Alpha, f.K, f.ColMeans, f.GrandMean)
		return
	}
	// The expansion's projector holds k+1 coefficients per term: at most
	// 4·maxIFGTCoefs values (128 MiB), else kernel rows.
	if g := f.gauss; g != nil && g.coefOff[g.ks]*(f.K+1) <= 4*maxIFGTCoefs {
		f.rbf = newRBFProjector(g, f.Alpha, f.N, f.K, f.ColMeans, f.GrandMean)
		return
	}
	f.rows = newKernelRows(f.Kernel, f.D, f.N)
	f.rows.Reset(f.X, f.N)
	f.kx = make([]float64, f.N)
}

// project writes the projection of x into dst and returns ‖φ(x) − m‖²,
// where m is the feature-space mean of the fitted rows. x must have length D
// and dst length K.
func (f *BatchFit) project(dst, x []float64) float64 {
	if f.poly != nil {
		mx := f.poly.project(dst, x)
		return f.Kernel.Self(x) - 2*mx + f.GrandMean
	}
	if f.rbf != nil {
		mx := f.rbf.project(dst, x)
		return f.Kernel.Self(x) - 2*mx + f.GrandMean
	}
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
// panics. Cost O(n(d+k)) through kernel rows; O(D·k) through the explicit
// features of a poly or linear fit (see init); for a fit on the fast rbf
// product, one evaluation of its expansion (rbfProjector), within
// ε(‖αᵢ‖₁ + |sᵢ|) of the exact projection that Model's arithmetic gives.
// It does not allocate when dst is given.
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
// ring and, when Fit is called, computes batch kernel PCA of them
// (FitBatchWith with the options of SetFitOptions, default SolverAuto;
// Lanczos seeded by Config.Seed). Learn only stores a row and marks the fit stale;
// Transform, Score, Summary and Model use the last fit and return
// ErrNotReady before the first one. It serves as the reference learner and
// for periodic offline fits.
//
// Memory: the ring holds B·d values and a fit holds n·(d+k+2) values for
// its n ≤ B rows; Fit allocates a transient B×B Gram (and B×B eigenvectors
// for the dense solver) only with a stored Gram, at most GramCap bytes
// under SolverAuto; the matrix-free solvers need O(B·(d+k)) plus their
// Krylov basis (8·B·m bytes, m ≤ MaxKrylov) and expansion. Learn, Transform and Score do not allocate. A
// Batch is not safe for concurrent use.
//
// State names (see State):
//
//	Ints:     "count" stored rows (≤ B), "stale" 1 when rows changed since
//	          the fit, "basis_version" number of fits, "fitted" 0 or 1,
//	          and when fitted "fit_rows" n and "fit_rank"
//	Scalars:  when fitted "fit_grand_mean", "fit_trace", "fit_next", and
//	          "fit_precision" ε when the fit projects through the fast rbf
//	          expansion (optional: older states lack it)
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
	opt     BatchOptions // fit options (SetFitOptions); Seed is Config.Seed
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
// Fit needs about 2·B² more float64s transiently with a stored Gram (see
// SolverAuto). A fit on the fast rbf product also keeps its expansion:
// 8·(B(2d+2) + (k+1)·terms) bytes, terms ≤ 4M in all (README: Batch
// solvers).
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
	opt := b.opt
	opt.Seed = b.cfg.Seed
	f, err := FitBatchWith(b.cfg.Kernel, b.rows(), b.count, b.cfg.Dim, b.cfg.Components, opt)
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

// SetFitOptions sets the solver options of later fits (BatchOptions; its
// Seed is ignored: fits use Config.Seed). Options are not part of the
// State: a restored learner fits with the defaults until they are set
// again. It returns ErrConfig for a bad option and then changes nothing.
func (b *Batch) SetFitOptions(opt BatchOptions) error {
	if err := opt.validate(); err != nil {
		return err
	}
	b.opt = opt
	return nil
}

// LastFit returns the last fit (read-only; nil before the first).
func (b *Batch) LastFit() *BatchFit { return b.fit }

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
		if f.gauss != nil {
			s.Scalars["fit_precision"] = f.ErrorBound
		}
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
		if eps, ok := s.Scalars["fit_precision"]; ok && r.err == nil {
			// The fit projected through the fast rbf expansion at this
			// precision: rebuild it (deterministic in X, γ and ε).
			if !(eps > 0 && eps <= 0.1) || b.cfg.Kernel.Name != KernelRBF {
				r.fail("fit precision %v: want (0, 0.1] with an rbf kernel", eps)
			} else if g, _ := newIFGT(f.X, n, d, b.cfg.Kernel.Gamma, eps); g != nil {
				f.gauss, f.ErrorBound = g, eps
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
