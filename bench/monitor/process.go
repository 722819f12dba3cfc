package monitorbench

import (
	"math"
	"math/rand/v2"
)

// Fault is a disturbance of the process from sample Onset of a run on.
type Fault struct {
	// Name is the fault's label in the tables.
	Name string
	// Apply changes the sample x of index i ≥ onset (i − onset samples after it).
	Apply func(x []float64, after int)
}

// Faults are the disturbances of the benchmark. The first two are Lee et
// al.'s (2004) on the same process: a step of x₂ by −0.4 and a ramp of x₁
// by +0.01 per sample; "drift" is a ramp ten times slower on x₃, the kind
// a learner that learns everything absorbs as it comes; "step-x3" is a
// larger step (+1 on x₃) that every method should see.
var Faults = []Fault{
	{"step-x2", func(x []float64, after int) { x[1] -= 0.4 }},
	{"ramp-x1", func(x []float64, after int) { x[0] += 0.01 * float64(after+1) }},
	{"drift-x3", func(x []float64, after int) { x[2] += 0.001 * float64(after+1) }},
	{"step-x3", func(x []float64, after int) { x[2] += 1 }},
}

// Process draws samples of the nonlinear process of Dong & McAvoy (1996),
// used for kernel PCA monitoring by Lee et al. (2004):
//
//	x₁ = t + e₁,  x₂ = t² − 3t + e₂,  x₃ = −t³ + 3t² + e₃
//
// with eᵢ ~ N(0, 0.01) (standard deviation 0.1) and t uniform on
// [0.01 + s, 2 + s], where the shift s moves by Drift per sample: slow
// normal drift of the operating range.
type Process struct {
	rng   *rand.Rand
	Drift float64
	shift float64
}

// NewProcess returns a process seeded by seed.
func NewProcess(seed uint64, drift float64) *Process {
	return &Process{rng: rand.New(rand.NewPCG(seed, 0x6d6f6e)), Drift: drift}
}

// Next writes the next sample into x (length 3).
func (p *Process) Next(x []float64) {
	t := 0.01 + p.shift + 1.99*p.rng.Float64()
	p.shift += p.Drift
	x[0] = t + 0.1*p.rng.NormFloat64()
	x[1] = t*t - 3*t + 0.1*p.rng.NormFloat64()
	x[2] = -t*t*t + 3*t*t + 0.1*p.rng.NormFloat64()
}

// Run draws n samples (n×3, row-major) with fault f from onset on (nil:
// normal).
func (p *Process) Run(n, onset int, f *Fault) []float64 {
	out := make([]float64, 3*n)
	for i := range n {
		x := out[3*i : 3*i+3]
		p.Next(x)
		if f != nil && i >= onset {
			f.Apply(x, i-onset)
		}
	}
	return out
}

func sqrt(v float64) float64 { return math.Sqrt(v) }
