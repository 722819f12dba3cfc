package learners

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"
)

func init() {
	constructors[KindIKPCA] = func(c Config) (Learner, error) { return NewIKPCA(c) }
}

// IKPCA is incremental eigenspace kernel PCA on a budgeted dictionary: the
// default learner.
//
// # Model
//
// Kim (2003) applies Hall et al.'s incremental eigenspace update (with the
// mean update) to the empirical kernel map. IKPCA does it in whitened
// Nyström coordinates: with the dictionary D = {d₁…d_m} (m ≤ B) and
// K_DD + εI = LLᵀ, an observation x has coordinates z = L⁻¹k_D(x), so that
// zᵀz' is the kernel restricted to span φ(D). Kernel PCA proper is linear
// PCA of z: IKPCA keeps the forgetting-weighted mean μ and scatter S of the
// z's exactly (Welford/Hall update, weights decaying by f per observation),
// and publishes the top-k eigenvectors U of S/W, refreshed every
// Config.Refresh observations (default 2p) by one warm-started block
// subspace iteration with Rayleigh–Ritz (block p = min(B, k + max(k, 8));
// S·U is kept up to date between refreshes, so a refresh costs one m×m×p
// product). Centring is exact within span φ(D).
//
// Admission by approximate linear dependence: x joins D when
// δ = k(x,x) − ‖z‖² > ν·k(x,x) (or, with the coherence rule, when
// max_j |k(x,dⱼ)| normalised ≤ μ₀). L gains the row (zᵀ, √(δ+ε)); existing
// coordinates do not change. A point that was not admitted lies within ν of
// the span, so it has no mass along any later member: the one-pass
// dictionary loses at most ν·k(x,x) per observation while it fills.
//
// Centroid policy (the default). Each observation that does not join D is
// absorbed by its nearest member (largest k(x,dⱼ)/√k(dⱼ,dⱼ)), which keeps
// a forgetting-weighted weight wⱼ (the observations it stands for, itself
// included) and the sum of what it absorbed since it last moved. Once that
// sum weighs as much as its position, the member moves to the weighted
// mean (online k-means with doubling steps: O(log N) moves per member; at
// most one move every max(2, ⌈m²/32768⌉) observations, see moveGapArea):
// the move is an eviction of dⱼ and an admission of the mean, and instead
// of dropping the evicted coordinate it is projected on the new member's
// direction (see append), so mean and scatter are the exact orthogonal
// projection of the old statistics on the new span, in O(Bd + B²). A new
// point x with an ALD residual above ν replaces a member only when one
// stands for (almost) nothing — wⱼ ≤ 1, or with forgetting wⱼ ≤ W/(e·B),
// 1/e of the average share, reached about 1/(1−f) observations after it
// stops absorbing — and is older than the protection period (min(1/(1−f),
// 2B) absorbed observations), so that new members have time to gather
// their share; otherwise x is absorbed. Landmarks at the centres of the
// points they represent capture more of the covariance than raw rows do
// (Nyström with k-means landmarks), and members whose region the stream
// has left are the ones that go.
//
// When D is full, the other eviction policies choose a member j (lli: the member
// best represented by the others, 1/[K⁻¹]ⱼⱼ smallest, and only if x's
// residual δ exceeds Config.SwapRatio times that member's; fifo: the
// oldest; contribution: the member whose removal loses the least variance
// in the published components, Σᵢ θᵢAⱼᵢ²/[K⁻¹]ⱼⱼ). Removing row j of L is re-triangularised with m−j
// Givens rotations; the same rotations re-express μ, S, S·U and U in the
// new basis, and the dropped coordinate is the mass along the removed
// direction, all in O(B²).
//
// The published model is frozen at each refresh: component i of x is
// yᵢ = uᵢᵀ(z − μ_ref) = Σⱼ Aⱼᵢ k(dⱼ,x) − cᵢ with A = L⁻ᵀU_k, c = U_kᵀμ_ref and
// μ_ref the mean at that refresh, so Transform costs O(Bd + Bk) and
// Transform, Score and Model agree. Learn costs O(Bd + B²) (one triangular
// solve and a symmetric rank-one update of the scatter's lower triangle)
// plus the amortised refresh.
//
// The scatter's rank-one terms are deferred and folded in blocks: Learn
// updates the weight, the mean and S·U at once (everything Transform,
// Score, Summary and the admission rule read) and keeps the centred,
// weighted coordinates √(g/scale)·(z − μ) of the last r = min(p, 16)
// observations; S gains them as one rank-r symmetric update (a BLAS-3
// product, about twice the rate of r rank-one updates) when r are
// pending, and before anything reads or re-expresses S (a refresh, an
// admission, an eviction, a rescaling). The result equals the one-row-
// at-a-time update up to rounding; the pending block is part of the state,
// so a restored learner continues bit-identically.
//
// # State names
//
// Ints: m, version, rng, since_refresh, ready, changes, clock, pending. Scalars:
// weight, kxx_sum, eps, scale. Matrices: points m×d, admitted 1×m, L m×m,
// P m×m (= (K_DD+εI)⁻¹; kept under lli and contribution eviction only; the P of a fifo state written before fifo stopped keeping it is ignored), S m×m (scaled scatter: scatter = scale·S,
// symmetric), mu 1×m, mu_ref 1×m, U m×p, SU m×p (S·U), theta 1×p (Ritz
// values of the scatter), ref m×k (basis at the last version), A m×k,
// a 1×m (= L⁻ᵀμ_ref), c 1×k, pending (r−1)×m (its first n rows, n the
// int pending < r, are the scatter terms not yet folded into S, row i =
// √αᵢ·(zᵢ − μᵢ₋₁), the others zero; the scatter is scale·(S + EᵀE) with E
// those n rows). Budget fit (optional: snapshots from before them lack
// them): scalars dropped, swap_rate, move_rate, outside. Centroid eviction
// only: ints absorb_clock, last_move (the virtual time of the last move of
// the rate limit, moveAllowed: Seen() at the last move unless a burst is
// being spent, when it runs up to moveBurstSize gaps ahead; a snapshot from
// before bursts holds Seen() at the last move, which reads the same);
// matrices weight_of 1×m, absorbed m×d, absorbed_n 1×m, born 1×m, kself 1×m.
type IKPCA struct {
	cfg     Config
	d, k, b int // input dimension, components, budget
	p       int // block size of the subspace iteration

	rows           *kernelRows // dictionary points
	L              []float64   // b×b lower Cholesky factor of K_DD + εI (stride b)
	P              []float64   // b×b (K_DD + εI)⁻¹, full symmetric storage (stride b)
	S              []float64   // b×b scatter / scale, stride b; updates touch the lower triangle, mirror() completes it
	pend           []float64   // r×b: rank-one terms of S not folded in yet (√α·dz rows, stride b)
	np, r          int         // pending rows, block size
	mu             []float64   // b: weighted mean of the coordinates
	muRef          []float64   // b: the mean as of the last refresh (published model)
	adm            []float64   // b: admission clock of each member (for fifo)
	U              []float64   // b×p: Ritz vectors, columns sorted by Ritz value, descending
	SU             []float64   // b×p: S·U, kept up to date between refreshes
	th             []float64   // p: Ritz values of the scatter (not divided by the weight)
	ref            []float64   // b×k: published basis at the last version change
	A              []float64   // b×k: L⁻ᵀU_k, coefficients over the dictionary
	a              []float64   // b: L⁻ᵀμ_ref
	c              []float64   // k: U_kᵀμ_ref
	mmRef          float64     // ‖μ_ref‖²
	eps            float64     // absolute jitter
	w              float64     // total weight W
	kxx            float64     // weighted Σ k(x,x)
	sc             float64     // scale of S
	seen           int64       // observations learned
	ver            uint64      // basis version
	rng            uint64      // splitmix64 state
	since, changes int64
	clock          int64 // admissions so far (fifo order)
	ready          bool

	// Budget fit, all policies: the scatter mass dropped by evictions
	// (forgetting-weighted like the scatter), and running rates of swaps
	// (a member replaced by an admitted point) and moves (centroid).
	dropped            float64
	swapRate, moveRate float64
	outside            float64 // running mean of the ALD residual δ the observations leave outside the span (0 for one that joined)

	// centroid policy only (nil otherwise)
	cnt       []float64 // b: forgetting-weighted number of observations each member stands for, itself included
	acc       []float64 // b×d: sum of the observations a member absorbed since its last move
	accN      []float64 // b: their number
	born      []float64 // b: aclock when the member was admitted
	aclock    int64     // observations absorbed by a member so far (the protection clock)
	gapArea   int64     // moveGapArea (a field so that tests can compare schedules)
	lastMove  int64     // virtual time of the last move (Seen() at it when moves are not bursting)
	moveBurst int64     // moveBurstSize (a field so that tests can compare schedules)
	kself     []float64 // b: k(dⱼ,dⱼ)
	// the dropped coordinate's statistics, carried into the member that
	// takes its place (between evict and append, within one call)
	carry           bool
	carryZ, carryMu float64

	// tr is told of every change of coordinates during LearnTracked (nil
	// otherwise; never retained after it returns).
	tr CoordTracker

	// Working memory, never part of the state, nothing in it survives a
	// call: views of ws (the learner's own, or one shared with the other
	// learners of a goroutine, see ShareScratch), set by bind at the
	// start of every call that uses them.
	ws              *Scratch  // the shared working memory (nil: the learner's own arrays)
	shared          bool      // ws is set (MemoryBytes does not count the working memory)
	kr, z, t1       []float64 // b
	y1, y2          []float64 // b×p
	gc, gs          []float64 // b: Givens rotations of an eviction
	h               []float64 // p×p
	wv, work        []float64 // p, Syev workspace
	lwork           int
	xb              []float64 // d: a member's new position (centroid)
	carryS, carrySU []float64 // b, p: the carried coordinate's row of S and of S·U (centroid)
}

