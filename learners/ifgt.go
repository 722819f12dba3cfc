package learners

import (
	"fmt"
	"math"
)

// ifgtProduct is the improved fast Gauss transform (Yang, Duraiswami and
// Gumerov; Raykar and Duraiswami's fast KPCA for the Gaussian kernel) as
// the product K·v of the rbf kernel k(x, y) = exp(−‖x−y‖²/h²), h = 1/√γ,
// on the fitted rows.
//
// The rows are grouped by farthest-point clustering into clusters with
// centres cₛ and radii rₛ. With Δx = (xᵢ − cₛ)/h and Δy = (y − cₛ)/h,
//
//	k(xᵢ, y) = e^(−‖Δy‖²) e^(−‖Δx‖²) e^(2ΔxᵀΔy)
//	         ≈ e^(−‖Δy‖²) Σ_{|α|<pₛ} (2^|α|/α!) Δx^α Δy^α,
//
// so a cluster's sum Σᵢ vᵢ k(xᵢ, y) is e^(−‖Δy‖²) Σ_α Cₛ_α Δy^α with
// coefficients Cₛ_α = (2^|α|/α!) Σᵢ vᵢ e^(−‖Δx‖²) Δx^α: O(n·T) to build and
// O(T) to evaluate per target and nearby cluster, T = C(p−1+d, d) terms.
// A target y ignores a cluster with ‖y − cₛ‖ > rₛ + h√ln(1/ε).
//
// Error bound, per source and target (a = ‖Δx‖ ≤ rₛ/h, b = ‖Δy‖): a cut
// cluster's points are farther than h√ln(1/ε) from y, so each omitted term
// is ≤ |vᵢ|ε; a kept cluster's Taylor remainder is ≤ |vᵢ|(2ab)^p/p!·
// e^(−(a−b)²), which pₛ bounds by ε over a ≤ rₛ/h and b ≤ rₛ/h + √ln(1/ε).
// Hence every entry of the error matrix E = K̂ − K is at most ε, ‖E‖₂ ≤ nε,
// and each eigenvalue λᵢ/n of the centred covariance operator moves by at
// most ε (Weyl's inequality on H(K + E)H, H the centring projection;
// the product is linear in v, though not exactly symmetric).
//
// The number of clusters is chosen among powers of two up to min(1024,
// n/16) by the
// estimated cost; when the best estimate is not below half the exact
// matrix-free product's, or needs more than maxIFGTTerms terms in a cluster
// or maxIFGTCoefs in all, the
// expansion does not pay and newIFGT returns nil with the reason. In
// practice it pays when the bandwidth is wide against the spread of the
// clusters — low d, or γ·(data radius)² small — and not for high d or
// narrow kernels (see README: batch solvers, for measured cases).
type ifgtProduct struct {
	n, d    int
	h       float64
	eps     float64
	ks      int       // clusters
	centres []float64 // ks×d
	order   []int32   // points grouped by cluster
	start   []int     // ks+1: cluster s is order[start[s]:start[s+1]]
	terms   []int     // ks: number of Taylor terms of cluster s
	coefOff []int     // ks+1: offsets into coef
	cut2    []float64 // ks: squared cut-off distance /h² of cluster s
	near    [][]int32 // ks: the clusters a target of cluster t may need
	dx      []float64 // n×d: (xᵢ − c)/h in cluster order
	srcW    []float64 // n: e^(−‖Δx‖²) in cluster order
	ys      []float64 // n×d: the targets, xᵢ/h in cluster order
	cst     []float64 // 2^|α|/α!
	pmax    int
	ptrunc  []int // ks: truncation order of cluster s
	heads   []int // scratch of monomials
	coef    []float64
	mono    []float64
	dy      []float64
	// Clusters and Terms summarise the expansion for logs.
	Clusters, MaxTerms int
	Cost, ExactCost    float64
}

// maxIFGTTerms bounds the Taylor terms of one cluster, and maxIFGTCoefs
// the coefficients of all clusters together (8·maxIFGTCoefs = 32 MiB).
const (
	maxIFGTTerms = 1 << 15
	maxIFGTCoefs = 1 << 22
)

