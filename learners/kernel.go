package learners

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Kernel names, with scikit-learn's definitions and parameter names.
const (
	KernelRBF       = "rbf"       // exp(−γ‖x−y‖²)
	KernelPoly      = "poly"      // (γ xᵀy + coef0)^degree
	KernelLinear    = "linear"    // xᵀy
	KernelSigmoid   = "sigmoid"   // tanh(γ xᵀy + coef0)
	KernelLaplacian = "laplacian" // exp(−γ‖x−y‖₁)
)

// Kernel is a positive (semi-)definite kernel with scikit-learn's parameter
// names. Gamma is required for rbf, poly, sigmoid and laplacian (Config
// fills 1/d when it is zero, as scikit-learn does); Degree defaults to 3
// for poly. The sigmoid kernel is not positive definite in general: use it
// with care.
type Kernel struct {
	Name   string  `yaml:"name"`
	Gamma  float64 `yaml:"gamma"`
	Coef0  float64 `yaml:"coef0"`
	Degree int     `yaml:"degree"`
}

// Validate reports an unknown kernel name or invalid parameters: a
// *fielderr.Error naming the field by its YAML name ("gamma"), matching
// ErrConfig with errors.Is.
func (k Kernel) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch k.Name {
	case KernelLinear:
	case KernelRBF, KernelLaplacian:
		if !(k.Gamma > 0) || !finite(k.Gamma) {
			return configErr("gamma", "%s needs gamma > 0, got %v", k.Name, k.Gamma)
		}
	case KernelPoly:
		if !(k.Gamma > 0) || !finite(k.Gamma) {
			return configErr("gamma", "poly needs gamma > 0, got %v", k.Gamma)
		}
		if k.Degree < 1 || k.Degree > 32 {
			return configErr("degree", "poly needs 1 ≤ degree ≤ 32, got %d", k.Degree)
		}
		if !finite(k.Coef0) {
			return configErr("coef0", "must be finite, got %v", k.Coef0)
		}
	case KernelSigmoid:
		if !(k.Gamma > 0) || !finite(k.Gamma) {
			return configErr("gamma", "sigmoid needs gamma > 0, got %v", k.Gamma)
		}
		if !finite(k.Coef0) {
			return configErr("coef0", "must be finite, got %v", k.Coef0)
		}
	case "":
		return configErr("name", "required (rbf, poly, linear, sigmoid or laplacian)")
	default:
		return configErr("name", "unknown kernel %q (want rbf, poly, linear, sigmoid or laplacian)", k.Name)
	}
	return nil
}

// withDefaults fills gamma = 1/d and degree = 3 where they are zero.
func (k Kernel) withDefaults(d int) Kernel {
	if k.Gamma == 0 && k.Name != KernelLinear && d > 0 {
		k.Gamma = 1 / float64(d)
	}
	if k.Degree == 0 && k.Name == KernelPoly {
		k.Degree = 3
	}
	return k
}

// Eval returns k(x, y). x and y must have the same length.
func (k Kernel) Eval(x, y []float64) float64 {
	switch k.Name {
	case KernelRBF:
		var s float64
		for i, xi := range x {
			d := xi - y[i]
			s += d * d
		}
		return math.Exp(-k.Gamma * s)
	case KernelLaplacian:
		var s float64
		for i, xi := range x {
			s += math.Abs(xi - y[i])
		}
		return math.Exp(-k.Gamma * s)
	}
	return k.fromDot(dot(x, y))
}

// fromDot maps an inner product xᵀy to the kernel value for the dot-product kernels.
func (k Kernel) fromDot(p float64) float64 {
	switch k.Name {
	case KernelLinear:
		return p
	case KernelPoly:
		return ipow(k.Gamma*p+k.Coef0, k.Degree)
	case KernelSigmoid:
		return math.Tanh(k.Gamma*p + k.Coef0)
	}
	panic("learners: fromDot on kernel " + k.Name)
}

// Self returns k(x, x).
func (k Kernel) Self(x []float64) float64 {
	switch k.Name {
	case KernelRBF, KernelLaplacian:
		return 1
	}
	return k.fromDot(dot(x, x))
}

func ipow(b float64, n int) float64 {
	r := 1.0
	for n > 0 {
		if n&1 == 1 {
			r *= b
		}
		b *= b
		n >>= 1
	}
	return r
}

