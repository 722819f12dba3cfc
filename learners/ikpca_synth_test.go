package learners

import (
	"math"
	"math/rand/v2"
	"testing"
)

// synth64 returns n rows of the peers' synth64 recipe (bench/peers/peer.py)
// with Go's generator: a 4-dimensional Gaussian latent u, x = tanh(u·W₁)·W₂
// + 0.1·noise with W₁ 4×16 and W₂ 16×64 Gaussian (W₂ scaled by 1/4), every
// column standardised. Row-major n×64.
func synth64(seed uint64, n int) []float64 {
	const d, h, r = 64, 16, 4
	rng := rand.New(rand.NewPCG(seed, 64))
	u := make([]float64, n*r)
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	w1 := make([]float64, r*h)
	for i := range w1 {
		w1[i] = rng.NormFloat64()
	}
	w2 := make([]float64, h*d)
	for i := range w2 {
		w2[i] = rng.NormFloat64() / 4
	}
	x := make([]float64, n*d)
	t := make([]float64, h)
	for i := range n {
		for c := range h {
			var s float64
			for q := range r {
				s += u[i*r+q] * w1[q*h+c]
			}
			t[c] = math.Tanh(s)
		}
		for c := range d {
			var s float64
			for q := range h {
				s += t[q] * w2[q*d+c]
			}
			x[i*d+c] = s + 0.1*rng.NormFloat64()
		}
	}
	for c := range d {
		var mean, sq float64
		for i := range n {
			mean += x[i*d+c]
		}
		mean /= float64(n)
		for i := range n {
			v := x[i*d+c] - mean
			sq += v * v
		}
		sd := math.Sqrt(sq / float64(n))
		for i := range n {
			x[i*d+c] = (x[i*d+c] - mean) / sd
		}
	}
	return x
}

// BenchmarkIKPCASynth64 measures the steady-state Learn on the peers'
// synth64 recipe at their cell (B = 128, d = 64, k = 8, rbf γ = 1/64) after
// one pass over 10,000 rows, and reports the admission (swap) rate.
//
//	go test ./learners -run '^$' -bench IKPCASynth64 -benchmem
func BenchmarkIKPCASynth64(b *testing.B) {
	const n, d = 10000, 64
	x := synth64(64, n)
	l, err := NewIKPCA(Config{Dim: d, Components: 8, Budget: 128, Kernel: Kernel{Name: KernelRBF, Gamma: 1.0 / d}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if err := l.Learn(x[i*d : (i+1)*d]); err != nil {
			b.Fatal(err)
		}
	}
	clock := l.clock
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % n
		if err := l.Learn(x[j*d : (j+1)*d]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(l.clock-clock)/float64(b.N), "admits/op")
}