// ifgtTermCount returns C(p−1+d, d), the number of monomials in d
// variables of total degree < p, or maxIFGTTerms+1 when larger.
func ifgtTermCount(p, d int) int {
	c := 1.0
	for i := 1; i <= d; i++ {
		c = c * float64(p-1+i) / float64(i)
		if c > maxIFGTTerms {
			return maxIFGTTerms + 1
		}
	}
	return int(math.Round(c))
}

// ifgtTruncation returns the smallest p ≤ 100 whose Taylor remainder bound
// max (2ab)^p/p!·e^(−(a−b)²) over 0 ≤ a' ≤ a, 0 ≤ b ≤ bmax is ≤ eps, or
// −1. The maximum over a' ≤ a is at a' = a where b ≥ a, and at most
// (2a²)^p/p! where b < a.
func ifgtTruncation(a, bmax, eps float64) int {
	if a == 0 {
		return 1
	}
	le := math.Log(eps)
	for p := 1; p <= 100; p++ {
		fp := float64(p)
		b := min((a+math.Sqrt(a*a+2*fp))/2, bmax)
		f := fp*math.Log(2*a*b) - (a-b)*(a-b)
		f = max(f, fp*math.Log(2*a*a))
		lg, _ := math.Lgamma(fp + 1)
		if f-lg <= le {
			return p
		}
	}
	return -1
}

// newIFGT builds the product for the rows x (n×d) of an rbf kernel with
// gamma at precision eps, or returns nil and why it does not pay.
func newIFGT(x []float64, n, d int, gamma, eps float64) (*ifgtProduct, string) {
	h := 1 / math.Sqrt(gamma)
	rc := math.Sqrt(math.Log(1 / eps)) // cut-off beyond the radius, in units of h
	// At most 1024 clusters, and at least 16 points per cluster on
	// average: the farthest-point clustering costs O(ks·n·d), and where the
	// expansion does not pay (the fallback runs the exact product) planning
	// with ks up to n would add half a Gram's cost; with ks ≤ n/16 it is a
	// few per cent of it (issue 32: fast ≤ 1.1× auto).
	kmax := max(1, min(n/16, 1024))
	// Farthest-point clustering, with a cost estimate at every power of two.
	centreIdx := []int{0}
	assign := make([]int32, n)
	dist2 := make([]float64, n)
	for i := range n {
		dist2[i] = sqdist(x[i*d:(i+1)*d], x[:d])
	}
	exact := float64(n) * float64(n) * float64(d+20)
	bestCost, bestK := math.Inf(1), 0
	var bestAssign []int32
	var bestRad []float64
	for ks := 1; ; ks++ {
		if ks&(ks-1) == 0 { // a power of two: estimate this clustering's cost
			rad := clusterRadii(assign, dist2, ks)
			cost := ifgtCost(x, d, centreIdx, assign, rad, h, rc, eps)
			if cost < bestCost {
				bestCost, bestK = cost, ks
				bestAssign = append(bestAssign[:0], assign...)
				bestRad = rad
			}
		}
		if ks == kmax {
			break
		}
		far, fd := 0, -1.0
		for i, v := range dist2 {
			if v > fd {
				far, fd = i, v
			}
		}
		if fd == 0 {
			// Every point is a centre already: this clustering is exact.
			rad := clusterRadii(assign, dist2, ks)
			if cost := ifgtCost(x, d, centreIdx, assign, rad, h, rc, eps); cost < bestCost {
				bestCost, bestK = cost, ks
				bestAssign = append(bestAssign[:0], assign...)
				bestRad = rad
			}
			break
		}
		centreIdx = append(centreIdx, far)
		c := x[far*d : (far+1)*d]
		for i := range n {
			if v := sqdist(x[i*d:(i+1)*d], c); v < dist2[i] {
				dist2[i], assign[i] = v, int32(ks)
			}
		}
	}
	if math.IsInf(bestCost, 1) {
		return nil, fmt.Sprintf("rbf fast product does not pay at γ=%.3g, d=%d, ε=%.1g (the error bound needs more than %d Taylor terms in a cluster, or %d in all, at every clustering tried)", gamma, d, eps, maxIFGTTerms, maxIFGTCoefs)
	}
	if !(bestCost < exact/2) {
		return nil, fmt.Sprintf("rbf fast product does not pay at γ=%.3g, d=%d, ε=%.1g (best expansion %.2g flops per product vs exact %.2g)", gamma, d, eps, bestCost, exact)
	}
	return buildIFGT(x, n, d, h, eps, rc, centreIdx[:bestK], bestAssign, bestRad, bestCost, exact), ""
}