// kernelRows evaluates kernel rows k(x, P) against a set of stored points P
// (row-major, capacity cap×d) with their squared norms cached, which is
// the hot path of every learner. It allocates only at construction.
//
// For rbf a row costs one matrix–vector product and m exps; for the
// dot-product kernels one product and m scalar maps; laplacian needs the
// O(md) L1 distances directly.
type kernelRows struct {
	kern   Kernel
	d, cap int
	m      int       // number of stored points
	pts    []float64 // cap×d row-major
	norms  []float64 // cap: ‖pⱼ‖²
}

// newKernelRows returns an empty set of capacity cap for points of dimension d.
func newKernelRows(kern Kernel, d, cap int) *kernelRows {
	return &kernelRows{kern: kern, d: d, cap: cap, pts: make([]float64, cap*d), norms: make([]float64, cap)}
}

// Len is the number of stored points.
func (r *kernelRows) Len() int { return r.m }

// Point returns stored point j (a view; do not modify).
func (r *kernelRows) Point(j int) []float64 { return r.pts[j*r.d : (j+1)*r.d] }

// Data returns the first Len() points, row-major (a view; do not modify).
func (r *kernelRows) Data() []float64 { return r.pts[:r.m*r.d] }

// Append copies x in as point number Len(). It panics when full.
func (r *kernelRows) Append(x []float64) {
	if r.m == r.cap {
		panic("learners: kernelRows.Append on a full set")
	}
	copy(r.pts[r.m*r.d:], x)
	r.norms[r.m] = dot(x, x)
	r.m++
}

// Set overwrites point j with x.
func (r *kernelRows) Set(j int, x []float64) {
	copy(r.pts[j*r.d:(j+1)*r.d], x)
	r.norms[j] = dot(x, x)
}

// Remove deletes point j, shifting the later points down by one.
func (r *kernelRows) Remove(j int) {
	copy(r.pts[j*r.d:], r.pts[(j+1)*r.d:r.m*r.d])
	copy(r.norms[j:], r.norms[j+1:r.m])
	r.m--
}

// Reset empties the set and loads p points from data (row-major p×d).
func (r *kernelRows) Reset(data []float64, p int) {
	r.m = 0
	for j := range p {
		r.Append(data[j*r.d : (j+1)*r.d])
	}
}

// Row writes k(x, pⱼ) for every stored point into dst[:Len()] and returns
// that slice. xx must be ‖x‖² (used by rbf only; pass dot(x,x)).
func (r *kernelRows) Row(dst, x []float64, xx float64) []float64 {
	m := r.m
	dst = dst[:m]
	if m == 0 {
		return dst
	}
	if r.kern.Name == KernelLaplacian {
		g := r.kern.Gamma
		for j := range m {
			p := r.pts[j*r.d : (j+1)*r.d]
			var s float64
			for i, xi := range x {
				s += math.Abs(xi - p[i])
			}
			dst[j] = math.Exp(-g * s)
		}
		return dst
	}
	// dst = P·x
	blas64.Implementation().Dgemv(blas.NoTrans, m, r.d, 1, r.pts, r.d, x, 1, 0, dst, 1)
	switch r.kern.Name {
	case KernelRBF:
		g := r.kern.Gamma
		for j, p := range dst {
			s := xx + r.norms[j] - 2*p
			if s < 0 {
				s = 0
			}
			dst[j] = math.Exp(-g * s)
		}
	default:
		for j, p := range dst {
			dst[j] = r.kern.fromDot(p)
		}
	}
	return dst
}

// norm2 returns ‖x‖², the second argument Row expects.
func norm2(x []float64) float64 { return dot(x, x) }

// Gram writes the n×n kernel matrix of the row-major points x (n×d) into
// dst (length n·n, row-major, allocated when nil) and returns it.
func (k Kernel) Gram(dst []float64, x []float64, n, d int) []float64 {
	if dst == nil {
		dst = make([]float64, n*n)
	}
	for i := range n {
		xi := x[i*d : (i+1)*d]
		for j := i; j < n; j++ {
			v := k.Eval(xi, x[j*d:(j+1)*d])
			dst[i*n+j] = v
			dst[j*n+i] = v
		}
	}
	return dst
}

// Cross writes the n×m kernel matrix K[i][j] = k(xᵢ, yⱼ) of row-major x
// (n×d) and y (m×d) into dst (allocated when nil) and returns it.
func (k Kernel) Cross(dst []float64, x []float64, n int, y []float64, m, d int) []float64 {
	if dst == nil {
		dst = make([]float64, n*m)
	}
	for i := range n {
		xi := x[i*d : (i+1)*d]
		for j := range m {
			dst[i*m+j] = k.Eval(xi, y[j*d:(j+1)*d])
		}
	}
	return dst
}
