// Package kpcaeval scores a kernel PCA model against exact batch kernel PCA
// of a set of rows, using Gram matrices only (no explicit feature map).
//
// A learners.Model describes k feature-space directions wᵢ = Σⱼ Aⱼᵢ φ(zⱼ)
// over its points Z with A = Coefficients (the offsets only shift the
// projections). The reference is learners.FitBatch of the evaluation rows
// X with the model's kernel and the same k: directions uᵢ = Σⱼ Cⱼᵢ(φ(xⱼ) − m)
// with C = α, orthonormal by construction (αᵢᵀK̃αⱼ = δᵢⱼ). Compare reports
// the principal angles between span{wᵢ} and span{uᵢ}, the relative errors of
// the model's eigenvalues, the reference's eigengap and the feature-space
// reconstruction errors of both subspaces.
//
// The functions are pure and safe for concurrent use. Cost: one batch fit of
// the n rows (O(n³) dense, less with Lanczos) plus O(n·p·(d+k)) for the cross
// Gram; memory O(n² + n·p).
package kpcaeval

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/kpcastream/kpcastream/learners"
)

// Report compares a model with batch kernel PCA of the evaluation rows.
type Report struct {
	// N is the number of evaluation rows, K the number of components.
	N, K int
	// Cosines are the cosines of the principal angles between the model's
	// and the reference's k-dimensional subspaces, descending, in [0, 1].
	// When the reference has rank r < k, the last k − r are 0.
	Cosines []float64
	// Similarity is the mean of the squared cosines, in [0, 1]; 1 means the
	// same subspace.
	Similarity float64
	// EigRelErr[i] = |λ̂ᵢ − λᵢ/n| / (λᵢ/n), λ̂ the model's eigenvalues and λᵢ
	// those of the reference's centred Gram K̃ (+Inf when λᵢ = 0 ≠ λ̂ᵢ).
	EigRelErr []float64
	// RefEigenvalues are the reference's λᵢ/n.
	RefEigenvalues []float64
	// Gap is the reference's relative eigengap (λₖ − λₖ₊₁)/λₖ; a small gap
	// means component k is poorly determined and only the subspace spanned
	// with its neighbours is meaningful.
	Gap float64
	// ReconError is the mean over the rows of ‖φ(x) − m‖² − bᵀ(WᵀW)⁺b with
	// b = Wᵀ(φ(x) − m): the squared distance of the centred row to the
	// model's subspace. m is the mean of the evaluation rows.
	ReconError float64
	// ReconErrorBatch is the same for the reference subspace,
	// (trace K̃ − Σᵢ λᵢ)/n; no k-dimensional subspace does better on X.
	ReconErrorBatch float64
}

// Compare fits batch kernel PCA to the n rows of x (row-major n×d) with the
// model's kernel and number of components, and compares the model with it.
// It returns the model's validation error, learners.ErrDimension when d
// differs from the model's dimension, or the batch fit's error.
func Compare(m *learners.Model, x []float64, n, d int) (*Report, error) {
	if m == nil {
		return nil, errors.New("kpcaeval: nil model")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("kpcaeval: %w", err)
	}
	_, md, k := m.Dims()
	if md != d {
		return nil, fmt.Errorf("kpcaeval: %w: model dimension %d, rows have %d", learners.ErrDimension, md, d)
	}
	if k > n {
		return nil, fmt.Errorf("kpcaeval: model has %d components, more than the %d rows", k, n)
	}
	ref, err := learners.FitBatch(m.Kernel, x, n, d, k)
	if err != nil {
		return nil, fmt.Errorf("kpcaeval: %w", err)
	}
	return CompareFit(ref, m)
}

// Similarity is Compare's Similarity alone.
func Similarity(m *learners.Model, x []float64, n, d int) (float64, error) {
	r, err := Compare(m, x, n, d)
	if err != nil {
		return 0, err
	}
	return r.Similarity, nil
}