func sqdist(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		t := v - b[i]
		s += t * t
	}
	return s
}

// clusterRadii returns the radius of each of ks clusters.
func clusterRadii(assign []int32, dist2 []float64, ks int) []float64 {
	r := make([]float64, ks)
	for i, s := range assign {
		r[s] = max(r[s], dist2[i])
	}
	for s := range r {
		r[s] = math.Sqrt(r[s])
	}
	return r
}

// ifgtCost estimates the flops of one product for a clustering, +Inf when
// a cluster needs more than maxIFGTTerms terms.
func ifgtCost(x []float64, d int, centreIdx []int, assign []int32, rad []float64, h, rc, eps float64) float64 {
	ks := len(rad)
	size := make([]float64, ks)
	for _, s := range assign {
		size[s]++
	}
	terms := make([]float64, ks)
	var cost float64
	total := 0
	for s := range ks {
		p := ifgtTruncation(rad[s]/h, rad[s]/h+rc, eps)
		if p < 0 {
			return math.Inf(1)
		}
		t := ifgtTermCount(p, d)
		if t > maxIFGTTerms {
			return math.Inf(1)
		}
		terms[s] = float64(t)
		total += t
		cost += size[s] * 2 * terms[s] // coefficients
	}
	if total > maxIFGTCoefs {
		return math.Inf(1)
	}
	for t := range ks {
		ct := x[centreIdx[t]*d : (centreIdx[t]+1)*d]
		for s := range ks {
			reach := rad[t] + rad[s] + h*rc
			if sqdist(ct, x[centreIdx[s]*d:(centreIdx[s]+1)*d]) <= reach*reach {
				cost += size[t] * (2*terms[s] + float64(d) + 20)
			}
		}
	}
	return cost
}

