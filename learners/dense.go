// Dense helpers shared by the learners: row-major matrices as []float64
// with an explicit leading dimension, in the spirit of BLAS (and of gonum's
// dst-first conventions where a result is written). Only packRows
// allocates (it copies a block out for a State).
package learners

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// serialDgemm computes c = alpha·op(a)·op(b) + beta·c (m×n, stride ldc)
// for row-major a and b, in blocks of at most 64 rows and 192 columns of
// c, small enough that gonum's Dgemm stays serial (it goes parallel from
// four 64×64 blocks of c): a learner never starts goroutines.
func serialDgemm(ta, tb blas.Transpose, m, n, kk int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	const rows, cols = 64, 3 * 64
	impl := blas64.Implementation()
	for i := 0; i < m; i += rows {
		r := min(rows, m-i)
		var ai []float64
		if ta == blas.Trans {
			ai = a[i:] // op(a) = aᵀ: its rows i… are the columns i… of the storage
		} else {
			ai = a[i*lda:]
		}
		for j := 0; j < n; j += cols {
			bj := b[j:]
			if tb == blas.Trans {
				bj = b[j*ldb:]
			}
			impl.Dgemm(ta, tb, r, min(cols, n-j), kk, alpha, ai, lda, bj, ldb, beta, c[i*ldc+j:], ldc)
		}
	}
}

// rotateRowsChain applies the rotations (gc[i], gs[i]), i = from…to−1, in
// order, to columns (i, i+1) of the n ≤ 4 rows r0… of a (stride w): the
// rows' chains are independent, so they are interleaved. Rotation i only
// touches row r when r ≥ i (the caller's bound): rows take the rotations
// i < min(to, r+1).
func rotateRowsChain(a []float64, w, r0, n, from, to int, gc, gs []float64) {
	if n == 4 {
		r0w := a[r0*w : r0*w+w]
		r1w := a[(r0+1)*w : (r0+1)*w+w]
		r2w := a[(r0+2)*w : (r0+2)*w+w]
		r3w := a[(r0+3)*w : (r0+3)*w+w]
		common := min(to, r0+1) // rotations every one of the four rows takes
		if from < common {
			x0, x1, x2, x3 := r0w[from], r1w[from], r2w[from], r3w[from]
			for i := from; i < common; i++ {
				c, s := gc[i], gs[i]
				y0, y1, y2, y3 := r0w[i+1], r1w[i+1], r2w[i+1], r3w[i+1]
				r0w[i], r1w[i], r2w[i], r3w[i] = c*x0+s*y0, c*x1+s*y1, c*x2+s*y2, c*x3+s*y3
				x0, x1, x2, x3 = -s*x0+c*y0, -s*x1+c*y1, -s*x2+c*y2, -s*x3+c*y3
			}
			r0w[common], r1w[common], r2w[common], r3w[common] = x0, x1, x2, x3
		}
		from = max(from, common)
	}
	for q := range n {
		r := r0 + q
		row := a[r*w : r*w+w]
		for i := from; i < min(to, r+1); i++ {
			rotate(row, i, i+1, gc[i], gs[i])
		}
	}
}

// rotate applies the plane rotation (c, s) to v[i], v[j]:
// v[i], v[j] = c·v[i] + s·v[j], −s·v[i] + c·v[j].
func rotate(v []float64, i, j int, c, s float64) {
	vi, vj := v[i], v[j]
	v[i] = c*vi + s*vj
	v[j] = -s*vi + c*vj
}

// rotateRows applies the plane rotation (c, s) to rows i and i+1 of the
// row-major matrix a with row stride w (the whole stride is rotated).
func rotateRows(a []float64, w, i int, c, s float64) {
	rotatePair(a[i*w:(i+1)*w], a[(i+1)*w:(i+2)*w], c, s)
}

// rotatePair applies the plane rotation (c, s) to the vectors x and y
// element by element: x, y = c·x + s·y, −s·x + c·y.
func rotatePair(x, y []float64, c, s float64) {
	y = y[:len(x)]
	for i, vx := range x {
		vy := y[i]
		x[i] = c*vx + s*vy
		y[i] = -s*vx + c*vy
	}
}

// removeIndex deletes row and column j from the m×m matrix a (stride b).
func removeIndex(a []float64, b, m, j int) {
	for r := range m {
		row := a[r*b : r*b+m]
		copy(row[j:], row[j+1:])
		row[m-1] = 0
	}
	copy(a[j*b:], a[(j+1)*b:m*b])
	clear(a[(m-1)*b : (m-1)*b+m])
}

// removeVecRow deletes row j of the m×w row-major matrix a.
func removeVecRow(a []float64, w, m, j int) {
	copy(a[j*w:], a[(j+1)*w:m*w])
	clear(a[(m-1)*w : m*w])
}

