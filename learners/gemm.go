package learners

import (
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