// buildIFGT lays out the chosen clustering and its monomial tables.
func buildIFGT(x []float64, n, d int, h, eps, rc float64, centreIdx []int, assign []int32, rad []float64, cost, exact float64) *ifgtProduct {
	ks := len(centreIdx)
	g := &ifgtProduct{n: n, d: d, h: h, eps: eps, ks: ks, Clusters: ks, Cost: cost, ExactCost: exact}
	g.centres = make([]float64, ks*d)
	for s, i := range centreIdx {
		for j := range d {
			g.centres[s*d+j] = x[i*d+j] / h
		}
	}
	g.start = make([]int, ks+1)
	for _, s := range assign {
		g.start[s+1]++
	}
	for s := range ks {
		g.start[s+1] += g.start[s]
	}
	g.order = make([]int32, n)
	fill := append([]int(nil), g.start[:ks]...)
	for i, s := range assign {
		g.order[fill[s]] = int32(i)
		fill[s]++
	}
	g.terms = make([]int, ks)
	g.coefOff = make([]int, ks+1)
	g.cut2 = make([]float64, ks)
	pmax := 1
	for s := range ks {
		a := rad[s] / h
		p := ifgtTruncation(a, a+rc, eps)
		pmax = max(pmax, p)
		g.terms[s] = ifgtTermCount(p, d)
		g.ptrunc = append(g.ptrunc, p)
		g.coefOff[s+1] = g.coefOff[s] + g.terms[s]
		g.cut2[s] = (a + rc) * (a + rc)
		g.MaxTerms = max(g.MaxTerms, g.terms[s])
	}
	g.near = make([][]int32, ks)
	for t := range ks {
		ct := g.centres[t*d : (t+1)*d]
		for s := range ks {
			reach := rad[t]/h + rad[s]/h + rc
			if sqdist(ct, g.centres[s*d:(s+1)*d]) <= reach*reach {
				g.near[t] = append(g.near[t], int32(s))
			}
		}
	}
	g.dx = make([]float64, n*d)
	g.ys = make([]float64, n*d)
	g.srcW = make([]float64, n)
	for s := range ks {
		c := g.centres[s*d : (s+1)*d]
		for at := g.start[s]; at < g.start[s+1]; at++ {
			i := int(g.order[at])
			var r2 float64
			for j := range d {
				y := x[i*d+j] / h
				g.ys[at*d+j] = y
				v := y - c[j]
				g.dx[at*d+j] = v
				r2 += v * v
			}
			g.srcW[at] = math.Exp(-r2)
		}
	}
	// Monomials of degree < pmax in graded order (see monomials), with
	// 2^|α|/α! from their exponents, generated in the same order.
	g.pmax = pmax
	total := ifgtTermCount(pmax, d)
	exps := make([][]int, 1, total)
	exps[0] = make([]int, d)
	heads := make([]int, d)
	for deg := 1; deg < pmax; deg++ {
		end := len(exps)
		for i := range d {
			from := heads[i]
			heads[i] = len(exps)
			for j := from; j < end; j++ {
				e := append([]int(nil), exps[j]...)
				e[i]++
				exps = append(exps, e)
			}
		}
	}
	g.cst = make([]float64, len(exps))
	for t, e := range exps {
		c := 1.0
		for _, k := range e {
			c *= math.Pow(2, float64(k)) / math.Gamma(float64(k+1))
		}
		g.cst[t] = c
	}
	g.heads = make([]int, d)
	g.coef = make([]float64, g.coefOff[ks])
	g.mono = make([]float64, len(g.cst))
	g.dy = make([]float64, d)
	return g
}

// monomials writes the monomials of z of total degree < p into dst
// (length ifgtTermCount(p, d)) in graded order: degree by degree, each
// degree as z₀ times the previous degree's monomials from heads[0] on, then
// z₁ times those from heads[1] on, and so on, so every inner loop is a
// contiguous scaled copy.
func (g *ifgtProduct) monomials(dst, z []float64, p int) {
	dst[0] = 1
	heads := g.heads
	clear(heads)
	t := 1
	for deg := 1; deg < p; deg++ {
		end := t
		for i, zi := range z {
			from := heads[i]
			heads[i] = t
			src := dst[from:end]
			out := dst[t : t+len(src)]
			for j, v := range src {
				out[j] = zi * v
			}
			t += len(src)
		}
	}
}

// accumulate adds w·z^α to cf[α] for every monomial of degree < p, with
// the monomials generated as in monomials (scaled by w) in mono.
func (g *ifgtProduct) accumulate(cf, mono, z []float64, p int, w float64) {
	mono[0] = w
	cf[0] += w
	heads := g.heads
	clear(heads)
	t := 1
	for deg := 1; deg < p; deg++ {
		end := t
		for i, zi := range z {
			from := heads[i]
			heads[i] = t
			src := mono[from:end]
			out := mono[t : t+len(src)]
			c := cf[t : t+len(src)]
			for j, v := range src {
				m := zi * v
				out[j] = m
				c[j] += m
			}
			t += len(src)
		}
	}
}

// series returns Σ_α cf[α]·z^α over the monomials of degree < p, using mono
// as scratch.
func (g *ifgtProduct) series(cf, mono, z []float64, p int) float64 {
	mono[0] = 1
	acc := cf[0]
	heads := g.heads
	clear(heads)
	t := 1
	for deg := 1; deg < p; deg++ {
		end := t
		for i, zi := range z {
			from := heads[i]
			heads[i] = t
			src := mono[from:end]
			out := mono[t : t+len(src)]
			c := cf[t : t+len(src)]
			for j, v := range src {
				m := zi * v
				out[j] = m
				acc += c[j] * m
			}
			t += len(src)
		}
	}
	return acc
}

