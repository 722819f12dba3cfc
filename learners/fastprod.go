package learners

import (
	"math"
)

// Kernel–matrix products for the matrix-free batch solvers. A product
// writes K·v into dst for the n fitted rows' (uncentred) kernel matrix K;
// centring is applied by the caller (centredApply). None of them stores an
// n×n matrix.

// product is K·v for a fixed point set: apply(dst, v) writes it into dst
// (both length n; it must not keep either).
type product interface {
	apply(dst, v []float64)
}

// centredApply writes H K H v into dst, H = I − (1/n)11ᵀ, using tmp (length
// n) as scratch: the product of the centred Gram K̃ through one product of
// K. Centring the operator this way keeps an approximate product's error
// at ‖H E H‖ ≤ ‖E‖.
func centredApply(p product, dst, v, tmp []float64) {
	n := float64(len(v))
	var s float64
	for _, x := range v {
		s += x
	}
	s /= n
	for i, x := range v {
		tmp[i] = x - s
	}
	p.apply(dst, tmp)
	s = 0
	for _, x := range dst {
		s += x
	}
	s /= n
	for i := range dst {
		dst[i] -= s
	}
}

// blockedProduct is the exact matrix-free product: K·v one kernel row at a
// time, O(n²d) time and O(n) memory.
type blockedProduct struct {
	rows *kernelRows
	x    []float64
	n, d int
	row  []float64
}

func newBlockedProduct(kern Kernel, x []float64, n, d int) *blockedProduct {
	r := newKernelRows(kern, d, n)
	r.Reset(x, n)
	return &blockedProduct{rows: r, x: x, n: n, d: d, row: make([]float64, n)}
}

func (b *blockedProduct) apply(dst, v []float64) {
	d := b.d
	for i := range b.n {
		xi := b.x[i*d : (i+1)*d]
		dst[i] = dot(b.rows.Row(b.row, xi, b.rows.norms[i]), v)
	}
}

// polyFeatures is the explicit monomial feature map of a poly or linear
// kernel (Raykar and Duraiswami's compress operator):
//
//	(γ xᵀy + c₀)^p = Σ_{|a| ≤ p} w_a x^a y^a,
//	w_a = C(p, |a|) · c₀^(p−|a|) · γ^|a| · |a|!/a!,
//
// over the multi-indices a with a non-zero weight (all |a| ≤ p, or only
// |a| = p when c₀ = 0), so k(x, y) = φ(x)ᵀ W φ(y) with φ_a(x) = x^a and W =
// diag(w) exactly. The weights may be negative (c₀ < 0), which the product
// does not mind. The linear kernel is degree 1, γ = 1, c₀ = 0: φ(x) = x.
// Monomials are generated in graded order, each from its parent times one
// coordinate, so φ(x) costs one multiplication per feature.
type polyFeatures struct {
	d      int
	parent []int32 // parent[f]: the monomial this one extends (−1 for 1)
	vr     []int32 // vr[f]: the coordinate it multiplies in
	keep   []int32 // the features with a non-zero weight
	w      []float64
	all    int // number of monomials of degree ≤ p generated
}

// polyFeatureDim returns the number of features of the poly map for d
// inputs and kernel k (the number of monomials with a non-zero weight):
// C(d+p, p), or C(d+p−1, p) when c₀ = 0; d for linear. It returns −1 for
// other kernels or when the count exceeds limit.
func polyFeatureDim(k Kernel, d, limit int) int {
	p, all := 0, false
	switch k.Name {
	case KernelLinear:
		return d
	case KernelPoly:
		p, all = k.Degree, k.Coef0 != 0
	default:
		return -1
	}
	// C(d+p, p) = number of monomials of degree ≤ p; C(d+p−1, p) of degree p.
	top := d + p
	if !all {
		top--
	}
	c := 1.0
	for i := 1; i <= p; i++ {
		c = c * float64(top-p+i) / float64(i)
		if c > float64(limit) {
			return -1
		}
	}
	return int(math.Round(c))
}

// newPolyFeatures builds the feature map of k (poly or linear) for d inputs.
func newPolyFeatures(k Kernel, d int) *polyFeatures {
	p, gamma, c0 := k.Degree, k.Gamma, k.Coef0
	if k.Name == KernelLinear {
		p, gamma, c0 = 1, 1, 0
	}
	f := &polyFeatures{d: d}
	// Monomials as non-decreasing index sequences; the degree, the last
	// index, its run length and the multinomial |a|!/a! are tracked along
	// the parent chain.
	type mono struct {
		deg, last, run int
		multi          float64
	}
	monos := []mono{{multi: 1}}
	f.parent = append(f.parent, -1)
	f.vr = append(f.vr, -1)
	start := 0
	for deg := 1; deg <= p; deg++ {
		end := len(monos)
		for m := start; m < end; m++ {
			pm := monos[m]
			for v := pm.last; v < d; v++ {
				run := 1
				if pm.deg > 0 && v == pm.last {
					run = pm.run + 1
				}
				// |a|!/a! grows by deg/run when coordinate v's exponent becomes run.
				monos = append(monos, mono{deg: deg, last: v, run: run, multi: pm.multi * float64(deg) / float64(run)})
				f.parent = append(f.parent, int32(m))
				f.vr = append(f.vr, int32(v))
			}
		}
		start = end
	}
	f.all = len(monos)
	for i, m := range monos {
		t := m.deg
		w := binom(p, t) * math.Pow(gamma, float64(t)) * m.multi
		if p > t {
			w *= math.Pow(c0, float64(p-t))
		}
		if w != 0 {
			f.keep = append(f.keep, int32(i))
			f.w = append(f.w, w)
		}
	}
	return f
}