// NewIKPCA returns an empty IKPCA learner for cfg (defaults applied).
func NewIKPCA(cfg Config) (*IKPCA, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Learner != KindIKPCA {
		return nil, fmt.Errorf("%w: learner: %q is not ikpca", ErrConfig, cfg.Learner)
	}
	b, k, d := cfg.Budget, cfg.Components, cfg.Dim
	p := min(b, k+max(k, 8))
	r := min(p, 16)
	l := &IKPCA{
		cfg: cfg, d: d, k: k, b: b, p: p, r: r,
		pend:  make([]float64, r*b),
		rows:  newKernelRows(cfg.Kernel, d, b),
		L:     make([]float64, b*b),
		S:     make([]float64, b*b),
		mu:    make([]float64, b),
		muRef: make([]float64, b),
		adm:   make([]float64, b),
		U:     make([]float64, b*p),
		SU:    make([]float64, b*p),
		th:    make([]float64, p),
		ref:   make([]float64, b*k),
		A:     make([]float64, b*k),
		a:     make([]float64, b),
		c:     make([]float64, k),
		sc:    1,
		rng:   cfg.Seed,
	}
	if keepsInverse(cfg.Eviction) {
		l.P = make([]float64, b*b)
	}
	if cfg.Eviction == EvictCentroid {
		// centroid never reads (K_DD+εI)⁻¹ as a whole: it is not kept
		// (evict solves for the one column it needs).
		l.cnt = make([]float64, b)
		l.acc = make([]float64, b*d)
		l.accN = make([]float64, b)
		l.born = make([]float64, b)
		l.kself = make([]float64, b)
		l.gapArea = moveGapArea
		l.moveBurst = moveBurstSize
	}
	l.lwork = syevWork(p)
	// Its own working memory, array by array (one array would round up to
	// the allocator's next size: 3 KiB more at B=128); ShareScratch
	// replaces it by views of a shared one.
	l.carve(func(n int) []float64 { return make([]float64, n) })
	return l, nil
}

// syevWork is the workspace Syev asks for on a p×p problem (at least 3p).
func syevWork(p int) int {
	var q [1]float64
	lapack64.Syev(lapack.EVCompute, blas64.Symmetric{N: p, Stride: p, Uplo: blas.Upper}, nil, q[:], -1)
	return max(int(q[0]), 3*p)
}

// scratchLen is the working memory of the learner in float64s:
// 6B + 2Bp + p² + 2p + d + lwork (kr, z, t1, the Givens rotations and the
// carried row of S; the two B×p blocks; the Ritz problem, its values and
// the carried row of S·U; a member's new position; Syev's workspace).
func (l *IKPCA) scratchLen() int {
	b, p := l.b, l.p
	return 6*b + 2*b*p + p*p + 2*p + l.d + l.lwork
}

// useScratch makes l take its working memory from ws (ShareScratch).
func (l *IKPCA) useScratch(ws *Scratch) {
	l.ws, l.shared = ws, true
	l.bind()
}

// bind points the working memory's views into the shared Scratch (none
// to do for a learner with its own), growing it if it is smaller than the
// learner needs. Cheap when they already point there (another learner of
// the same layout may have used it since: its contents are never read
// across calls).
func (l *IKPCA) bind() {
	if !l.shared {
		return
	}
	buf := l.ws.floats(l.scratchLen())
	if len(l.kr) > 0 && &l.kr[0] == &buf[0] {
		return
	}
	l.carve(func(n int) []float64 {
		v := buf[:n:n]
		buf = buf[n:]
		return v
	})
}

// carve sets the working memory's views, taking each array of n values
// from next (scratchLen values in all).
func (l *IKPCA) carve(next func(n int) []float64) {
	b, p := l.b, l.p
	l.kr, l.z, l.t1, l.gc, l.gs, l.carryS = next(b), next(b), next(b), next(b), next(b), next(b)
	l.y1, l.y2 = next(b*p), next(b*p)
	l.h, l.wv, l.carrySU = next(p*p), next(p), next(p)
	l.xb = next(l.d)
	l.work = next(l.lwork)
}

// MemoryBytes is the learner's fixed memory in bytes: its state,
//
//	8·(B·d + 3·B² + B·(2p + 2k + r + 5) + p + k)
//
// with p = min(B, k + max(k, 8)) the block size and r = min(p, 16) the
// number of deferred scatter terms: the dictionary and its norms, L,
// P = (K_DD+εI)⁻¹ and the scatter (3B²), the Ritz block and S times it
// (2Bp), A and the version reference (2Bk), the pending scatter terms
// (Br), the mean, the published mean, admission times and L⁻ᵀμ, the Ritz
// values and c. The centroid and fifo policies keep no P (−B²); centroid
// adds B·d + 4B: each member's sum of absorbed observations, its weight,
// count, birth and k(dⱼ,dⱼ). Plus, unless the learner shares a Scratch
// (ShareScratch), its own working memory,
//
//	8·(6B + 2Bp + p² + 2p + d + lwork)
//
// with lwork (≈ 34p) the eigensolver's workspace (a shared Scratch holds
// it in one array: ScratchBytes). It does not depend on the stream.
func (l *IKPCA) MemoryBytes() int {
	b, p, k, d := l.b, l.p, l.k, l.d
	n := b*d + 3*b*b + b*(2*p+2*k+l.r+5) + p + k
	if l.P == nil {
		n -= b * b
	}
	if l.cnt != nil {
		n += b*d + 4*b
	}
	if !l.shared {
		n += l.scratchLen()
	}
	return 8 * n
}

// Kind returns "ikpca".
func (l *IKPCA) Kind() string { return KindIKPCA }

// Dim returns the input dimension d.
func (l *IKPCA) Dim() int { return l.d }

// Components returns k.
func (l *IKPCA) Components() int { return l.k }

// Seen returns the number of observations learned.
func (l *IKPCA) Seen() int64 { return l.seen }

// Config returns the learner's configuration with defaults applied.
func (l *IKPCA) Config() Config { return l.cfg }

// Stored returns the dictionary size m.
func (l *IKPCA) Stored() int { return l.rows.Len() }

// Learn folds x into the eigenspace model. Cost O(Bd + B²) (plus an O(B²)
// eviction when the dictionary is full and x is admitted, and the refresh
// every Config.Refresh observations).
func (l *IKPCA) Learn(x []float64) error {
	if err := checkInput(x, l.d); err != nil {
		return err
	}
	l.bind()
	kxx := l.cfg.Kernel.Self(x)
	m := l.rows.Len()
	kr := l.rows.Row(l.kr[:m], x, norm2(x))
	if !finite(kxx) || !finiteAll(kr) {
		return fmt.Errorf("%w: kernel value overflows for this input", ErrNumerical)
	}
	if l.seen == 0 {
		// The jitter scale is fixed by the first observation's k(x,x).
		l.eps = l.cfg.Jitter * math.Max(math.Abs(kxx), 1e-300)
	}

	// Coordinates z = L⁻¹k_D(x) and the ALD residual δ.
	z := l.z[:m]
	copy(z, kr)
	trsvLower(m, l.L, l.b, z)
	if !finiteAll(z) {
		return fmt.Errorf("%w: dictionary coordinates are not finite", ErrNumerical)
	}
	delta := kxx - dot(z, z)
	delta0 := delta

	// From here on the state changes; nothing below can fail.
	swapped, appended := false, false
	if l.admit(kxx, delta, kr) {
		if m == l.b {
			j := l.victim(delta)
			if j >= 0 {
				l.flush() // the basis changes
				l.carry = l.cnt != nil
				l.evict(j, z, false)
				swapped = true
				m--
				z = l.z[:m]
				copy(l.kr[j:], l.kr[j+1:m+1])
				kr = l.kr[:m]
				delta = kxx - dot(z, z)
			}
		}
		if m < l.b && delta > 0 {
			l.flush()
			l.append(x, kr, z, delta, kxx)
			appended = true
			m++
			z = l.z[:m]
		}
		l.carry = false
	}
	l.update(z, kxx)
	l.dropped *= l.cfg.Forget
	// The residual a point leaves outside the span: none when it joined.
	left := math.Max(delta0, 0)
	if appended {
		left = 0
	}
	l.outside += (left - l.outside) / float64(min(l.seen+1, rateWindow))
	l.swapRate = rate(l.swapRate, swapped, l.seen)
	moved := false
	if l.cnt != nil {
		moved = l.absorb(x, kr, appended)
	}
	l.moveRate = rate(l.moveRate, moved, l.seen)
	l.seen++
	l.since++
	// Refresh every Config.Refresh observations, whatever the dictionary's
	// size: a refresh costs O(m²p + mp² + p³), and while m is small its
	// O(p³) part (the Rayleigh–Ritz eigensolve) outweighs the per-observation
	// work, so refreshing more often then is not cheap.
	if l.since >= int64(l.cfg.Refresh) || !l.ready {
		l.refresh()
	}
	return nil
}