// apply writes K̂·v into dst.
func (g *ifgtProduct) apply(dst, v []float64) {
	d := g.d
	clear(g.coef)
	for s := range g.ks {
		cf := g.coef[g.coefOff[s]:g.coefOff[s+1]]
		mono := g.mono[:len(cf)]
		p := g.ptrunc[s]
		for at := g.start[s]; at < g.start[s+1]; at++ {
			if w := v[g.order[at]] * g.srcW[at]; w != 0 {
				g.accumulate(cf, mono, g.dx[at*d:(at+1)*d], p, w)
			}
		}
		for a := range cf {
			cf[a] *= g.cst[a]
		}
	}
	dy := g.dy
	for t := range g.ks {
		for at := g.start[t]; at < g.start[t+1]; at++ {
			y := g.ys[at*d : (at+1)*d]
			var sum float64
			for _, s := range g.near[t] {
				c := g.centres[int(s)*d : (int(s)+1)*d]
				var r2 float64
				for j, yj := range y {
					dy[j] = yj - c[j]
					r2 += dy[j] * dy[j]
				}
				if r2 > g.cut2[s] {
					continue
				}
				cf := g.coef[g.coefOff[s]:g.coefOff[s+1]]
				sum += math.Exp(-r2) * g.series(cf, g.mono[:len(cf)], dy, g.ptrunc[s])
			}
			dst[g.order[at]] = sum
		}
	}
}

// ifgtEval evaluates m fitted kernel sums Σⱼ wⱼc k(xⱼ, y), c < m, at any
// target y through the same clusters and truncations as the product, so
// each sum is within ε·Σⱼ|wⱼc| of the exact one. Cost per target: one
// distance per cluster plus T·m per cluster within its cut-off.
type ifgtEval struct {
	g    *ifgtProduct
	m    int
	coef []float64 // cluster s, term a, vector c at (coefOff[s]+a)·m + c
	yh   []float64 // scratch: y/h
}

// evaluator returns the evaluator of the n×m row-major weights w (rows in
// the fitted order).
func (g *ifgtProduct) evaluator(w []float64, m int) *ifgtEval {
	e := &ifgtEval{g: g, m: m, coef: make([]float64, g.coefOff[g.ks]*m), yh: make([]float64, g.d)}
	d := g.d
	for s := range g.ks {
		cf := e.coef[g.coefOff[s]*m : g.coefOff[s+1]*m]
		mono := g.mono[:g.terms[s]]
		for at := g.start[s]; at < g.start[s+1]; at++ {
			g.monomials(mono, g.dx[at*d:(at+1)*d], g.ptrunc[s])
			i := int(g.order[at])
			wi := w[i*m : (i+1)*m]
			sw := g.srcW[at]
			for a, mv := range mono {
				row := cf[a*m : (a+1)*m]
				t := sw * mv
				for c, wc := range wi {
					row[c] += wc * t
				}
			}
		}
		for a := range g.terms[s] {
			row := cf[a*m : (a+1)*m]
			for c := range row {
				row[c] *= g.cst[a]
			}
		}
	}
	return e
}

// eval writes the m sums at y into dst.
func (e *ifgtEval) eval(dst, y []float64) {
	g, m, d := e.g, e.m, e.g.d
	clear(dst)
	for j, v := range y {
		e.yh[j] = v / g.h
	}
	dy := g.dy
	for s := range g.ks {
		c := g.centres[s*d : (s+1)*d]
		var r2 float64
		for j, v := range e.yh {
			dy[j] = v - c[j]
			r2 += dy[j] * dy[j]
		}
		if r2 > g.cut2[s] {
			continue
		}
		mono := g.mono[:g.terms[s]]
		g.monomials(mono, dy, g.ptrunc[s])
		ex := math.Exp(-r2)
		cf := e.coef[g.coefOff[s]*m : g.coefOff[s+1]*m]
		for a, mv := range mono {
			t := ex * mv
			row := cf[a*m : (a+1)*m]
			for k, v := range row {
				dst[k] += t * v
			}
		}
	}
}
