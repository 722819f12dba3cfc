package learnertest

import (
	"math"
	"math/rand/v2"
)

// Images returns n rows of a reproducible synthetic high-dimensional,
// image-like labelled stream (row-major n×d, labels 0…classes−1), for the
// large-budget and classifier evaluations where the repository has no
// high-dimensional data. Each row is a d-pixel "image" of a point on a
// smooth 10-dimensional latent manifold:
//
//	z = μ_c + 0.6·ε (ε standard normal in R¹⁰, μ_c one of `classes` latent
//	    class centres, standard normal, drawn once from seed),
//	x_j = σ(⟨W_j, z⟩ / √10 · 2) + 0.05·η_j (σ the logistic function, W a
//	    d×10 standard normal matrix drawn once from seed, η pixel noise),
//
// so the classes overlap, the pixels are in about [0, 1] like scaled grey
// levels, and the kernel spectrum decays gradually (no handful of
// components explains it). The rows are drawn with PCG(seed, stream):
// the same (seed, stream) gives the same rows, another stream a held-out
// sample of the same distribution.
func Images(n, d, classes int, seed, stream uint64) (x []float64, labels []int) {
	const latent = 10
	g := rand.New(rand.NewPCG(seed, 0x696d67)) // the fixed model: W and the centres
	w := make([]float64, d*latent)
	for i := range w {
		w[i] = g.NormFloat64()
	}
	mu := make([]float64, classes*latent)
	for i := range mu {
		mu[i] = g.NormFloat64()
	}
	r := rand.New(rand.NewPCG(seed, stream))
	x = make([]float64, n*d)
	labels = make([]int, n)
	z := make([]float64, latent)
	for i := range n {
		c := r.IntN(classes)
		labels[i] = c
		for j := range z {
			z[j] = mu[c*latent+j] + 0.6*r.NormFloat64()
		}
		row := x[i*d : (i+1)*d]
		for j := range row {
			var s float64
			for l, v := range z {
				s += w[j*latent+l] * v
			}
			row[j] = 1/(1+math.Exp(-2*s/math.Sqrt(latent))) + 0.05*r.NormFloat64()
		}
	}
	return x, labels
}