// rateWindow is the number of observations over which Summary's swap and
// move rates are averaged.
const rateWindow = 1000

// rate folds one observation's event into a running rate per observation:
// the plain mean over the first rateWindow observations (seen of them
// before this one), an exponential average over about rateWindow after.
func rate(r float64, event bool, seen int64) float64 {
	a := 1 / float64(min(seen+1, rateWindow))
	v := 0.0
	if event {
		v = 1
	}
	return r + a*(v-r)
}

// admit applies the admission rule to an observation with residual delta.
func (l *IKPCA) admit(kxx, delta float64, kr []float64) bool {
	if !(kxx > 0) || !(delta > 1e-12*kxx) {
		return false
	}
	if l.cfg.Admission == "coherence" {
		for j, v := range kr {
			kjj := l.cfg.Kernel.Self(l.rows.Point(j))
			if math.Abs(v) > l.cfg.Coherence*math.Sqrt(kxx*kjj) {
				return false
			}
		}
		return true
	}
	return delta > l.cfg.Tolerance*kxx
}

// victim returns the member to evict for a new point with residual delta,
// or −1 when the policy keeps the dictionary as it is.
func (l *IKPCA) victim(delta float64) int {
	m, b := l.rows.Len(), l.b
	switch l.cfg.Eviction {
	case EvictCentroid:
		// The member that stands for the fewest observations, if that is at
		// most itself (weight ≤ 1: it absorbed nothing, or what it absorbed
		// has been forgotten), among members older than the protection
		// period: a new member needs time to gather the points it stands for.
		j, best := -1, l.deadWeight()
		age := float64(l.aclock - l.protection())
		for i := range m {
			if l.born[i] > age {
				continue
			}
			if w := l.cnt[i] + l.accN[i]; w <= best {
				j, best = i, w
			}
		}
		return j
	case "fifo":
		j := 0
		for i := 1; i < m; i++ {
			if l.adm[i] < l.adm[j] {
				j = i
			}
		}
		return j
	case "contribution":
		j, best := 0, math.Inf(1)
		for i := range m {
			var s float64
			for c := range l.k {
				a := l.A[i*l.k+c]
				s += math.Max(l.th[c], 0) * a * a
			}
			s /= l.P[i*l.b+i]
			if s < best {
				j, best = i, s
			}
		}
		return j
	default: // lli
		j, pmax := 0, 0.0
		for i := range m {
			if v := l.P[i*b+i]; v > pmax {
				j, pmax = i, v
			}
		}
		// Swap only when x's residual exceeds SwapRatio times the member's
		// (1/Pⱼⱼ): log det K_DD then grows by at least log SwapRatio per
		// swap, so on a stationary stream the swaps die out instead of
		// trading members for marginal gains (each swap drops the scatter
		// mass along the removed direction).
		if pmax <= 0 || delta <= l.cfg.SwapRatio/pmax {
			return -1
		}
		return j
	}
}

// append adds x (kernel row kr, coordinates z, residual delta, k(x,x) =
// kxx) as member m. When l.carry is set (an eviction just dropped
// coordinate m, see evict), the dropped coordinate's statistics are
// projected onto the new member's direction instead of starting at zero.
func (l *IKPCA) append(x, kr, z []float64, delta, kxx float64) {
	m, b := l.rows.Len(), l.b
	s := delta + l.eps
	// P ← [[P + ttᵀ/s, −t/s], [−tᵀ/s, 1/s]] with t = P·k_D(x) = L⁻ᵀz
	// (a triangular solve: half the work of the product with P).
	if m > 0 && l.P != nil {
		t := l.t1[:m]
		copy(t, z)
		trsvLowerT(m, l.L, b, t)
		blas64.Implementation().Dger(m, m, 1/s, t, 1, t, 1, l.P, b)
		for i, ti := range t {
			l.P[i*b+m] = -ti / s
			l.P[m*b+i] = -ti / s
		}
	}
	if l.P != nil {
		l.P[m*b+m] = 1 / s
	}
	// L gains the row (zᵀ, √s); the new coordinate has no past mass.
	copy(l.L[m*b:m*b+m], z)
	l.L[m*b+m] = math.Sqrt(s)
	for i := 0; i <= m; i++ {
		l.S[m*b+i], l.S[i*b+m] = 0, 0
	}
	l.mu[m], l.muRef[m], l.a[m] = 0, 0, 0
	clear(l.U[m*l.p : (m+1)*l.p])
	clear(l.SU[m*l.p : (m+1)*l.p])
	if l.tr != nil {
		c := 0.0
		if l.carry {
			c = math.Max(-1, math.Min(1, l.carryZ/math.Sqrt(s)))
		}
		l.tr.Append(m, c)
	}
	if l.carry {
		// The dropped coordinate was the unit direction qⱼ of the removed
		// member orthogonal to the others; the new one is
		// e = (φ(x) − Π φ(x))/√s with Π the projection on the others, and
		// ⟨qⱼ, e⟩ = c = z_last/√s (z_last: x's coordinate along qⱼ, kept by
		// evict). Projecting every past coordinate on e multiplies the
		// dropped coordinate by c: the mean gains c·μ_last, the scatter
		// c·S_last,i and c²·S_last,last, S·U (U has no row for the new
		// member) c·(S·U)_last. This is the orthogonal projection of the
		// old statistics on the new span, so nothing else changes.
		// |c| ≤ ‖e‖ < 1 for a positive definite kernel; the clamp only
		// guards kernels that are not (sigmoid), where it could exceed 1.
		c := math.Max(-1, math.Min(1, l.carryZ/math.Sqrt(s)))
		for i := range m {
			v := c * l.carryS[i]
			l.S[m*b+i], l.S[i*b+m] = v, v
		}
		l.S[m*b+m] = c * c * l.carryS[m]
		l.mu[m] = c * l.carryMu
		for i, v := range l.carrySU {
			l.SU[m*l.p+i] = c * v
		}
		l.dropped += (1 - c*c) * l.carryS[m] * l.sc
		l.carry = false
	}
	if l.cnt != nil {
		l.cnt[m], l.accN[m], l.born[m], l.kself[m] = 1, 0, float64(l.aclock), kxx
		clear(l.acc[m*l.d : (m+1)*l.d])
	}
	clear(l.A[m*l.k : (m+1)*l.k])
	clear(l.ref[m*l.k : (m+1)*l.k])
	l.rows.Append(x)
	l.adm[m] = float64(l.clock)
	l.clock++
	// x's own coordinates in the new basis: (z, δ/√s).
	l.z[m] = delta / math.Sqrt(s)
	l.changes++
	if l.changes >= int64(l.b) {
		l.refreshInverse()
	}
}

// evict removes member j, re-expressing the model in the basis of the
// remaining members; z (the current observation's coordinates) is
// transformed along.
//
// Coefficient vectors over the dictionary (A, a) are projected onto the
// span of the other members: the RKHS projection of φ(dⱼ) on span φ(D₋ⱼ)
// has the coefficients −P₋ⱼ,ⱼ/Pⱼⱼ (block inverse of K_DD), so
// v' = v₋ⱼ − (P₋ⱼ,ⱼ/Pⱼⱼ)·vⱼ; in coordinates this is the rotated u = Lᵀv
// with its last entry (the mass along the removed direction) dropped, so
// Lᵀa = μ_ref and LᵀA = U_k keep holding without a triangular solve.
// P' = P₋ⱼ₋ⱼ − P₋ⱼ,ⱼP₋ⱼ,ⱼᵀ/Pⱼⱼ is the inverse of the principal submatrix.
// Without a kept P (centroid), column j is solved for from L (see colP);
// haveCol tells that l.t1 already holds it.
//
// The phases: project the coefficients (projectOut), delete row j of L and
// restore its triangularity (retriangulate), apply the same rotations to
// every coordinate object (rotateCoords), and drop the last coordinate
// (dropLast).
func (l *IKPCA) evict(j int, z []float64, haveCol bool) {
	m := l.rows.Len()
	l.projectOut(j, haveCol)
	l.retriangulate(j, m)
	l.rotateCoords(j, m, z)
	l.dropLast(m, z)
	l.rows.Remove(j)
	l.changes++
}

