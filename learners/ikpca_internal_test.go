package learners

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseKPCA returns the batch KPCA directions C = VΛ^-½ (n×k), the
// eigenvalues of K̃ and the (k+1)-th eigenvalue.
func denseKPCA(t *testing.T, kern Kernel, x []float64, n, d, k int) (*mat.Dense, []float64, float64) {
	t.Helper()
	K := kern.Gram(nil, x, n, d)
	rs := make([]float64, n)
	var g float64
	for i := range n {
		for j := range n {
			rs[i] += K[i*n+j]
		}
		g += rs[i]
		rs[i] /= float64(n)
	}
	g /= float64(n * n)
	kc := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			kc.SetSym(i, j, K[i*n+j]-rs[i]-rs[j]+g)
		}
	}
	var es mat.EigenSym
	if !es.Factorize(kc, true) {
		t.Fatal("eigen failed")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	C := mat.NewDense(n, k, nil)
	lam := make([]float64, k)
	for c := range k {
		src := n - 1 - c
		lam[c] = vals[src]
		for i := range n {
			C.Set(i, c, vecs.At(i, src)/math.Sqrt(vals[src]))
		}
	}
	return C, lam, vals[n-1-k]
}

// similarity is the mean cos² of the principal angles between the batch
// directions and the learner's published ones, from Transform outputs on
// the training rows (valid for learners whose directions are orthonormal).
func similarity(t *testing.T, l Learner, C *mat.Dense, x []float64, n, d int) float64 {
	t.Helper()
	k := l.Components()
	Y := mat.NewDense(n, k, nil)
	for i := range n {
		y, err := l.Transform(nil, x[i*d:(i+1)*d])
		if err != nil {
			t.Fatal(err)
		}
		Y.SetRow(i, y)
	}
	var M mat.Dense
	M.Mul(C.T(), Y)
	var svd mat.SVD
	svd.Factorize(&M, mat.SVDNone)
	var s float64
	for _, v := range svd.Values(nil) {
		s += math.Min(v, 1) * math.Min(v, 1)
	}
	return s / float64(k)
}

func TestIKPCASyntheticQuick(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n, d := 3000, 3
	x := make([]float64, n*d)
	for i := range n {
		th := rng.Float64() * 2 * math.Pi
		r := 1 + 0.1*rng.NormFloat64()
		x[i*d] = 1.5 * r * math.Cos(th)
		x[i*d+1] = 0.7 * r * math.Sin(th)
		x[i*d+2] = 0.3 * rng.NormFloat64()
	}
	kern := Kernel{Name: KernelRBF, Gamma: 0.5}
	k := 5
	C, lam, next := denseKPCA(t, kern, x, n, d, k)
	t.Logf("gap %.3f lam %v", (lam[k-1]-next)/lam[k-1], lam)
	for _, ev := range []string{"lli", "fifo", "contribution"} {
		l, err := NewIKPCA(Config{Dim: d, Components: k, Budget: 200, Kernel: kern, Eviction: ev})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
				t.Fatal(err)
			}
		}
		sum := l.Summary(nil)
		for i := range lam {
			lam[i] /= 1
		}
		t.Logf("%s: similarity %.5f stored %d eig %v explained %.3f version %d", ev, similarity(t, l, C, x, n, d), sum.Stored, sum.Eigenvalues, sum.ExplainedVariance, sum.BasisVersion)
	}
	for i := range lam {
		lam[i] /= float64(n)
	}
	t.Logf("batch eig/N %v", lam)
}
