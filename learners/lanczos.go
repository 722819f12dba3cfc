package learners

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// lanczosOptions tunes lanczosTop. The zero value is the default.
type lanczosOptions struct {
	// Seed seeds the start vector (and restart vectors), so results are
	// deterministic.
	Seed uint64
	// Tol is the convergence threshold on the residual estimate
	// ‖A yᵢ − θᵢ yᵢ‖ ≤ Tol·|θ₁| of each wanted Ritz pair. Default 1e-12.
	Tol float64
	// MaxIter caps the dimension of the Krylov space. Default n (then the
	// result is exact up to round-off).
	MaxIter int
}

// lanczosTop returns the k algebraically largest eigenvalues of the
// symmetric n×n operator apply (apply(dst, v) writes A·v into dst, both of
// length n; it must not keep either), descending, and their unit
// eigenvectors as a row-major n×k matrix (column i belongs to value i).
//
// It runs the Lanczos recurrence with full reorthogonalisation (two
// classical Gram–Schmidt passes per step) and checks the Ritz pairs of the
// tridiagonal every few steps. When the Krylov space becomes invariant
// before the wanted pairs converge, it restarts from a fresh seeded random
// vector orthogonal to the basis, so multiple eigenvalues are found as long
// as the restarts reach them. Cost: one apply and O(n·m) work per step for a
// Krylov dimension m; memory n·m. An error means bad arguments or no
// convergence within MaxIter steps.
//
// It stays one function (about 125 lines, issue 34): it is a numerical
// kernel whose recurrence, reorthogonalisation, convergence check and
// restart share the Krylov basis, the tridiagonal's α and β and the step
// counter, and read as the textbook algorithm in one place; split, each
// part would take most of that state as arguments.
func lanczosTop(n, k int, apply func(dst, v []float64), opt lanczosOptions) (vals, vecs []float64, err error) {
	if n < 1 || k < 1 || k > n {
		return nil, nil, fmt.Errorf("learners: lanczos: need 1 ≤ k ≤ n, got n=%d k=%d", n, k)
	}
	tol := opt.Tol
	if tol <= 0 {
		tol = 1e-12
	}
	maxIter := opt.MaxIter
	if maxIter <= 0 || maxIter > n {
		maxIter = n
	}
	if maxIter < k {
		return nil, nil, fmt.Errorf("learners: lanczos: max iterations %d below k=%d", maxIter, k)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x6c616e637a6f73))

	var (
		q     [][]float64 // orthonormal Lanczos vectors
		alpha []float64   // diagonal of T
		beta  []float64   // off-diagonal: beta[j] couples q[j] and q[j+1]
		w     = make([]float64, n)
		// prevTop are the top k Ritz values when the Krylov space last
		// became invariant (nil before).
		prevTop []float64
	)
	next, ok := randomOrthogonal(rng, q, n)
	if !ok {
		return nil, nil, errors.New("learners: lanczos: could not draw a start vector")
	}
	for m := 1; ; m++ {
		qj := next
		q = append(q, qj)
		apply(w, qj)
		a := dot(qj, w)
		alpha = append(alpha, a)
		// Three-term recurrence, then full reorthogonalisation twice.
		for i, v := range qj {
			w[i] -= a * v
		}
		if m > 1 && beta[m-2] != 0 {
			prev, b := q[m-2], beta[m-2]
			for i, v := range prev {
				w[i] -= b * v
			}
		}
		for range 2 {
			for _, qi := range q {
				c := dot(qi, w)
				for i, v := range qi {
					w[i] -= c * v
				}
			}
		}
		b := math.Sqrt(dot(w, w))
		scale := 0.0
		for _, v := range alpha {
			scale = max(scale, math.Abs(v))
		}
		for _, v := range beta {
			scale = max(scale, math.Abs(v))
		}
		invariant := b <= 1e-13*max(scale, math.SmallestNonzeroFloat64)
		if invariant {
			b = 0
		}
		done := m == maxIter
		if m >= k && (done || invariant || (m-k)%4 == 0) {
			theta, s, ok := tridiagEigen(alpha, beta)
			if !ok {
				return nil, nil, errors.New("learners: lanczos: tridiagonal eigendecomposition failed")
			}
			// theta ascending; the wanted pairs are the last k.
			top := math.Abs(theta[m-1])
			conv := true
			for i := m - k; i < m; i++ {
				if b*math.Abs(s.At(m-1, i)) > tol*max(top, math.SmallestNonzeroFloat64) {
					conv = false
					break
				}
			}
			// An invariant subspace that is not the whole space may miss
			// eigenvalues (a repeated eigenvalue appears once per Krylov
			// block): accept it once a restart from a fresh random vector
			// has left the top k Ritz values unchanged, or once the space
			// is exhausted. A rank-deficient operator (a poly kernel's
			// centred Gram has rank ≤ its feature count) so stops one
			// step after its range is spanned instead of walking the
			// whole null space.
			if conv && invariant && m < n {
				cur := ritzValues(theta, k)
				same := prevTop != nil
				for i := range cur {
					if same && math.Abs(cur[i]-prevTop[i]) > tol*max(top, math.SmallestNonzeroFloat64) {
						same = false
					}
				}
				if same {
					return cur, ritzVectors(q, s, k, n), nil
				}
				prevTop = cur
			}
			if (conv && !invariant) || m == n {
				return ritzValues(theta, k), ritzVectors(q, s, k, n), nil
			}
			if done {
				return nil, nil, fmt.Errorf("learners: lanczos: no convergence in %d steps", maxIter)
			}
		}
		if done {
			return nil, nil, fmt.Errorf("learners: lanczos: no convergence in %d steps", maxIter)
		}
		if invariant {
			next, ok = randomOrthogonal(rng, q, n)
			if !ok {
				return nil, nil, errors.New("learners: lanczos: could not extend the Krylov basis")
			}
			beta = append(beta, 0)
			continue
		}
		beta = append(beta, b)
		next = make([]float64, n)
		for i, v := range w {
			next[i] = v / b
		}
	}
}