// projectOut projects the coefficient vectors A and a on the span of the
// members other than j (v' = v₋ⱼ − (P₋ⱼ,ⱼ/Pⱼⱼ)·vⱼ), downdates a kept P to
// the inverse of its principal submatrix and removes member j's rows from
// the per-member vectors. haveCol tells that l.t1 already holds column j
// of P.
func (l *IKPCA) projectOut(j int, haveCol bool) {
	m, b, k := l.rows.Len(), l.b, l.k
	pj := l.t1[:m] // column j of P over Pⱼⱼ
	var pjj float64
	if l.P != nil {
		pjj = l.P[j*b+j]
		for i := range m {
			pj[i] = l.P[i*b+j] / pjj
		}
	} else {
		if !haveCol {
			l.colP(j, pj)
		}
		pjj = pj[j]
		for i := range pj {
			pj[i] /= pjj
		}
	}
	aj := l.a[j]
	for i := range m {
		if i == j {
			continue
		}
		f := pj[i]
		ai := l.A[i*k : (i+1)*k]
		for c, v := range l.A[j*k : (j+1)*k] {
			ai[c] -= f * v
		}
		l.a[i] -= f * aj
	}
	if l.P != nil {
		removeIndex(l.P, b, m, j)
		removeVecRow(pj, 1, m, j)
		blas64.Implementation().Dger(m-1, m-1, -pjj, pj[:m-1], 1, pj[:m-1], 1, l.P, b)
	}
	removeVecRow(l.A, k, m, j)
	removeVecRow(l.a, 1, m, j)
	removeVecRow(l.adm, 1, m, j)
	if l.cnt != nil {
		removeVecRow(l.cnt, 1, m, j)
		removeVecRow(l.acc, l.d, m, j)
		removeVecRow(l.accN, 1, m, j)
		removeVecRow(l.born, 1, m, j)
		removeVecRow(l.kself, 1, m, j)
	}
}

// retriangulate deletes row j of L (m rows before) and restores its
// triangularity with Givens rotations on columns (i, i+1), i = j…m−2,
// computed row by row (row i needs the rotations before it: rows are taken
// four at a time, so that four independent rotation chains run together),
// leaving them in l.gc, l.gs for rotateCoords. All passes run along rows,
// so they stay cache-friendly.
func (l *IKPCA) retriangulate(j, m int) {
	b := l.b
	// Shift rows j+1… up by one, each only as far as the lower triangle
	// and the entry the rotations below clear (row i takes old row i+1,
	// columns 0…i+1; the rest of the row is zero already).
	for i := j; i < m-1; i++ {
		copy(l.L[i*b:i*b+i+2], l.L[(i+1)*b:(i+1)*b+i+2])
	}
	gc, gs := l.gc, l.gs
	for i0 := j; i0 < m-1; i0 += 4 {
		n := min(4, m-1-i0)
		// Rotations j…i0−1 are known: apply them to the n rows together.
		rotateRowsChain(l.L, b, i0, n, j, i0, gc, gs)
		for i := i0; i < i0+n; i++ {
			row := l.L[i*b : i*b+i+2]
			for r := i0; r < i; r++ {
				rotate(row, r, r+1, gc[r], gs[r])
			}
			a, bb := row[i], row[i+1]
			c, s := 1.0, 0.0
			if rr := math.Hypot(a, bb); rr != 0 {
				c, s = a/rr, bb/rr
				row[i] = rr
			}
			row[i+1] = 0
			gc[i], gs[i] = c, s
		}
	}
}

// rotateCoords applies the rotations j…m−2 of retriangulate to every
// coordinate object: the tracker, μ, μ_ref, z, U, S·U, the reference basis
// and the scatter.
//
// The scatter is kept in its lower triangle. Gᵀ·S·G changes rows and
// columns j… only: complete the trailing block (j…m−1)², rotate rows
// j… over all columns (Gᵀ·S), then the columns of the trailing rows
// (·G), each row r only as far as its lower triangle needs (column c
// is final after rotation c, so rotations j…r); the upper triangle of
// the result is never read. The two passes are interleaved four rows
// at a time: rows r…r+3 are final in Gᵀ·S after rotation r+3, and their
// column rotations run while they are still in cache, so the block is
// streamed from memory once instead of twice (the same operations in
// the same order per row: the result is bit-identical).
func (l *IKPCA) rotateCoords(j, m int, z []float64) {
	b, p, k := l.b, l.p, l.k
	gc, gs := l.gc, l.gs
	l.mirrorFrom(j)
	for r := j; r < m; r += 4 {
		n := min(4, m-r)
		for i := r; i < min(r+n, m-1); i++ {
			c, s := gc[i], gs[i]
			if l.tr != nil {
				l.tr.Rotate(i, c, s)
			}
			rotate(l.mu, i, i+1, c, s)
			rotate(l.muRef, i, i+1, c, s)
			rotate(z, i, i+1, c, s)
			rotateRows(l.U, p, i, c, s)
			rotateRows(l.SU, p, i, c, s)
			rotateRows(l.ref, k, i, c, s)
			rotatePair(l.S[i*b:i*b+m], l.S[(i+1)*b:(i+1)*b+m], c, s) // Gᵀ·S: rows i, i+1
		}
		rotateRowsChain(l.S, b, r, n, j, min(r+n, m-1), gc, gs)
	}
}

// dropLast drops coordinate m−1 after the rotations (m members before the
// eviction), the mass along the removed direction, keeping it for append
// when a centroid move carries it (l.carry).
func (l *IKPCA) dropLast(m int, z []float64) {
	b, p, k := l.b, l.p, l.k
	// Drop coordinate m−1, the mass along the removed direction:
	// S'U' = (QᵀSU)₋ − S[:, m−1]·U[m−1, :] (column m−1 read as row m−1),
	// c' = U'ᵀμ'_ref = c − U[m−1, :k]·μ_ref[m−1].
	last := m - 1
	if l.tr != nil {
		l.tr.Drop(last)
	}
	for i := range last {
		f := l.S[last*b+i]
		if f == 0 {
			continue
		}
		su := l.SU[i*p : (i+1)*p]
		for c, u := range l.U[last*p : m*p] {
			su[c] -= f * u
		}
	}
	for c := range k {
		l.c[c] -= l.U[last*p+c] * l.muRef[last]
	}
	if !l.carry { // else append drops what the carry does not keep
		l.dropped += l.sc * l.S[last*b+last]
	}
	if l.carry {
		// Keep the dropped coordinate's statistics for append: its row
		// of the scatter, its mean and its row of S·U without the term
		// of U's dropped row, (S·U)_last − S_last,last·U_last.
		copy(l.carryS[:m], l.S[last*b:last*b+m])
		l.carryMu = l.mu[last]
		l.carryZ = z[last]
		sll := l.S[last*b+last]
		for c := range p {
			l.carrySU[c] = l.SU[last*p+c] - sll*l.U[last*p+c]
		}
	}
	for i := range m {
		l.S[last*b+i], l.S[i*b+last] = 0, 0
	}
	l.mu[last], l.muRef[last], z[last] = 0, 0, 0
	// ‖μ_ref‖² by the same dot product as publishMean and Restore (O(B)),
	// not by subtracting the dropped term: a restored learner then holds
	// the same bits and its SPE equals the running learner's exactly.
	l.mmRef = dot(l.muRef[:last], l.muRef[:last])
	clear(l.U[last*p : m*p])
	clear(l.SU[last*p : m*p])
	clear(l.ref[last*k : m*k])
	clear(l.L[last*b : last*b+m])
}

// colP writes column j of P = (K_DD+εI)⁻¹ = L⁻ᵀL⁻¹ into dst (length m):
// u = L⁻¹eⱼ (zero above j: a solve of the trailing (m−j)² block), then
// dst = L⁻ᵀu. Pⱼⱼ = ‖u‖² = dst[j]. O(B²), without P kept.
func (l *IKPCA) colP(j int, dst []float64) {
	m, b := len(dst), l.b
	clear(dst)
	dst[j] = 1
	trsvLower(m-j, l.L[j*b+j:], b, dst[j:])
	trsvLowerT(m, l.L, b, dst)
}

// update folds the coordinates z (length m) into the weighted mean and scatter.
func (l *IKPCA) update(z []float64, kxx float64) {
	m, b, f := len(z), l.b, l.cfg.Forget
	wOld := l.w
	l.w = f*wOld + 1
	l.kxx = f*l.kxx + kxx
	g := f * wOld / l.w // weight of the rank-one term
	if f != 1 {
		l.sc *= f
		if l.sc < 1e-150 {
			l.flush()
			scal(l.S, b, m, l.sc)
			for i := range l.SU[:m*l.p] {
				l.SU[i] *= l.sc
			}
			l.sc = 1
		}
	}
	dz := l.pend[l.np*b : l.np*b+m]
	for i := range m {
		dz[i] = z[i] - l.mu[i]
	}
	inv := 1 / l.w
	for i := range m {
		l.mu[i] += dz[i] * inv
	}
	if g > 0 {
		// S·U gains (g/scale)·dz·(dzᵀU) now; S the term (g/scale)·dz·dzᵀ
		// with the next block (kept as √(g/scale)·dz).
		alpha := g / l.sc
		impl := blas64.Implementation()
		w := l.wv[:l.p]
		impl.Dgemv(blas.Trans, m, l.p, 1, l.U, l.p, dz, 1, 0, w, 1)
		impl.Dger(m, l.p, alpha, dz, 1, w, 1, l.SU, l.p)
		sq := math.Sqrt(alpha)
		for i := range dz {
			dz[i] *= sq
		}
		l.np++
		if l.np == l.r {
			l.flush()
		}
	}
}