// binom returns C(n, k) as a float64.
func binom(n, k int) float64 {
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n-k+i) / float64(i)
	}
	return c
}

// dim is the number of features with a non-zero weight.
func (f *polyFeatures) dim() int { return len(f.keep) }

// monomials writes every monomial of x (degree ≤ p) into all (length f.all).
func (f *polyFeatures) monomials(all, x []float64) {
	all[0] = 1
	for i := 1; i < len(all); i++ {
		all[i] = all[f.parent[i]] * x[f.vr[i]]
	}
}

// featureProduct is the exact product K·v = Φ W Φᵀ v through the explicit
// features, computed row by row without storing Φ: O(n·D) time per
// product and O(D) memory, D = polyFeatures.dim().
type featureProduct struct {
	f    *polyFeatures
	x    []float64
	n, d int
	all  []float64 // monomials of one row
	u    []float64 // D: W Φᵀ v
}

func newFeatureProduct(f *polyFeatures, x []float64, n, d int) *featureProduct {
	return &featureProduct{f: f, x: x, n: n, d: d, all: make([]float64, f.all), u: make([]float64, f.dim())}
}

func (p *featureProduct) apply(dst, v []float64) {
	f, d, u, all := p.f, p.d, p.u, p.all
	clear(u)
	for i := range p.n {
		f.monomials(all, p.x[i*d:(i+1)*d])
		vi := v[i]
		if vi == 0 {
			continue
		}
		for j, m := range f.keep {
			u[j] += vi * all[m]
		}
	}
	for j, w := range f.w {
		u[j] *= w
	}
	for i := range p.n {
		f.monomials(all, p.x[i*d:(i+1)*d])
		var s float64
		for j, m := range f.keep {
			s += u[j] * all[m]
		}
		dst[i] = s
	}
}

// features writes the kept features φ(x) (length D) into dst using the
// scratch all (length f.all).
func (f *polyFeatures) features(dst, all, x []float64) {
	f.monomials(all, x)
	for j, m := range f.keep {
		dst[j] = all[m]
	}
}

// polyProjector projects through the explicit features of a poly or linear
// fit: with Φ the fitted rows' features, φ̄ = Φᵀ1/n and sᵢ = Σⱼ αⱼᵢ,
//
//	yᵢ(x) = Σⱼ αⱼᵢ k̃(xⱼ, x) = φ(x)ᵀ Eᵢ + oᵢ,
//	Eᵢ = W(Φᵀαᵢ − sᵢφ̄),  oᵢ = g·sᵢ − Σⱼ αⱼᵢcⱼ,
//
// and (1/n)Σⱼ k(xⱼ, x) = φ(x)ᵀWφ̄, so a projection costs O(D·k) instead of
// O(n(d+k)).
type polyProjector struct {
	f     *polyFeatures
	e     []float64 // D×k row-major
	off   []float64 // k
	wbar  []float64 // D: Wφ̄
	all   []float64 // scratch monomials
	feats []float64 // scratch features
}

// newPolyProjector builds the projector of a fit of n rows x (n×d) with
// coefficients alpha (n×k), column means col and grand mean g.
func newPolyProjector(f *polyFeatures, x []float64, n, d int, alpha []float64, k int, col []float64, g float64) *polyProjector {
	nd := f.dim()
	pp := &polyProjector{f: f, e: make([]float64, nd*k), off: make([]float64, k), wbar: make([]float64, nd),
		all: make([]float64, f.all), feats: make([]float64, nd)}
	s := make([]float64, k)
	for j := range n {
		f.features(pp.feats, pp.all, x[j*d:(j+1)*d])
		a := alpha[j*k : (j+1)*k]
		for t, ft := range pp.feats {
			row := pp.e[t*k : (t+1)*k]
			for i, ai := range a {
				row[i] += ai * ft
			}
			pp.wbar[t] += ft
		}
		for i, ai := range a {
			s[i] += ai
			pp.off[i] -= ai * col[j]
		}
	}
	for t, w := range f.w {
		pp.wbar[t] *= w / float64(n)
		row := pp.e[t*k : (t+1)*k]
		for i := range row {
			row[i] = w*row[i] - s[i]*pp.wbar[t]
		}
	}
	for i := range k {
		pp.off[i] += g * s[i]
	}
	return pp
}

// project writes the projections of x into dst (length k) and returns the
// mean kernel value (1/n)Σⱼ k(xⱼ, x).
func (pp *polyProjector) project(dst, x []float64) float64 {
	pp.f.features(pp.feats, pp.all, x)
	copy(dst, pp.off)
	k := len(dst)
	var mx float64
	for t, ft := range pp.feats {
		row := pp.e[t*k : (t+1)*k]
		for i, e := range row {
			dst[i] += e * ft
		}
		mx += pp.wbar[t] * ft
	}
	return mx
}