// transpose writes the r×c matrix a (stride lda) transposed into dst
// (c×r, stride ldd).
func transpose(dst []float64, ldd int, a []float64, lda, r, c int) {
	for i := range r {
		row := a[i*lda : i*lda+c]
		for j, v := range row {
			dst[j*ldd+i] = v
		}
	}
}

// axpy computes y += α·x.
func axpy(alpha float64, x, y []float64) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

// trsvLower solves L·x = x in place for the m×m lower triangle of l
// (stride ld): blocks of trsvBlock rows, the off-diagonal panels by
// matrix–vector products (which run at several times the rate of a
// triangular solve's dependent dot products), the diagonal blocks by Dtrsv.
func trsvLower(m int, l []float64, ld int, x []float64) {
	impl := blas64.Implementation()
	for i0 := 0; i0 < m; i0 += trsvBlock {
		n := min(trsvBlock, m-i0)
		if i0 > 0 {
			impl.Dgemv(blas.NoTrans, n, i0, -1, l[i0*ld:], ld, x[:i0], 1, 1, x[i0:i0+n], 1)
		}
		impl.Dtrsv(blas.Lower, blas.NoTrans, blas.NonUnit, n, l[i0*ld+i0:], ld, x[i0:i0+n], 1)
	}
}

// trsvLowerT solves Lᵀ·x = x in place (backward, blocked as trsvLower).
func trsvLowerT(m int, l []float64, ld int, x []float64) {
	impl := blas64.Implementation()
	for i1 := m; i1 > 0; i1 -= trsvBlock {
		i0 := max(0, i1-trsvBlock)
		if i1 < m {
			impl.Dgemv(blas.Trans, m-i1, i1-i0, -1, l[i1*ld+i0:], ld, x[i1:m], 1, 1, x[i0:i1], 1)
		}
		impl.Dtrsv(blas.Lower, blas.Trans, blas.NonUnit, i1-i0, l[i0*ld+i0:], ld, x[i0:i1], 1)
	}
}

// scal multiplies the m×m matrix a (stride b) by s.
func scal(a []float64, b, m int, s float64) {
	for i := range m {
		row := a[i*b : i*b+m]
		for j := range row {
			row[j] *= s
		}
	}
}

// finite reports whether v is neither NaN nor ±Inf.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// finiteAll reports whether every value of v is finite.
func finiteAll(v []float64) bool {
	for _, x := range v {
		if !finite(x) {
			return false
		}
	}
	return true
}

// dot returns xᵀy (y at least as long as x).
func dot(x, y []float64) float64 {
	var s float64
	for i, xi := range x {
		s += xi * y[i]
	}
	return s
}

// symv writes A·v into dst for the row-major n×n matrix a.
func symv(dst, a []float64, n int, v []float64) {
	for i := range n {
		dst[i] = dot(a[i*n:(i+1)*n], v)
	}
}

// b2i is 1 for true, 0 for false (booleans in a State's Ints).
func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// centre subtracts the mean from v.
func centre(v []float64) {
	if len(v) == 0 {
		return
	}
	var s float64
	for _, x := range v {
		s += x
	}
	s /= float64(len(v))
	for i := range v {
		v[i] -= s
	}
}

// packRows returns the first cols entries of the first rows rows of a
// (row stride ld), packed.
func packRows(a []float64, rows, cols, ld int) []float64 {
	out := make([]float64, rows*cols)
	packInto(out, a, rows, cols, ld)
	return out
}

// packInto is packRows into dst (length rows·cols).
func packInto(dst, a []float64, rows, cols, ld int) {
	for r := range rows {
		copy(dst[r*cols:(r+1)*cols], a[r*ld:r*ld+cols])
	}
}

// splitmixUniform advances the splitmix64 state *s (Steele, Lea and Flood
// 2014: one uint64 of state, which the ikpca and window states carry as
// their "rng") and returns a value in [−1, 1). The kha learner and the
// Lanczos solver draw their Gaussian start vectors from math/rand/v2's PCG
// instead: they keep no generator state, and moving them to this one would
// change their results and the published figures for no gain.
func splitmixUniform(s *uint64) float64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/(1<<52) - 1
}

// dualWeights writes α = L⁻ᵀw for each of the n rows of w (row-major,
// stride b, first m entries used) into dst (n×m, row-major; nil is
// allocated, another length panics), for the m×m lower triangle L (stride
// b): weights on whitened coordinates z = L⁻¹k_D(x) as weights on the
// kernel row, wᵀz = αᵀk_D(x).
func dualWeights(dst, w []float64, n, m int, L []float64, b int) []float64 {
	if dst == nil {
		dst = make([]float64, n*m)
	}
	if len(dst) != n*m {
		panic(fmt.Sprintf("learners: dst has length %d, want %d", len(dst), n*m))
	}
	for r := range n {
		a := dst[r*m : (r+1)*m]
		copy(a, w[r*b:r*b+m])
		trsvLowerT(m, L, b, a)
	}
	return dst
}