// flush folds the pending scatter terms into S (its lower triangle) as
// one rank-n update S += EᵀE, E the n×m pending block. Every pending row
// has the current length m: flush runs before anything changes the basis.
func (l *IKPCA) flush() {
	if l.np == 0 {
		return
	}
	m, b := l.rows.Len(), l.b
	blas64.Implementation().Dsyrk(blas.Lower, blas.Trans, m, l.np, 1, l.pend, b, 1, l.S, b)
	l.np = 0
}

// mirror copies the lower triangle of the m×m scatter into the upper one,
// in tiles so that the strided side stays in cache. Updates only touch the
// lower triangle; products and rotations need the full matrix.
func (l *IKPCA) mirror() { l.mirrorFrom(0) }

// mirrorFrom completes the trailing block (j…m−1)² of the scatter from its
// lower triangle.
func (l *IKPCA) mirrorFrom(j int) {
	m, b := l.rows.Len(), l.b
	const tile = 16
	for i0 := j; i0 < m; i0 += tile {
		for c0 := j; c0 <= i0; c0 += tile {
			for c := c0; c < min(c0+tile, m); c++ {
				col := l.S[c*b:]
				for i := max(i0, c+1); i < min(i0+tile, m); i++ {
					col[i] = l.S[i*b+c]
				}
			}
		}
	}
}

// trsvBlock is the row block of trsvLower and trsvLowerT.
const trsvBlock = 32

// refresh runs one Rayleigh–Ritz step of the warm-started block subspace
// iteration on the scatter (exact eigendecomposition while m ≤ p),
// aligns signs with the previous basis, counts versions, and recomputes
// A = L⁻ᵀU_k, a = L⁻ᵀμ and c = U_kᵀμ.
func (l *IKPCA) refresh() {
	l.since = 0
	m, p := l.rows.Len(), l.p
	if m == 0 || l.w == 0 {
		return
	}
	l.flush()
	l.mirror()
	var ritz []float64 // m×p: the new Ritz vectors (stride p)
	var ok bool
	if m <= p {
		ritz, ok = l.ritzExact(m)
	} else {
		ritz, ok = l.ritzSubspace(m)
	}
	if !ok {
		return
	}
	for c := range p {
		if l.th[c] < 0 {
			l.th[c] = 0
		}
	}
	l.alignSigns(ritz, m)
	copy(l.U[:m*p], ritz)
	if m <= p {
		// Exact branch: S·U from scratch (small).
		serialDgemm(blas.NoTrans, blas.NoTrans, m, p, m, 1, l.S, l.b, l.U, p, 0, l.SU, p)
	}
	l.countVersion(m)
	l.publishBasis(m)
}

// ritzExact is the eigendecomposition of the m×m scatter (m ≤ p): the
// eigenvectors, descending, into the returned m×p block, the values times
// the scale into th. ok is false when the solver failed (nothing changed).
func (l *IKPCA) ritzExact(m int) (ritz []float64, ok bool) {
	b, p := l.b, l.p
	q := m
	h := l.h[:q*q]
	ritz = l.y1[:m*p]
	for i := range m {
		copy(h[i*q:i*q+m], l.S[i*b:i*b+m])
	}
	if !lapack64.Syev(lapack.EVCompute, blas64.Symmetric{N: q, Stride: q, Data: h, Uplo: blas.Upper}, l.wv[:q], l.work, l.lwork) {
		return nil, false
	}
	clear(ritz)
	for c := range q {
		src := q - 1 - c // Syev sorts ascending
		for i := range m {
			ritz[i*p+c] = h[i*q+src]
		}
		l.th[c] = l.wv[src] * l.sc
	}
	clear(l.th[q:])
	return ritz, true
}

// ritzSubspace is one step of the block subspace iteration (m > p):
// Y = S·U (kept up to date), orthonormalise, Rayleigh–Ritz on span(Y):
// T = S·Y, H = YᵀT = VΘVᵀ; new U = Y·V (returned), new S·U = T·V (into SU).
// The m×p blocks are handled transposed (p×m, stride m), so that every
// product runs along rows of length m rather than p.
func (l *IKPCA) ritzSubspace(m int) (ritz []float64, ok bool) {
	b, p := l.b, l.p
	impl := blas64.Implementation()
	h := l.h[:p*p]
	yt, tt := l.y2[:p*m], l.y1[:p*m]
	transpose(yt, m, l.SU, p, m, p)
	l.orthonormalize(yt, m, p)
	serialDgemm(blas.NoTrans, blas.NoTrans, p, m, m, 1, yt, m, l.S, b, 0, tt, m) // Tᵀ = YᵀS (S symmetric)
	impl.Dgemm(blas.NoTrans, blas.Trans, p, p, m, 1, yt, m, tt, m, 0, h, p)
	if !lapack64.Syev(lapack.EVCompute, blas64.Symmetric{N: p, Stride: p, Data: h, Uplo: blas.Upper}, l.wv[:p], l.work, l.lwork) {
		return nil, false
	}
	// Descending order of the Ritz values.
	for c := 0; c < p/2; c++ {
		o := p - 1 - c
		for r := range p {
			h[r*p+c], h[r*p+o] = h[r*p+o], h[r*p+c]
		}
		l.wv[c], l.wv[o] = l.wv[o], l.wv[c]
	}
	// (S·U)ᵀ = VᵀTᵀ into the old S·U (p×m, no longer needed), Uᵀ = VᵀYᵀ
	// into Tᵀ's place; then back to m×p (U in Yᵀ's place).
	sut := l.SU[:p*m]
	serialDgemm(blas.Trans, blas.NoTrans, p, m, p, 1, h, p, tt, m, 0, sut, m)
	serialDgemm(blas.Trans, blas.NoTrans, p, m, p, 1, h, p, yt, m, 0, tt, m)
	ritz = l.y2[:m*p]
	transpose(ritz, p, tt, m, p, m)
	transpose(tt, p, sut, m, p, m)
	copy(l.SU[:m*p], tt)
	for c := range p {
		l.th[c] = l.wv[c] * l.sc
	}
	return ritz, true
}

// alignSigns flips each published component of ritz (and its S·U column)
// that points away from the previous basis U.
func (l *IKPCA) alignSigns(ritz []float64, m int) {
	p := l.p
	for c := range l.k {
		var s float64
		for i := range m {
			s += ritz[i*p+c] * l.U[i*p+c]
		}
		if s < 0 {
			for i := range m {
				ritz[i*p+c] = -ritz[i*p+c]
				l.SU[i*p+c] = -l.SU[i*p+c]
			}
		}
	}
}

// countVersion sets ready and counts a new basis version when the learner
// becomes ready or a published component turned away from its reference
// direction by more than versionCos (then the reference moves).
func (l *IKPCA) countVersion(m int) {
	p, k := l.p, l.k
	wasReady := l.ready
	l.ready = m >= k && l.th[k-1] > 1e-12*math.Max(l.th[0], 1e-300)
	if !l.ready {
		return
	}
	changed := !wasReady
	for c := range k {
		var s float64
		for i := range m {
			s += l.U[i*p+c] * l.ref[i*k+c]
		}
		if math.Abs(s) < versionCos {
			changed = true
		}
	}
	if changed {
		l.ver++
		for i := range m {
			copy(l.ref[i*k:(i+1)*k], l.U[i*p:i*p+k])
		}
	}
}

// publishBasis publishes A = L⁻ᵀU_k and the mean as of now (μ_ref,
// a = L⁻ᵀμ_ref, c = U_kᵀμ_ref), so that Transform, Score and Model describe
// one model. Aᵀ = U_kᵀL⁻¹ (k×m, rows of length m), then transposed into A.
func (l *IKPCA) publishBasis(m int) {
	p, k := l.p, l.k
	at := l.y2[:k*m]
	transpose(at, m, l.U, p, m, k)
	blas64.Implementation().Dtrsm(blas.Right, blas.Lower, blas.NoTrans, blas.NonUnit, k, m, 1, l.L, l.b, at, m)
	transpose(l.A, k, at, m, k, m)
	copy(l.muRef[:m], l.mu[:m])
	l.publishMean()
}

// publishMean recomputes a = L⁻ᵀμ_ref, c = U_kᵀμ_ref and ‖μ_ref‖². O(B²).
func (l *IKPCA) publishMean() {
	m, p := l.rows.Len(), l.p
	copy(l.a[:m], l.muRef[:m])
	trsvLowerT(m, l.L, l.b, l.a)
	for c := range l.k {
		var s float64
		for i := range m {
			s += l.U[i*p+c] * l.muRef[i]
		}
		l.c[c] = s
	}
	l.mmRef = dot(l.muRef[:m], l.muRef[:m])
}