// CompareFit compares m with an existing reference fit, so one expensive
// fit can score several models. The fit's kernel is used for the cross
// Grams; m must have ref.K components and dimension ref.D.
func CompareFit(ref *learners.BatchFit, m *learners.Model) (*Report, error) {
	if ref == nil || m == nil {
		return nil, errors.New("kpcaeval: nil reference or model")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("kpcaeval: %w", err)
	}
	p, d, k := m.Dims()
	if d != ref.D {
		return nil, fmt.Errorf("kpcaeval: %w: model dimension %d, reference %d", learners.ErrDimension, d, ref.D)
	}
	if k != ref.K {
		return nil, fmt.Errorf("kpcaeval: model has %d components, reference %d", k, ref.K)
	}
	n := ref.N
	z := make([]float64, 0, p*d)
	for _, row := range m.Points {
		z = append(z, row...)
	}
	a := mat.NewDense(p, k, nil)
	for j, row := range m.Coefficients {
		a.SetRow(j, row)
	}
	b, utw, wtw := crossProducts(ref, z, a, p)

	// (WᵀW)^-½ and (WᵀW)⁺ by eigendecomposition, dropping directions of W
	// that are numerically null.
	wInvSqrt, wPinv, err := invRoots(wtw)
	if err != nil {
		return nil, err
	}
	rep := &Report{N: n, K: k, EigRelErr: make([]float64, k), RefEigenvalues: append([]float64(nil), ref.EigenvaluesCov...)}
	if rep.Cosines, err = cosines(ref, utw, wInvSqrt, k); err != nil {
		return nil, err
	}
	for _, cs := range rep.Cosines {
		rep.Similarity += cs * cs
	}
	rep.Similarity /= float64(k)
	rep.eigErrors(ref, m)
	rep.ReconError = reconError(ref, b, wPinv, k)
	var captured float64
	for _, lam := range ref.Eigenvalues {
		captured += lam
	}
	rep.ReconErrorBatch = (ref.Trace - captured) / float64(n)
	return rep, nil
}

// crossProducts returns, for the model's directions W = Φ_Z A (points z,
// p of them, coefficients a), B (n×k, row r = Wᵀ(φ(xᵣ) − m)), UᵀW and
// WᵀW (k×k), U the reference's directions.
func crossProducts(ref *learners.BatchFit, z []float64, a *mat.Dense, p int) (b, utw, wtw *mat.Dense) {
	n, d := ref.N, ref.D
	_, k := a.Dims()

	// Why the centring sits on the X side only: the reference directions
	// are U = Φ̃C with Φ̃ the centred feature rows φ(xⱼ) − m, so
	// UᵀW = Cᵀ(H K(X,Z))A, where H K(X,Z) subtracts from each column of the
	// cross Gram its mean over the rows of X. The model's directions W = Φ_Z A
	// are used as they are: a learner that centres with its own running mean
	// may leave a component along m in W (its coefficient columns need not
	// sum to 0), and since the model projects onto W, such a component is a
	// real deviation from the centred reference and rightly lowers the
	// cosines. Its offsets only shift projections and play no part.
	kxz := ref.Kernel.Cross(nil, ref.X, n, z, p, d)
	for j := range p {
		var s float64
		for i := range n {
			s += kxz[i*p+j]
		}
		s /= float64(n)
		for i := range n {
			kxz[i*p+j] -= s
		}
	}
	b = new(mat.Dense) // n×k: row r is bᵣ = Wᵀ(φ(xᵣ) − m)
	b.Mul(mat.NewDense(n, p, kxz), a)
	c := mat.NewDense(n, k, append([]float64(nil), ref.Alpha...))
	utw = new(mat.Dense) // k×k
	utw.Mul(c.T(), b)
	wtw = new(mat.Dense) // k×k
	kzz := mat.NewDense(p, p, ref.Kernel.Gram(nil, z, p, d))
	var tmp mat.Dense
	tmp.Mul(kzz, a)
	wtw.Mul(a.T(), &tmp)
	return b, utw, wtw
}

