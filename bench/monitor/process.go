package monitorbench

import (
	"math"
	"math/rand/v2"
)

// Fault is a disturbance of the process from sample Onset of a run on.
type Fault struct {
	// Name is the fault's label in the tables.
	Name string
	// Var is the variable the fault hits (its index).
	Var int
	// Apply changes the sample x of index i ≥ onset (i − onset samples after it).
	Apply func(x []float64, after int)
}

// Faults are the disturbances of the benchmark. The first two are Lee et
// al.'s (2004) on the same process: a step of x₂ by −0.4 and a ramp of x₁
// by +0.01 per sample; "drift" is a ramp ten times slower on x₃, the kind
// a learner that learns everything absorbs as it comes; "step-x3" is a
// larger step (+1 on x₃) that every method should see.
var Faults = []Fault{
	{"step-x2", 1, func(x []float64, after int) { x[1] -= 0.4 }},
	{"ramp-x1", 0, func(x []float64, after int) { x[0] += 0.01 * float64(after+1) }},
	{"drift-x3", 2, func(x []float64, after int) { x[2] += 0.001 * float64(after+1) }},
	{"step-x3", 2, func(x []float64, after int) { x[2] += 1 }},
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
	// Phi makes t autocorrelated: t = 0.01 + s + 1.99·Φ(a) with a an AR(1)
	// of coefficient Phi and unit variance (0: independent uniform t, the
	// same marginal either way).
	Phi float64
	// Wander is the amplitude of a slowly wandering operating point: t is
	// shifted by Wander·sin(2π·i/WanderPeriod) at sample i.
	Wander       float64
	WanderPeriod int
	a            float64
	i            int
	started      bool
}

// NewProcess returns a process seeded by seed.
func NewProcess(seed uint64, drift float64) *Process {
	return &Process{rng: rand.New(rand.NewPCG(seed, 0x6d6f6e)), Drift: drift}
}

// Next writes the next sample into x (length 3).
func (p *Process) Next(x []float64) {
	t := p.latent()
	x[0] = t + 0.1*p.rng.NormFloat64()
	x[1] = t*t - 3*t + 0.1*p.rng.NormFloat64()
	x[2] = -t*t*t + 3*t*t + 0.1*p.rng.NormFloat64()
}

// latent draws the next t.
func (p *Process) latent() float64 {
	u := p.rng.Float64()
	if p.Phi > 0 {
		if !p.started {
			p.a, p.started = p.rng.NormFloat64(), true
		} else {
			p.a = p.Phi*p.a + math.Sqrt(1-p.Phi*p.Phi)*p.rng.NormFloat64()
		}
		u = 0.5 * math.Erfc(-p.a/math.Sqrt2)
	}
	t := 0.01 + p.shift + 1.99*u
	if p.Wander != 0 {
		t += p.Wander * math.Sin(2*math.Pi*float64(p.i)/float64(p.WanderPeriod))
	}
	p.shift += p.Drift
	p.i++
	return t
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

// WideDim is the number of sensors of Wide.
const WideDim = 20

// Wide is a plant of WideDim sensors driven by three latent variables: t
// as in Process (uniform on [0.01, 2], optionally autocorrelated or
// wandering) and two standard normal ones, u and v. Sensor j reads
//
//	xⱼ = aⱼ·t + bⱼ·(t² − 3t) + cⱼ·(−t³ + 3t²)/2 + gⱼ·u + hⱼ·v + eⱼ
//
// with coefficients drawn once (seed 20) uniform on [−1, 1] and eⱼ ~ N(0,
// 0.01): a nonlinear process where a fault in one sensor among many
// barely moves an RBF kernel with γ = 1/d (issue 31), while the others'
// readings predict it.
type Wide struct {
	t    *Process
	rng  *rand.Rand
	coef [WideDim][5]float64
}

// NewWide returns the plant seeded by seed; phi and wander as in Process.
func NewWide(seed uint64, phi, wander float64, period int) *Wide {
	w := &Wide{t: NewProcess(seed, 0), rng: rand.New(rand.NewPCG(seed, 0x77))}
	w.t.Phi, w.t.Wander, w.t.WanderPeriod = phi, wander, period
	c := rand.New(rand.NewPCG(20, 20))
	for j := range w.coef {
		for k := range w.coef[j] {
			w.coef[j][k] = 2*c.Float64() - 1
		}
	}
	return w
}

// Next writes the next sample into x (length WideDim).
func (w *Wide) Next(x []float64) {
	t := w.t.latent()
	u, v := w.rng.NormFloat64(), w.rng.NormFloat64()
	f := [5]float64{t, t*t - 3*t, (-t*t*t + 3*t*t) / 2, u, v}
	for j := range x {
		y := 0.1 * w.rng.NormFloat64()
		for k, c := range w.coef[j] {
			y += c * f[k]
		}
		x[j] = y
	}
}

// OneSensor is the sensor of Wide that the single-variable faults hit.
const OneSensor = 7

// WideFaults are the single-variable faults of Wide (issue 31): a step of
// sensor OneSensor by 0.5 (five times its noise, a small fraction of its
// range) and a drift of it by 0.001 per sample.
var WideFaults = []Fault{
	{"step-one", OneSensor, func(x []float64, after int) { x[OneSensor] += 0.5 }},
	{"drift-one", OneSensor, func(x []float64, after int) { x[OneSensor] += 0.001 * float64(after+1) }},
}

// WidePlant is Wide as a Plant, its t autocorrelated by phi.
func WidePlant(phi float64) *Plant {
	return &Plant{Name: "wide", Dim: WideDim, Faults: WideFaults, New: func(seed uint64, start int) func([]float64) {
		w := NewWide(seed, phi, 0, 1)
		w.t.i = start
		return w.Next
	}}
}

// DongMcAvoy is Process as a Plant with Faults: t autocorrelated by phi,
// its operating point wandering by wander over period samples.
func DongMcAvoy(phi, wander float64, period int) *Plant {
	return &Plant{Name: "dong-mcavoy", Dim: 3, Faults: Faults, New: func(seed uint64, start int) func([]float64) {
		p := shifted(seed, 0, start)
		p.Phi, p.Wander, p.WanderPeriod = phi, wander, period
		return p.Next
	}}
}