// Sync runs up to maxIter refreshes of the published components, stopping
// early once the Ritz values agree to 1e-12 relative: it brings the
// published basis up to date with everything learned, for example before a
// final model export. It changes the published basis (part of the state),
// so a pipeline that must be reproducible from its input alone calls it
// only at deterministic points. Cost O(B²p) per iteration.
func (l *IKPCA) Sync(maxIter int) error {
	if !l.ready {
		return ErrNotReady
	}
	l.bind()
	prev := l.t1[:l.p]
	for range maxIter {
		copy(prev, l.th)
		l.refresh()
		var diff, scale float64
		for i, v := range l.th {
			diff = math.Max(diff, math.Abs(v-prev[i]))
			scale = math.Max(scale, math.Abs(v))
		}
		if diff <= 1e-12*scale {
			return nil
		}
	}
	return nil
}

// versionCos is the |cos| below which a component counts as having turned
// away from the basis of the last version (about 8°).
const versionCos = 0.99

// orthonormalize makes the rows of the w×m block yt (stride m, the
// transpose of an m×w block Y) orthonormal, keeping their span and order:
// by Cholesky QR applied twice (two w×w Gram matrices and triangular
// solves, BLAS-3) when the block is well conditioned, else by modified
// Gram–Schmidt applied twice, where a row that vanishes is replaced by a
// seeded random direction.
func (l *IKPCA) orthonormalize(yt []float64, m, w int) {
	if m >= w && l.cholQR(yt, m, w) && l.cholQR(yt, m, w) {
		return
	}
	l.gramSchmidt(yt, m, w)
}

// cholQR replaces Y by Y·R⁻¹ with YᵀY = RᵀR (yt, w×m, by R⁻ᵀ·yt), and
// reports false (leaving yt unchanged) when the Gram matrix is not safely
// positive definite: a condition number of Y above about 1e6, where
// Cholesky QR loses accuracy.
func (l *IKPCA) cholQR(yt []float64, m, w int) bool {
	g := l.h[:w*w]
	impl := blas64.Implementation()
	impl.Dgemm(blas.NoTrans, blas.Trans, w, w, m, 1, yt, m, yt, m, 0, g, w)
	r, ok := lapack64.Potrf(blas64.Symmetric{N: w, Stride: w, Data: g, Uplo: blas.Upper})
	if !ok {
		return false
	}
	lo, hi := math.Inf(1), 0.0
	for i := range w {
		v := g[i*w+i]
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if !(lo > 1e-6*hi) || !finite(hi) {
		return false
	}
	impl.Dtrsm(blas.Left, blas.Upper, blas.Trans, blas.NonUnit, w, m, 1, r.Data, r.Stride, yt, m)
	return true
}

// gramSchmidt orthonormalizes the rows of the w×m block yt by modified
// Gram–Schmidt applied twice; a row that vanishes is replaced by a seeded
// random direction.
func (l *IKPCA) gramSchmidt(yt []float64, m, w int) {
	for c := range w {
		row := yt[c*m : (c+1)*m]
		for attempt := 0; attempt < 3; attempt++ {
			for pass := 0; pass < 2; pass++ {
				for o := range c {
					prev := yt[o*m : (o+1)*m]
					axpy(-dot(row, prev), prev, row)
				}
			}
			if n := dot(row, row); n > 1e-24 {
				n = 1 / math.Sqrt(n)
				for i := range row {
					row[i] *= n
				}
				break
			}
			for i := range row {
				row[i] = l.random()
			}
		}
	}
}

// random returns a deterministic pseudo-random number in [−1, 1).
func (l *IKPCA) random() float64 { return splitmixUniform(&l.rng) }

// refreshInverse recomputes P = (LLᵀ)⁻¹ from L in place (LAPACK potri),
// removing the rounding accumulated by the rank-one up- and downdates.
// O(B³), every B dictionary changes, so O(B²) amortised.
func (l *IKPCA) refreshInverse() {
	l.changes = 0
	m, b := l.rows.Len(), l.b
	if m == 0 || l.P == nil {
		return
	}
	save := l.t1[:m] // the old diagonal, to restore P if potri fails
	for i := range m {
		save[i] = l.P[i*b+i]
	}
	for i := range m {
		copy(l.P[i*b:i*b+i+1], l.L[i*b:i*b+i+1])
	}
	if _, ok := lapack64.Potri(blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: m, Stride: b, Data: l.P}); !ok {
		// Rebuild the lower triangle from the intact upper one.
		for i := range m {
			l.P[i*b+i] = save[i]
			for j := i + 1; j < m; j++ {
				l.P[j*b+i] = l.P[i*b+j]
			}
		}
		return
	}
	for i := range m {
		for j := i + 1; j < m; j++ {
			l.P[i*b+j] = l.P[j*b+i]
		}
	}
}

// Transform writes the projection of x onto the k published components
// into dst. Cost O(Bd + Bk); it does not allocate when dst has length k.
func (l *IKPCA) Transform(dst, x []float64) ([]float64, error) {
	dst = prepareDst(dst, l.k)
	_, _, err := l.project(dst, x)
	return dst, err
}

// project computes y = Aᵀk_D(x) − c and returns k(x,x) and k_D(x)ᵀa.
func (l *IKPCA) project(dst, x []float64) (kxx, ka float64, err error) {
	if err := checkInput(x, l.d); err != nil {
		return 0, 0, err
	}
	if !l.ready {
		return 0, 0, ErrNotReady
	}
	l.bind()
	m := l.rows.Len()
	kr := l.rows.Row(l.kr[:m], x, norm2(x))
	copy(dst, l.c)
	blas64.Implementation().Dgemv(blas.Trans, m, l.k, 1, l.A, l.k, kr, 1, -1, dst, 1)
	kxx = l.cfg.Kernel.Self(x)
	if !finite(kxx) || !finiteAll(dst) {
		return 0, 0, fmt.Errorf("%w: kernel value overflows for this input", ErrNumerical)
	}
	return kxx, dot(kr, l.a[:m]), nil
}

// Score is Transform plus the novelty scores of x: SPE = ‖φ(x) − m‖² − Σyᵢ²
// (with ‖φ(x) − m‖² = k(x,x) − 2zᵀμ + ‖μ‖²) and T² = Σ yᵢ²/λᵢ.
func (l *IKPCA) Score(dst, x []float64) ([]float64, Novelty, error) {
	dst = prepareDst(dst, l.k)
	kxx, ka, err := l.project(dst, x)
	if err != nil {
		return dst, Novelty{}, err
	}
	var y2, t2 float64
	for i, y := range dst {
		y2 += y * y
		if lam := l.th[i] / l.w; lam > 0 {
			t2 += y * y / lam
		}
	}
	return dst, Novelty{SPE: math.Max(kxx-2*ka+l.mmRef-y2, 0), T2: t2}, nil
}

// Summary reports the eigenvalues (covariance convention: Ritz values of
// the scatter over the weight W), the explained-variance ratio
// Σλᵢ / (E k(x,x) − ‖μ‖²) and the basis version.
func (l *IKPCA) Summary(dst []float64) Summary {
	s := Summary{BasisVersion: l.ver, Stored: l.rows.Len(), Ready: l.ready}
	l.budgetFit(&s)
	if !l.ready {
		return s
	}
	dst = prepareDst(dst, l.k)
	var sum float64
	for i := range dst {
		dst[i] = l.th[i] / l.w
		sum += dst[i]
	}
	s.Eigenvalues = dst
	m := l.rows.Len()
	total := l.kxx/l.w - dot(l.mu[:m], l.mu[:m])
	if total > 0 {
		s.ExplainedVariance = math.Min(math.Max(sum/total, 0), 1)
	}
	return s
}

// budgetFit fills the budget-fit fields of s. O(B·r).
func (l *IKPCA) budgetFit(s *Summary) {
	if l.seen == 0 {
		return
	}
	m, b := l.rows.Len(), l.b
	// Scatter held: scale·trace(S + EᵀE), E the pending rows.
	var held float64
	for i := range m {
		held += l.S[i*b+i]
	}
	for r := range l.np {
		row := l.pend[r*b : r*b+m]
		held += dot(row, row)
	}
	held *= l.sc
	if t := l.dropped + held; t > 0 {
		s.DroppedMass = math.Min(math.Max(l.dropped/t, 0), 1)
	}
	s.SwapsPer1000 = 1000 * l.swapRate
	s.MovesPer1000 = 1000 * l.moveRate
	if total := l.kxx/l.w - dot(l.mu[:m], l.mu[:m]); total > 0 {
		s.OutsideSpan = math.Min(math.Max(l.outside/total, 0), 1)
	}
	s.BudgetAdvice = BudgetAdvice(m, b, s.OutsideSpan, s.SwapsPer1000)
}

// Model returns the portable export: points = the dictionary,
// coefficients = A = L⁻ᵀU_k, offsets = U_kᵀμ.
func (l *IKPCA) Model() (*Model, error) {
	if !l.ready {
		return nil, ErrNotReady
	}
	m := l.rows.Len()
	eig := make([]float64, l.k)
	for i := range eig {
		eig[i] = l.th[i] / l.w
	}
	return modelFrom(KindIKPCA, l.cfg.Kernel, l.rows.Data(), m, l.d, l.A, l.k, l.c, eig, l.seen), nil
}