// cosines returns the cosines of the principal angles between the
// reference's present components and the model's k directions, from UᵀW
// and (WᵀW)^-½.
func cosines(ref *learners.BatchFit, utw, wInvSqrt *mat.Dense, k int) ([]float64, error) {
	cos := make([]float64, k)
	// U has orthonormal columns for its Rank present components and zero
	// columns otherwise, so (UᵀU)^-½ selects the present rows.
	r := ref.Rank
	var mm mat.Dense
	mm.Mul(utw, wInvSqrt)
	if r > 0 {
		present := make([]int, 0, r)
		for i, lam := range ref.Eigenvalues {
			if lam > 0 {
				present = append(present, i)
			}
		}
		sub := mat.NewDense(len(present), k, nil)
		for row, i := range present {
			sub.SetRow(row, mat.Row(nil, i, &mm))
		}
		var svd mat.SVD
		if !svd.Factorize(sub, mat.SVDNone) {
			return nil, errors.New("kpcaeval: singular value decomposition failed")
		}
		for i, s := range svd.Values(nil) {
			cos[i] = math.Min(1, math.Max(0, s))
		}
	}
	return cos, nil
}

// eigErrors fills the relative eigenvalue errors of m against ref and the
// reference's relative gap after the k-th eigenvalue.
func (rep *Report) eigErrors(ref *learners.BatchFit, m *learners.Model) {
	k := rep.K
	for i := range k {
		want, got := ref.EigenvaluesCov[i], m.Eigenvalues[i]
		switch {
		case want != 0:
			rep.EigRelErr[i] = math.Abs(got-want) / want
		case got != 0:
			rep.EigRelErr[i] = math.Inf(1)
		}
	}
	if lk := ref.Eigenvalues[k-1]; lk > 0 {
		rep.Gap = (lk - ref.Next) / lk
	}
}

// reconError is the mean feature-space reconstruction error of the
// reference's rows by the model's directions: ‖φ(xᵣ) − m‖² − bᵣᵀ(WᵀW)⁺bᵣ,
// with ‖φ(xᵣ) − m‖² = K̃ᵣᵣ = k(xᵣ,xᵣ) − 2cᵣ + g.
func reconError(ref *learners.BatchFit, b, wPinv *mat.Dense, k int) float64 {
	n, d := ref.N, ref.D
	var sum float64
	bv := make([]float64, k)
	pb := mat.NewVecDense(k, nil)
	for row := range n {
		xr := ref.X[row*d : (row+1)*d]
		norm := ref.Kernel.Self(xr) - 2*ref.ColMeans[row] + ref.GrandMean
		mat.Row(bv, row, b)
		bvec := mat.NewVecDense(k, bv)
		pb.MulVec(wPinv, bvec)
		sum += norm - mat.Dot(bvec, pb)
	}
	return sum / float64(n)
}

// invRoots returns S^-½ and S⁺ of the symmetric positive semi-definite s,
// treating eigenvalues ≤ 1e-12·max as zero.
func invRoots(s *mat.Dense) (*mat.Dense, *mat.Dense, error) {
	k, _ := s.Dims()
	sym := mat.NewSymDense(k, nil)
	for i := range k {
		for j := i; j < k; j++ {
			sym.SetSym(i, j, 0.5*(s.At(i, j)+s.At(j, i)))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(sym, true) {
		return nil, nil, errors.New("kpcaeval: eigendecomposition of WᵀW failed")
	}
	vals := es.Values(nil)
	var v mat.Dense
	es.VectorsTo(&v)
	top := 0.0
	for _, x := range vals {
		top = math.Max(top, x)
	}
	if !(top > 0) {
		return nil, nil, errors.New("kpcaeval: the model's directions are all zero in feature space")
	}
	dh := make([]float64, k)
	di := make([]float64, k)
	for i, x := range vals {
		if x > 1e-12*top {
			dh[i] = 1 / math.Sqrt(x)
			di[i] = 1 / x
		}
	}
	build := func(diag []float64) *mat.Dense {
		var vd mat.Dense
		vd.Mul(&v, mat.NewDiagDense(k, diag))
		var out mat.Dense
		out.Mul(&vd, v.T())
		return &out
	}
	return build(dh), build(di), nil
}
