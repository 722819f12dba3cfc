package learners_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// denseOp returns the matvec of the row-major symmetric n×n matrix a.
func denseOp(a []float64, n int) func(dst, v []float64) {
	return func(dst, v []float64) {
		for i := range n {
			var s float64
			for j, x := range a[i*n : (i+1)*n] {
				s += x * v[j]
			}
			dst[i] = s
		}
	}
}

// eigenTop returns the top k eigenpairs of a by gonum's dense solver.
func eigenTop(t *testing.T, a []float64, n, k int) ([]float64, *mat.Dense) {
	t.Helper()
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(n, slices.Clone(a)), true) {
		t.Fatal("EigenSym failed")
	}
	vals := es.Values(nil)
	var v mat.Dense
	es.VectorsTo(&v)
	top := make([]float64, k)
	vecs := mat.NewDense(n, k, nil)
	for i := range k {
		top[i] = vals[n-1-i]
		vecs.SetCol(i, mat.Col(nil, n-1-i, &v))
	}
	return top, vecs
}

// checkPairs compares Lanczos with the dense solver: values relative to the
// largest magnitude, vectors up to sign.
func checkPairs(t *testing.T, name string, a []float64, n, k int, valTol, vecTol float64) {
	t.Helper()
	vals, vecs, err := learners.LanczosTop(n, k, denseOp(a, n), learners.LanczosOptions{Seed: 3})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want, wantVecs := eigenTop(t, a, n, k)
	scale := math.Max(math.Abs(want[0]), math.Abs(want[k-1]))
	var worstVal, worstVec float64
	for i := range k {
		worstVal = math.Max(worstVal, math.Abs(vals[i]-want[i])/scale)
		var dp float64
		for r := range n {
			dp += vecs[r*k+i] * wantVecs.At(r, i)
		}
		sign := math.Copysign(1, dp)
		for r := range n {
			worstVec = math.Max(worstVec, math.Abs(sign*vecs[r*k+i]-wantVecs.At(r, i)))
		}
	}
	t.Logf("%s: n=%d k=%d max value error %.2g, max vector error %.2g", name, n, k, worstVal, worstVec)
	if worstVal > valTol {
		t.Errorf("%s: eigenvalues %v, want %v (error %.3g > %g)", name, vals, want, worstVal, valTol)
	}
	if vecTol > 0 && worstVec > vecTol {
		t.Errorf("%s: eigenvectors differ by %.3g > %g", name, worstVec, vecTol)
	}
}

func TestLanczosRandomSymmetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, k int }{{1, 1}, {5, 5}, {40, 3}, {120, 6}, {200, 10}} {
		a := make([]float64, c.n*c.n)
		for i := range c.n {
			for j := i; j < c.n; j++ {
				v := rng.NormFloat64()
				a[i*c.n+j], a[j*c.n+i] = v, v
			}
		}
		checkPairs(t, "random", a, c.n, c.k, 1e-12, 1e-9)
	}
}

// TestLanczosRepeated: a repeated top eigenvalue is only found through a
// restart after the Krylov space of the start vector became invariant.
func TestLanczosRepeated(t *testing.T) {
	const n = 30
	diag := make([]float64, n)
	for i := range diag {
		diag[i] = float64(n - i)
	}
	diag[1] = diag[0] // 30, 30, 28, 27, …
	// Rotate by a fixed orthogonal matrix so the problem is not trivial.
	rng := rand.New(rand.NewPCG(9, 9))
	g := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	var a mat.Dense
	a.Mul(&q, mat.NewDiagDense(n, diag))
	a.Mul(&a, q.T())
	data := make([]float64, n*n)
	for i := range n {
		for j := range n {
			data[i*n+j] = 0.5 * (a.At(i, j) + a.At(j, i))
		}
	}
	vals, _, err := learners.LanczosTop(n, 3, denseOp(data, n), learners.LanczosOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{30, 30, 28} {
		if math.Abs(vals[i]-want) > 1e-10 {
			t.Errorf("eigenvalue %d = %.15g, want %v (all %v)", i, vals[i], want, vals)
		}
	}
}

func TestLanczosCentredGram(t *testing.T) {
	const n, d = 300, 4
	x := make([]float64, 0, n*d)
	for i := range n {
		x = append(x, learnertest.Stream(make([]float64, d), 21, i)...)
	}
	kern := learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}
	k := kern.Gram(nil, x, n, d)
	col := make([]float64, n)
	var g float64
	for i := range n {
		for j := range n {
			col[j] += k[i*n+j] / n
		}
	}
	for _, c := range col {
		g += c / n
	}
	for i := range n {
		for j := range n {
			k[i*n+j] += g - col[i] - col[j]
		}
	}
	checkPairs(t, "centred rbf Gram", k, n, 6, 1e-12, 1e-9)
}

func TestLanczosDeterministicAndErrors(t *testing.T) {
	const n = 50
	a := make([]float64, n*n)
	for i := range n {
		a[i*n+i] = float64(i)
		if i > 0 {
			a[i*n+i-1], a[(i-1)*n+i] = 1, 1
		}
	}
	v1, x1, err1 := learners.LanczosTop(n, 4, denseOp(a, n), learners.LanczosOptions{Seed: 5})
	v2, x2, err2 := learners.LanczosTop(n, 4, denseOp(a, n), learners.LanczosOptions{Seed: 5})
	if err1 != nil || err2 != nil || !slices.Equal(v1, v2) || !slices.Equal(x1, x2) {
		t.Errorf("same seed gave different results (errors %v, %v)", err1, err2)
	}
	for _, c := range []struct {
		name string
		n, k int
		opt  learners.LanczosOptions
	}{
		{"k_zero", n, 0, learners.LanczosOptions{}},
		{"k_above_n", n, n + 1, learners.LanczosOptions{}},
		{"max_iter_below_k", n, 4, learners.LanczosOptions{MaxIter: 3}},
		{"no_convergence", n, 4, learners.LanczosOptions{MaxIter: 5, Tol: 1e-15}},
	} {
		if _, _, err := learners.LanczosTop(c.n, c.k, denseOp(a, n), c.opt); err == nil {
			t.Errorf("%s: got nil error", c.name)
		}
	}
}