// State returns a deep copy of the learner's state.
func (l *IKPCA) State() *State { return l.StateInto(nil) }

// StateInto writes a deep copy of the learner's state into s (nil: a new
// State) and returns it, reusing s's maps and arrays (State.Reuse): once s
// has held a state of this learner's shape it allocates nothing.
func (l *IKPCA) StateInto(s *State) *State {
	m, b := l.rows.Len(), l.b
	s = s.Reuse(KindIKPCA, l.cfg, l.seen)
	defer s.Trim()
	s.Ints["m"] = int64(m)
	s.Ints["version"] = int64(l.ver)
	s.Ints["rng"] = int64(l.rng)
	s.Ints["since_refresh"] = l.since
	s.Ints["changes"] = l.changes
	s.Ints["clock"] = l.clock
	s.Ints["ready"] = 0
	if l.ready {
		s.Ints["ready"] = 1
	}
	s.Scalars["weight"] = l.w
	s.Scalars["kxx_sum"] = l.kxx
	s.Scalars["eps"] = l.eps
	s.Scalars["scale"] = l.sc
	s.Scalars["dropped"] = l.dropped
	s.Scalars["swap_rate"] = l.swapRate
	s.Scalars["move_rate"] = l.moveRate
	s.Scalars["outside"] = l.outside
	s.putMatrix("points", m, l.d, l.rows.Data())
	s.putMatrix("admitted", 1, m, l.adm)
	packInto(s.SetMatrix("L", m, m), l.L, m, m, b)
	if l.P != nil {
		packInto(s.SetMatrix("P", m, m), l.P, m, m, b)
	}
	S := s.SetMatrix("S", m, m)
	packInto(S, l.S, m, m, b)
	for i := range m { // canonical symmetric form (updates touch the lower triangle)
		for j := range i {
			S[j*m+i] = S[i*m+j]
		}
	}
	s.putMatrix("mu", 1, m, l.mu)
	s.putMatrix("mu_ref", 1, m, l.muRef)
	s.putMatrix("U", m, l.p, l.U)
	s.putMatrix("SU", m, l.p, l.SU)
	s.putMatrix("theta", 1, l.p, l.th)
	s.putMatrix("ref", m, l.k, l.ref)
	s.putMatrix("A", m, l.k, l.A)
	s.putMatrix("a", 1, m, l.a)
	s.putMatrix("c", 1, l.k, l.c)
	// The pending block has a fixed shape (r−1)×m, rows from n on zero, so
	// that the state's size does not depend on where in a block it is taken.
	s.Ints["pending"] = int64(l.np)
	pend := s.SetMatrix("pending", l.r-1, m)
	clear(pend)
	for i := range l.np {
		copy(pend[i*m:(i+1)*m], l.pend[i*b:i*b+m])
	}
	if l.cnt != nil {
		s.putMatrix("weight_of", 1, m, l.cnt)
		s.putMatrix("absorbed", m, l.d, l.acc)
		s.putMatrix("absorbed_n", 1, m, l.accN)
		s.putMatrix("born", 1, m, l.born)
		s.putMatrix("kself", 1, m, l.kself)
		s.Ints["absorb_clock"] = l.aclock
		s.Ints["last_move"] = l.lastMove
	}
	return s
}

// Restore replaces the state with s after checking kind, config, shapes
// and finiteness; on error the learner is unchanged.
func (l *IKPCA) Restore(s *State) error {
	r := &stateReader{s: s}
	r.header(KindIKPCA, l.cfg)
	if r.err != nil {
		return r.err
	}
	m := int(r.int("m", 0, int64(l.b)))
	ver := r.int("version", 0, math.MaxInt64)
	rng := r.int("rng", math.MinInt64, math.MaxInt64)
	since := r.int("since_refresh", 0, math.MaxInt64)
	changes := r.int("changes", 0, math.MaxInt64)
	clock := r.int("clock", 0, math.MaxInt64)
	ready := r.int("ready", 0, 1)
	w := r.scalar("weight", 0, math.MaxFloat64)
	kxx := r.scalar("kxx_sum", -math.MaxFloat64, math.MaxFloat64)
	eps := r.scalar("eps", 0, math.MaxFloat64)
	sc := r.scalar("scale", 1e-300, math.MaxFloat64)
	// Budget-fit figures added later: a snapshot taken before has none
	// (they restart at 0).
	dropped := r.optionalScalar("dropped", 0, math.MaxFloat64)
	swapRate := r.optionalScalar("swap_rate", 0, 1)
	moveRate := r.optionalScalar("move_rate", 0, 1)
	outside := r.optionalScalar("outside", 0, math.MaxFloat64)
	pts := r.matrix("points", m, l.d)
	adm := r.matrix("admitted", 1, m)
	L := r.matrix("L", m, m)
	var P []float64
	if l.P != nil {
		P = r.matrix("P", m, m)
	}
	S := r.matrix("S", m, m)
	mu := r.matrix("mu", 1, m)
	muRef := r.matrix("mu_ref", 1, m)
	U := r.matrix("U", m, l.p)
	SU := r.matrix("SU", m, l.p)
	th := r.matrix("theta", 1, l.p)
	ref := r.matrix("ref", m, l.k)
	A := r.matrix("A", m, l.k)
	a := r.matrix("a", 1, m)
	c := r.matrix("c", 1, l.k)
	np := int(r.int("pending", 0, int64(l.r-1)))
	pend := r.matrix("pending", l.r-1, m)
	var cnt, acc, accN, born, kself []float64
	var aclock, lastMove int64
	if l.cnt != nil {
		cnt = r.matrix("weight_of", 1, m)
		acc = r.matrix("absorbed", m, l.d)
		accN = r.matrix("absorbed_n", 1, m)
		born = r.matrix("born", 1, m)
		kself = r.matrix("kself", 1, m)
		aclock = r.int("absorb_clock", 0, math.MaxInt64)
		lastMove = r.int("last_move", 0, math.MaxInt64)
	}
	if r.err == nil {
		for i := range m {
			if !(L[i*m+i] > 0) {
				r.fail("matrix \"L\" has a non-positive diagonal at %d", i)
				break
			}
		}
	}
	if r.err == nil && ready == 1 && (m < l.k || w <= 0) {
		r.fail("ready with %d members and weight %v", m, w)
	}
	if r.err != nil {
		return r.err
	}
	b := l.b
	clear(l.L)
	clear(l.P)
	clear(l.S)
	for i := range m {
		copy(l.L[i*b:i*b+m], L[i*m:(i+1)*m])
		if l.P != nil {
			copy(l.P[i*b:i*b+m], P[i*m:(i+1)*m])
		}
		copy(l.S[i*b:i*b+m], S[i*m:(i+1)*m])
	}
	l.rows.Reset(pts, m)
	for i := range np {
		copy(l.pend[i*b:i*b+m], pend[i*m:(i+1)*m])
	}
	l.np = np
	for _, v := range []struct {
		dst, src []float64
	}{{l.adm, adm}, {l.mu, mu}, {l.muRef, muRef}, {l.U, U}, {l.SU, SU}, {l.th, th}, {l.ref, ref}, {l.A, A}, {l.a, a}, {l.c, c},
		{l.cnt, cnt}, {l.acc, acc}, {l.accN, accN}, {l.born, born}, {l.kself, kself}} {
		clear(v.dst)
		copy(v.dst, v.src)
	}
	l.dropped, l.swapRate, l.moveRate, l.outside, l.aclock, l.lastMove = dropped, swapRate, moveRate, outside, aclock, lastMove
	l.seen, l.ver, l.rng = s.Seen, uint64(ver), uint64(rng)
	l.since, l.changes, l.clock, l.ready = since, changes, clock, ready == 1
	l.w, l.kxx, l.eps, l.sc = w, kxx, eps, sc
	l.mmRef = dot(l.muRef[:m], l.muRef[:m])
	return nil
}

// centroidStep is ρ of the centroid policy: a member moves to the mean of
// what it stands for once the observations it absorbed since its last move
// weigh ρ times its current position's weight (a member thus moves at
// weights 1, 2, 4, 8, …: O(log N) moves each, each one an eviction and an
// admission).
const centroidStep = 1

// moveGap is the least number of observations between two moves of the
// centroid policy: a move costs about an eviction, and on a stream where
// every point is novel the doubling schedule would otherwise move a member
// on almost every message at first. A member that is due keeps absorbing
// and moves at a later turn, further.
const moveGap = 2

// moveGapArea scales the centroid policy's least gap between two moves
// with the dictionary size m: max(moveGap, ⌈m²/moveGapArea⌉) observations.
// A move re-triangularises the factor and rotates the scatter from the
// moved member's row on: O(m·(m−j)) with a larger constant than a plain
// Learn's O(m² + md). On a stream where every point is novel the doubling
// schedule asks for about B·log₂(N/B) moves by the N-th observation (a
// move on every other message up to N ≈ 3B), so at large budgets the moves
// alone cost several plain Learns per message, for longer the larger B.
// The gap grows with m² so that their amortised cost stays a small part of
// a Learn's: 2 up to m = 256 (behaviour unchanged there), 8 at 512, 32 at
// 1024, 128 at 2048. A member that is due keeps absorbing and moves,
// further, at a later turn: only the transient is slower.
const moveGapArea = 256 * 128