// randomOrthogonal returns a seeded random unit vector orthogonal to q.
func randomOrthogonal(rng *rand.Rand, q [][]float64, n int) ([]float64, bool) {
	v := make([]float64, n)
	for try := 0; try < 5; try++ {
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		for range 2 {
			for _, qi := range q {
				c := dot(qi, v)
				for i, x := range qi {
					v[i] -= c * x
				}
			}
		}
		nv := math.Sqrt(dot(v, v))
		if nv > 1e-8*math.Sqrt(float64(n)) {
			for i := range v {
				v[i] /= nv
			}
			return v, true
		}
	}
	return nil, false
}

// tridiagEigen diagonalises the m×m symmetric tridiagonal T (diagonal a,
// off-diagonal b[:m-1]); values ascending.
func tridiagEigen(a, b []float64) ([]float64, *mat.Dense, bool) {
	m := len(a)
	t := mat.NewSymDense(m, nil)
	for i := range m {
		t.SetSym(i, i, a[i])
		if i+1 < m {
			t.SetSym(i, i+1, b[i])
		}
	}
	var es mat.EigenSym
	if !es.Factorize(t, true) {
		return nil, nil, false
	}
	var s mat.Dense
	es.VectorsTo(&s)
	return es.Values(nil), &s, true
}

// ritzValues returns the top k Ritz values, descending.
func ritzValues(theta []float64, k int) []float64 {
	m := len(theta)
	vals := make([]float64, k)
	for i := range k {
		vals[i] = theta[m-1-i]
	}
	return vals
}

// ritzVectors returns Q·S for the top k Ritz vectors as a row-major n×k
// matrix, each column renormalised.
func ritzVectors(q [][]float64, s *mat.Dense, k, n int) []float64 {
	m := len(q)
	vecs := make([]float64, n*k)
	for i := range k {
		col := m - 1 - i
		for j, qj := range q {
			c := s.At(j, col)
			if c == 0 {
				continue
			}
			for r, v := range qj {
				vecs[r*k+i] += c * v
			}
		}
		var nv float64
		for r := range n {
			nv += vecs[r*k+i] * vecs[r*k+i]
		}
		nv = math.Sqrt(nv)
		for r := range n {
			vecs[r*k+i] /= nv
		}
	}
	return vecs
}