// moveBurstSize is the number of moves the centroid policy may make in a
// row, above 256 members (where the gap exceeds 2), when moves were not
// asked for in the preceding gaps: the rate stays one per gap, but moves
// not needed while the input stayed in known regions are made up when many
// fall due at once (a new region of the input). Issue 32: with the classes
// of the synthetic images arriving in order, at B 512 the throttle without
// bursts ended 0.0006 below the unthrottled schedule after 20B rows; with
// bursts of 32, 0.0001 above (bench/RESULTS.md §17). Below 257 members
// nothing changes (bit-identical states).
const moveBurstSize = 32

// moveAllowed is the centroid policy's rate limit: one move per gap
// observations in the long run, with bursts of up to burst moves in a row
// when moves were not asked for in the preceding gaps (the generic cell
// rate algorithm: last is the virtual time of the last move, which runs
// ahead of seen while a burst is being spent). It reports whether a move
// may happen at seen and the next virtual time if it does. With burst 1
// it is the rule before bursts: seen − last ≥ gap, and next = seen.
func moveAllowed(seen, last, gap, burst int64) (bool, int64) {
	if seen < last+gap-(burst-1)*gap {
		return false, last
	}
	return true, max(last+gap, seen)
}

// moveGap returns the least number of observations between two moves of
// the centroid policy for the current dictionary size.
func (l *IKPCA) moveGap() int64 {
	m := int64(l.rows.Len())
	return max(moveGap, (m*m+l.gapArea-1)/l.gapArea)
}

// keepsInverse reports whether an eviction policy keeps P = (K_DD+εI)⁻¹:
// lli and contribution read its diagonal to choose a victim; centroid and
// fifo never read it as a whole, and an eviction solves for the one column
// it needs (colP, two triangular solves) instead of down- and up-dating P
// on every admission and eviction and recomputing it every B changes.
func keepsInverse(eviction string) bool { return eviction != EvictCentroid && eviction != "fifo" }

// deadWeight is the weight at or below which a member of the centroid
// policy may be replaced by a new point: 1 (it stands for nothing but
// itself) without forgetting; with forgetting, 1/e of the average
// member's share W/B of the weight W ≈ 1/(1−f), which a member that stops
// absorbing falls below within about 1/(1−f) observations.
func (l *IKPCA) deadWeight() float64 {
	if l.cfg.Forget == 1 {
		return 1
	}
	return l.w / (math.E * float64(l.b))
}

// protection is the number of absorbed observations (each taken by some
// member) for which a new member of the centroid policy cannot be evicted:
// about the forgetting horizon 1/(1−f), at most 2B (with f = 1, 2B): time
// for it to gather its share of the points. Counting absorptions rather
// than observations keeps the members admitted while the dictionary fills
// (when nothing is absorbed) from all coming of age at once.
func (l *IKPCA) protection() int64 {
	if f := l.cfg.Forget; f < 1 {
		return min(int64(math.Ceil(1/(1-f))), 2*int64(l.b))
	}
	return 2 * int64(l.b)
}

// absorb is the centroid policy's step after an observation x that did not
// become a member (appended false): the member nearest to x in feature
// space (largest k(x,dⱼ)/√k(dⱼ,dⱼ), from x's kernel row kr) absorbs it,
// and moves to the weighted mean of its position and what it absorbed when
// that has grown by centroidStep. It decays every member's weight by f
// and reports whether a member moved.
func (l *IKPCA) absorb(x, kr []float64, appended bool) bool {
	m := l.rows.Len()
	if f := l.cfg.Forget; f != 1 {
		for i := range m {
			l.cnt[i] *= f
		}
	}
	if appended || m == 0 {
		return false
	}
	j, best := -1, math.Inf(-1)
	for i, v := range kr[:m] {
		if ks := l.kself[i]; ks > 0 {
			if s := v / math.Sqrt(ks); s > best {
				j, best = i, s
			}
		}
	}
	if j < 0 {
		return false
	}
	axpy(1, x, l.acc[j*l.d:(j+1)*l.d])
	l.accN[j]++
	l.aclock++
	if l.accN[j] < centroidStep*l.cnt[j] {
		return false
	}
	gap := l.moveGap()
	burst := int64(1)
	if gap > moveGap {
		burst = l.moveBurst
	}
	ok, next := moveAllowed(l.seen, l.lastMove, gap, burst)
	if !ok {
		return false
	}
	l.lastMove = next
	return l.move(j)
}

// move replaces member j by the weighted mean of its position (weight
// cntⱼ) and the accN observations it absorbed (sum acc): an eviction of j
// whose dropped coordinate is carried into the new point's direction (see
// append), so the mean and scatter are re-expressed exactly by their
// orthogonal projection on the new span; cost O(Bd + B²). The member stays
// where it is when the new point is within the admission tolerance of the
// other members' span (it would add no direction).
func (l *IKPCA) move(j int) bool {
	d, b := l.d, l.b
	m := l.rows.Len()
	w0, wa := l.cnt[j], l.accN[j]
	x := l.xb
	pt, acc := l.rows.Point(j), l.acc[j*d:(j+1)*d]
	for i := range x {
		x[i] = (w0*pt[i] + acc[i]) / (w0 + wa)
	}
	clear(acc)
	l.accN[j] = 0
	l.cnt[j] = w0 + wa
	kxx := l.cfg.Kernel.Self(x)
	kr := l.rows.Row(l.kr[:m], x, norm2(x))
	z := l.z[:m]
	copy(z, kr)
	trsvLower(m, l.L, b, z)
	if !finite(kxx) || !finiteAll(z) {
		return false
	}
	// Residual with respect to the other members: δ(x) plus the square of
	// x's coordinate along the removed direction, (P k_D(x))ⱼ/√Pⱼⱼ.
	pj := l.t1[:m]
	l.colP(j, pj) // P has no copy kept under centroid
	pjj := pj[j]
	tj := dot(pj, kr)
	if !(pjj > 0) || !(kxx-dot(z, z)+tj*tj/pjj > l.cfg.Tolerance*kxx) {
		return false
	}
	born, w := l.born[j], l.cnt[j]
	l.flush()
	l.carry = true
	l.evict(j, z, true)
	m--
	copy(l.kr[j:], l.kr[j+1:m+1])
	z = l.z[:m]
	delta := kxx - dot(z, z)
	if !(delta > 0) {
		l.carry = false
		return true
	}
	l.append(x, l.kr[:m], z, delta, kxx)
	l.born[m], l.cnt[m] = born, w
	return true
}

// Coords writes x's whitened dictionary coordinates z = L⁻¹k_D(x) into
// dst[:m] (m = Stored(); the rest of dst is zeroed) and returns dst[:m].
// zᵀz' is the kernel restricted to span φ(D), so a linear function of z is
// a kernel expansion Σⱼ αⱼk(dⱼ,x) over the dictionary with α = L⁻ᵀw
// (Zhang et al. 2010). dst must have length Budget (else it panics); nil
// is allocated. Cost O(Bd + B²); it does not change the state. Errors:
// ErrDimension, ErrNonFinite, ErrNumerical.
func (l *IKPCA) Coords(dst, x []float64) ([]float64, error) {
	dst = prepareDst(dst, l.b)
	if err := checkInput(x, l.d); err != nil {
		return dst[:0], err
	}
	m := l.rows.Len()
	z := l.rows.Row(dst[:m], x, norm2(x))
	clear(dst[m:])
	trsvLower(m, l.L, l.b, z)
	if !finiteAll(z) {
		return dst[:0], fmt.Errorf("%w: dictionary coordinates are not finite", ErrNumerical)
	}
	return z, nil
}

// Budget returns the dictionary budget B, the largest number of coordinates.
func (l *IKPCA) Budget() int { return l.b }

// CoordTransform returns the dual form of coordinate weights: α = L⁻ᵀw
// for each of the n rows of w (row-major, stride Budget, first Stored()
// entries used), written into dst (n×Stored(), row-major), so that
// wᵀz(x) = Σⱼ αⱼk(dⱼ,x). It is how a classifier on the coordinates is
// exported. dst of the wrong length panics; nil is allocated.
func (l *IKPCA) CoordTransform(dst, w []float64, n int) []float64 {
	return dualWeights(dst, w, n, l.rows.Len(), l.L, l.b)
}

// LearnTracked is Learn, and tells t of every change of the dictionary
// coordinates that Learn makes, in order, so that t can re-express what it
// defines on them (a classifier's weights) by the same transform. t is not
// retained. On error nothing changed and t was not called.
func (l *IKPCA) LearnTracked(x []float64, t CoordTracker) error {
	l.tr = t
	defer func() { l.tr = nil }()
	return l.Learn(x)
}
