package learners

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"
)

func init() { constructors[KindWindow] = func(c Config) (Learner, error) { return NewWindow(c) } }

// Window tuning constants.
const (
	// WindowMaxBudget is the largest window W accepted: the W×W Gram
	// matrix of W = 8192 already takes 512 MiB.
	WindowMaxBudget = 8192

	// windowBasisCos is the |cos| between a component and its predecessor
	// (measured on the window slots both refreshes share) below which the
	// published basis counts as changed and BasisVersion is incremented.
	windowBasisCos = 0.9
	// windowWarmIters bounds the iterations of the first publish, when the
	// iteration starts from a random basis (the window then holds k+1 points,
	// so this is cheap).
	windowWarmIters = 50
	// windowTol is the relative residual max‖K̃u − θu‖/θ₁ at which the first
	// publish and Sync stop iterating.
	windowTol = 1e-10
	// windowTiny: eigenvalues of K̃ at or below windowTiny·trace(K) count as
	// zero; their components get zero coefficients and no T² term.
	windowTiny = 1e-12
	// windowMinNorm: orthRow rejects a row when less than this fraction of
	// its norm is outside the span of the rows before it.
	windowMinNorm = 1e-8
	// windowAugMin is windowMinNorm for the augmented rows, whose images are
	// orthogonalised along with them: the rounding error of an image grows
	// by up to 1/windowAugMin, so rows almost in the span are dropped.
	windowAugMin = 1e-4
)

// Window is exact kernel PCA of the last W observations (W = Config.Budget),
// a tracker for nonstationary streams in the spirit of Hoegaerts et al.
// (2007): it keeps the window's full W×W Gram matrix K (one kernel row
// replaces the oldest point's row and column per observation, O(Wd)) and
// tracks the top eigenspace of the centred Gram K̃ = HKH (H = I − 11ᵀ/m over
// the m ≤ W stored points) with a block of p = min(2k+2, W−1) orthonormal
// centred vectors V and their images P = K·V. A row and column replacement
// is a rank-two change of K, so Learn keeps P exact in O(Wp) (a rank-one
// update of every image plus the new row's products; for centred v,
// K̃v = H·Kv). Whenever Seen is a multiple of Config.Refresh (and when the
// window fills up) a Rayleigh–Ritz step on span(V) — enlarged by augment —
// uses those exact images, O(Wp(p+k) + (p+k)³), and publishes its Ritz
// pairs; the Ritz vectors and their rotated images become the new V and P.
// Rayleigh–Ritz alone does not move the subspace towards directions
// outside it, so every multiple of Refresh at or above W/2 observations
// the refresh adds one power step of subspace iteration (V ← orth(K̃u),
// images recomputed from the Gram matrix, O(W²p)), which also washes out
// the rounding the updated images gather. Learn thus costs
// O(Wd + Wp + Wp(p+k)/Refresh + W²p/max(Refresh, W/2)) amortised, O(Wd + Wp)
// when it does not refresh; Sync runs power steps on demand.
//
// The vectors index window slots, so the slot of an evicted point is
// taken over by its successor; the entries of those fresh slots are stale
// at the next refresh. To keep the published pairs from lagging one
// refresh behind the window, each refresh enlarges the Rayleigh–Ritz space
// with copies of the top k basis vectors whose fresh entries are replaced
// by their Nyström extension (K̃v)ⱼ/θ (see augment); their images follow
// from the Gram columns of the fresh slots, and Rayleigh–Ritz cannot do
// worse than without them. On drift_stream.csv (W = 2000, k = 5,
// Refresh = 50) the published subspace has similarity ≥ 0.99999 to batch
// kernel PCA of the window at every checkpoint, and the residual
// (see Residual) is about 2e-5 in the stationary phases.
//
// The published components are frozen at each refresh, together with a
// copy of the window points they refer to, so Transform, Score and Model
// are always one consistent kernel PCA of the window as it was at the last
// refresh: with uᵢ the unit Ritz vectors and θᵢ the Ritz values of K̃,
// αᵢ = uᵢ/√θᵢ and
//
//	yᵢ(x) = Σⱼ αⱼᵢ k̃(xⱼ, x), k̃(xⱼ,x) = k(xⱼ,x) − (1/m)Σₗk(xₗ,x) − (1/m)Σₗ Kⱼₗ + (1/m²)1ᵀK1,
//
// evaluated as Σⱼ coefⱼᵢ k(xⱼ,x) − offᵢ with the coefficients and offsets
// precomputed at the refresh (Transform is O(Wd + Wk)). Eigenvalues are
// reported in the covariance convention θᵢ/m.
//
// Transform returns ErrNotReady until the window holds k+1 points (the
// centred Gram of m points has rank at most m−1), at which point the first
// refresh iterates to convergence. A component whose eigenvalue is zero
// (for instance a constant stream) projects to 0 and adds nothing to T².
//
// BasisVersion is 1 after the first publish and grows by one at every
// refresh where a component's best match in the previous basis is another
// component (order swap) or their |cos| on the shared window slots is below
// 0.9 (about 26°), or where no slot is shared (Refresh ≥ W). Signs are aligned to the
// matched previous component.
//
// Memory is fixed at construction (see MemoryBytes); Learn and Transform do
// not allocate and start no goroutines. A Window is not safe for concurrent
// use.
type Window struct {
	cfg        Config
	d, k, w, p int

	seen  int64
	ring  *kernelRows // window points by slot; m = ring.Len() ≤ W
	head  int         // slot of the oldest point once the window is full, else 0
	gram  []float64   // W×W kernel matrix of the window, slot-indexed, row-major
	since int         // observations since the last publish
	rng   uint64      // splitmix64 state for restart vectors
	block []float64   // p×W iteration basis: the first valid rows are orthonormal and centred over [0, m), zero beyond m
	valid int         // rows of block in use, ≤ min(p, m−1)
	bval  []float64   // p Ritz values that go with the block rows (from the last refresh)
	img   []float64   // p×W images K·v of the block rows for the current Gram (uncentred), kept exact by Learn

	// Published components, frozen at the last refresh.
	ready    bool
	pub      *kernelRows // the window points at the last refresh; pm = pub.Len()
	vecs     []float64   // k×W unit eigenvectors of the published K̃ (first pm entries of each row)
	eig      []float64   // k eigenvalues θ of the published K̃ (Gram convention), descending, ≥ 0
	coef     []float64   // W×k coefficients (first pm rows)
	off      []float64   // k offsets
	pubSum   float64     // 1ᵀK1 of the published window
	pubTrace float64     // trace(K̃) of the published window
	resid    float64     // relative residual of the published pairs
	version  uint64

	// Scratch, never part of the state.
	krow, rsum, saveRow []float64 // W
	diff                []float64 // W: new minus old Gram row
	y                   []float64 // p×(p+k) Ritz coordinates
	ones                []float64 // W ones, for row sums
	savePt              []float64 // d
	s1, s2, z           []float64 // (p+k)×W
	u                   []float64 // p×W
	t                   []float64 // (p+k)×(p+k)
	theta               []float64 // p+k
	tmp, avg            []float64 // k
	work                []float64 // LAPACK workspace
	cosm                []float64 // k×k
	normU, normV        []float64 // k
	sm                  []float64 // 3pk + 3k²: the small matrices of rayleighRitzAug
	gsum                []float64 // p+k
	kept                []int     // k
}

// NewWindow returns an empty sliding-window learner. cfg.Learner must be
// "window" or empty; Config.Validate checks the window's own limits:
// Components below Budget (the centred Gram of W points has rank at most
// W−1) and Budget at most WindowMaxBudget.
func NewWindow(cfg Config) (*Window, error) {
	if cfg.Learner == "" {
		cfg.Learner = KindWindow
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Learner != KindWindow {
		return nil, fmt.Errorf("%w: learner: NewWindow needs %q, got %q", ErrConfig, KindWindow, cfg.Learner)
	}
	d, k, w := cfg.Dim, cfg.Components, cfg.Budget
	p := windowBlock(k, w)
	nw := &Window{
		cfg: cfg, d: d, k: k, w: w, p: p,
		ring:    newKernelRows(cfg.Kernel, d, w),
		gram:    make([]float64, w*w),
		rng:     cfg.Seed,
		block:   make([]float64, p*w),
		img:     make([]float64, p*w),
		diff:    make([]float64, w),
		y:       make([]float64, p*(p+k)),
		pub:     newKernelRows(cfg.Kernel, d, w),
		vecs:    make([]float64, k*w),
		eig:     make([]float64, k),
		coef:    make([]float64, w*k),
		off:     make([]float64, k),
		krow:    make([]float64, w),
		rsum:    make([]float64, w),
		saveRow: make([]float64, w),
		ones:    make([]float64, w),
		savePt:  make([]float64, d),
		s1:      make([]float64, (p+k)*w),
		s2:      make([]float64, (p+k)*w),
		z:       make([]float64, (p+k)*w),
		u:       make([]float64, p*w),
		t:       make([]float64, (p+k)*(p+k)),
		theta:   make([]float64, p+k),
		tmp:     make([]float64, k),
		avg:     make([]float64, k),
		bval:    make([]float64, p),
		work:    make([]float64, windowLwork(p+k)),
		cosm:    make([]float64, k*k),
		normU:   make([]float64, k),
		normV:   make([]float64, k),
		sm:      make([]float64, 3*p*k+3*k*k),
		gsum:    make([]float64, p+k),
		kept:    make([]int, k),
	}
	for i := range nw.ones {
		nw.ones[i] = 1
	}
	return nw, nil
}

// windowBlock is the block size p = min(2k+2, W−1).
func windowBlock(k, w int) int { return min(2*k+2, w-1) }

// windowLwork is the LAPACK workspace length used for the p×p eigenproblem.
func windowLwork(p int) int {
	q := []float64{0}
	lapack64.Syev(lapack.EVCompute, blas64.Symmetric{Uplo: blas.Upper, N: p, Stride: max(1, p), Data: make([]float64, p*p)}, make([]float64, p), q, -1)
	return max(int(q[0]), 3*p)
}

// MemoryBytes is the memory held by a Window, in bytes: 8 bytes per float64
// of W² (Gram) + 2W(d+1) (window and published points with norms)
// + 3pW + 3(p+k)W (basis, its images and iteration buffers) + 2kW
// (eigenvectors, coefficients) + 5W + d + (p+k)² + p(p+k) + 2(p+k) + p + 4k²
// + 3pk + 7k + lwork (the last k are ints), with
// p = min(2k+2, W−1) and lwork gonum's optimal Dsyev workspace for p+k (at
// least 3(p+k)). At W = 2000, d = 8, k = 5 that is 33.7 MB (W = 256: 0.75 MB),
// dominated by the Gram matrix.
func (w *Window) MemoryBytes() int {
	W, d, k, p := w.w, w.d, w.k, w.p
	floats := W*W + 2*W*(d+1) + 3*p*W + 3*(p+k)*W + 2*k*W + 5*W + d + (p+k)*(p+k) + p*(p+k) + 2*(p+k) + p + 4*k*k + 3*p*k + 7*k + len(w.work)
	return 8 * floats
}

// Kind returns "window".
func (w *Window) Kind() string { return KindWindow }

// Dim returns the input dimension d.
func (w *Window) Dim() int { return w.d }

// Components returns the number k of published components.
func (w *Window) Components() int { return w.k }

// Seen returns the number of observations learned.
func (w *Window) Seen() int64 { return w.seen }

// Residual returns the relative residual max over the published components
// of ‖K̃uᵢ − θᵢuᵢ‖/θ₁ on the window of the last refresh: about 0 once the
// iteration has converged. It is 0 before the first refresh.
func (w *Window) Residual() float64 { return w.resid }

// Learn adds x to the window, evicting the oldest point when the window is
// full, keeps the basis images P = K·V exact (O(Wp)), and refreshes and
// publishes when Seen is a multiple of Config.Refresh and when the window
// becomes full (the first time the window holds k+1 points, it publishes at
// once, iterating to convergence). Cost O(Wd + Wp), plus O(Wp(p+k)) on a
// refresh and O(W²(p+k)) on a refresh with a power step. On error the
// state is unchanged.
func (w *Window) Learn(x []float64) error {
	if err := checkInput(x, w.d); err != nil {
		return err
	}
	m := w.ring.Len()
	slot := m
	if m == w.w {
		slot = w.head
	}
	// Kernel row of x against the window (the evicted point still in its
	// slot), then k(x, x) in that slot. Restore rebuilds the Gram matrix
	// with the same kernelRows.Row calls (see gramFromPoints), bit for bit.
	n := max(m, slot+1)
	row := w.krow[:n]
	w.ring.Row(row, x, norm2(x))
	row[slot] = w.cfg.Kernel.Self(x)
	for j, v := range row {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: kernel value %v against window slot %d", ErrNumerical, v, j)
		}
	}
	// Save what the insertion overwrites, then insert.
	W := w.w
	copy(w.saveRow[:n], w.gram[slot*W:slot*W+n])
	for j, v := range row {
		w.diff[j] = v - w.saveRow[j]
	}
	if m == W {
		copy(w.savePt, w.ring.Point(slot))
		w.ring.Set(slot, x)
		w.head = (w.head + 1) % W
	} else {
		w.ring.Append(x)
	}
	w.setGramRow(slot, row)
	w.seen++
	w.since++

	iters := -1
	switch {
	case !w.ready && n >= w.k+1:
		iters = windowWarmIters
	case w.ready && (n == W && m < W || w.seen%int64(w.fullPeriod()) == 0):
		iters = 1
	case w.ready && w.seen%int64(w.cfg.Refresh) == 0:
		iters = 0
	}
	if iters < 0 {
		// No refresh: bring the images up to date in place (cannot fail).
		w.updateImages(w.img, slot, n)
		return nil
	}
	tol := 0.0
	if !w.ready {
		tol = windowTol
	}
	if err := w.refresh(iters, tol, slot, n); err != nil {
		// Roll back the insertion (the images were not touched).
		w.seen--
		w.since--
		w.setGramRow(slot, w.saveRow[:n])
		if m == W {
			w.ring.Set(slot, w.savePt)
			w.head = slot
		} else {
			w.ring.Remove(m)
		}
		return err
	}
	return nil
}

// fullPeriod is the number of observations between power steps of the
// subspace iteration: the multiple of Config.Refresh nearest above W/2.
func (w *Window) fullPeriod() int {
	r := w.cfg.Refresh
	return r * max(1, (w.w/2+r-1)/r)
}

// updateImages writes into dst the images P = K·V of the committed basis
// rows for the Gram matrix after the change of row and column slot (row
// now w.krow, the difference to the old row in w.diff, n = window size):
// for i ≠ slot, Pᵢ += (Kᵢ,slot − old)·V_slot, and P_slot = K_slot·V.
// dst may be w.img (in place); otherwise the rows of w.img are copied first.
func (w *Window) updateImages(dst []float64, slot, n int) {
	W, q := w.w, w.valid
	if q == 0 {
		return
	}
	if &dst[0] != &w.img[0] {
		copy(dst[:q*W], w.img[:q*W])
	}
	bl := blas64.Implementation()
	bl.Dger(q, n, 1, w.block[slot:], W, w.diff[:n], 1, dst, W)
	bl.Dgemv(blas.NoTrans, q, n, 1, w.block, W, w.krow[:n], 1, 0, dst[slot:], W)
}

// setGramRow writes row (length ≥ slot+1, the window size) as row and
// column slot of the Gram matrix.
func (w *Window) setGramRow(slot int, row []float64) {
	W := w.w
	copy(w.gram[slot*W:slot*W+len(row)], row)
	for j, v := range row {
		w.gram[j*W+slot] = v
	}
}

// Sync runs up to iters subspace iterations (power steps) on the current
// window, stopping early once the relative residual is below 1e-10, and
// publishes the result, so the published components are the window's exact
// kernel PCA to that accuracy (as of now). Use it before exporting a model
// or at checkpoints when Refresh is large. It costs O(W²(p+k)) per
// iteration. It returns ErrNotReady while the window holds fewer than k+1
// points and ErrConfig for iters < 1; on error the state is unchanged.
func (w *Window) Sync(iters int) error {
	if iters < 1 {
		return fmt.Errorf("%w: window: sync needs iters ≥ 1, got %d", ErrConfig, iters)
	}
	if w.ring.Len() < w.k+1 {
		return fmt.Errorf("%w: window holds %d points, needs %d", ErrNotReady, w.ring.Len(), w.k+1)
	}
	return w.refresh(iters, windowTol, -1, 0)
}

// refresh runs Rayleigh–Ritz on the committed basis (enlarged by augment)
// with its exact images, then up to iters power steps (each with
// Rayleigh–Ritz), stopping when the residual falls below tol, commits the
// Ritz vectors as the new basis with their images and publishes the Ritz
// pairs. slot ≥ 0 says that the images in w.img predate the change of that
// Gram row (see updateImages; n is the window size). On error nothing is
// changed.
func (w *Window) refresh(iters int, tol float64, slot, n int) error {
	rng := w.rng
	pe, res, err := w.iterate(iters, tol, slot, n)
	if err != nil {
		w.rng = rng
		return err
	}
	W, m := w.w, w.ring.Len()
	fm := float64(m)
	bl := blas64.Implementation()
	copy(w.block[:pe*W], w.u[:pe*W])
	copy(w.bval, w.theta[:pe])
	w.valid = pe
	w.resid = res
	// P = K·u = K̃·u + (rᵀu/m)·1 for centred u.
	for c := range pe {
		pc := w.img[c*W : c*W+m]
		copy(pc, w.s2[c*W:c*W+m])
		mean := bl.Ddot(m, w.rsum, 1, w.u[c*W:c*W+m], 1) / fm
		for j := range pc {
			pc[j] += mean
		}
	}
	w.publish()
	return nil
}

// iterate runs the iteration from copies of the committed basis and its
// images into scratch. It leaves the Ritz vectors of the last Rayleigh–Ritz
// step in w.u and their images K̃u in w.s2 (rows, by descending Ritz value
// w.theta), and returns the number of basis rows pe and the relative
// residual of the last step. It writes only scratch buffers and w.rng.
func (w *Window) iterate(iters int, tol float64, slot, n int) (int, float64, error) {
	W, m := w.w, w.ring.Len()
	pe := min(w.p, m-1)
	src, img := w.s1, w.z
	valid := w.valid
	w.rowSums(m)
	copy(src[:valid*W], w.block[:valid*W])
	if slot >= 0 {
		w.updateImages(img, slot, n)
	} else {
		copy(img[:valid*W], w.img[:valid*W])
	}
	for c := range valid {
		centre(img[c*W : c*W+m]) // K̃v = H(Kv) for centred v
	}
	// New rows (the window grew, or the first refresh): random, centred,
	// orthonormal, with images from the Gram matrix.
	for c := valid; c < pe; c++ {
		if !w.randomRow(src, c, m) {
			return 0, 0, fmt.Errorf("%w: window: cannot extend the basis to %d vectors", ErrNumerical, pe)
		}
	}
	w.images(src, img, valid, pe, m)
	na := w.augment(src, img, pe, m)
	var res float64
	for it := 0; ; it++ {
		var err error
		if it == 0 && na > 0 {
			res, err = w.rayleighRitzAug(src, img, pe, na, m)
		} else {
			res, err = w.rayleighRitz(src, img, pe, pe, m)
		}
		if err != nil {
			return 0, 0, err
		}
		if it == iters || res <= tol {
			break
		}
		// Power step: the next basis is K̃u orthonormalised, with its
		// images recomputed from the Gram matrix, which also washes out
		// the rounding errors the updated images have gathered.
		copy(src[:pe*W], w.s2[:pe*W])
		for c := range pe {
			if !w.orthRow(src, nil, c, m, windowMinNorm) && !w.randomRow(src, c, m) {
				return 0, 0, fmt.Errorf("%w: window: basis vector %d collapsed", ErrNumerical, c)
			}
		}
		w.images(src, img, 0, pe, m)
	}
	return pe, res, nil
}

// images writes K̃·v into img for the rows v of src in [r0, r1) (centred
// over [0, m)), by the Gram matrix: O(m²(r1−r0)).
func (w *Window) images(src, img []float64, r0, r1, m int) {
	if r1 <= r0 {
		return
	}
	W := w.w
	bl := blas64.Implementation()
	for i := range m {
		bl.Dgemv(blas.NoTrans, r1-r0, m, 1, src[r0*W:], W, w.gram[i*W:i*W+m], 1, 0, img[r0*W+i:], W)
	}
	for c := r0; c < r1; c++ {
		centre(img[c*W : c*W+m])
	}
}

// rowSums writes the row sums of the window's Gram into w.rsum.
func (w *Window) rowSums(m int) {
	blas64.Implementation().Dgemv(blas.NoTrans, m, m, 1, w.gram, w.w, w.ones, 1, 0, w.rsum, 1)
}

// augment prepares up to k extra directions for the Rayleigh–Ritz step
// (see rayleighRitzAug): for each leading basis row v (Ritz value θ from
// the last refresh), the correction e = δ − (1ᵀδ/m)·1 that replaces v's
// entries at the window slots written since the last refresh (still the
// coordinates of the evicted points, or zeros) by their Nyström extension
// vⱼ + δⱼ = (K̃v⁰)ⱼ/θ, v⁰ the row with those entries zeroed and centred.
// It leaves δ in the fresh slots of the first rows of w.s2 and the images
// K̃e = H(Kδ − (1ᵀδ/m)·r) (r the row sums) in the rows of img after pe,
// and returns the number na of corrections. The products with v⁰ come
// from the exact images: K_j·v⁰ = (Kv)_j − K_{j,F}·v_F + (1ᵀv_F/m)·r_j (F
// the fresh slots), O(f²k); the images cost O(f·W·k) for f fresh slots.
// It returns 0 when no slot is fresh, more than half of the window is,
// or the basis is new.
func (w *Window) augment(src, img []float64, pe, m int) int {
	W := w.w
	na := min(w.k, w.valid)
	if na == 0 || w.since == 0 || 2*w.since > m {
		return 0
	}
	for c := range na {
		if !(w.bval[c] > 0) {
			na = c
			break
		}
	}
	if na == 0 {
		return 0
	}
	bl := blas64.Implementation()
	fm := float64(m)
	fresh := w.freshSlots(m)
	var rtot float64 // 1ᵀr
	for _, v := range w.rsum[:m] {
		rtot += v
	}
	d := w.s2
	for c := range na {
		v := src[c*W : c*W+m]
		var sf, rf float64 // 1ᵀv_F, rᵀv_F
		for _, r := range fresh {
			for j := r[0]; j < r[1]; j++ {
				sf += v[j]
				rf += w.rsum[j] * v[j]
			}
		}
		s := sf / fm
		// (K̃v⁰)ⱼ = img_j + rᵀv_F/m + s·(r_j − 1ᵀr/m) − K_{j,F}·v_F; the last
		// term is added below.
		for _, r := range fresh {
			for j := r[0]; j < r[1]; j++ {
				d[c*W+j] = img[c*W+j] + rf/fm + s*(w.rsum[j]-rtot/fm)
			}
		}
	}
	for _, ra := range fresh {
		for _, rb := range fresh {
			if ra[1] > ra[0] && rb[1] > rb[0] {
				serialDgemm(blas.NoTrans, blas.NoTrans, na, ra[1]-ra[0], rb[1]-rb[0], -1, src[rb[0]:], W, w.gram[rb[0]*W+ra[0]:], W, 1, d[ra[0]:], W)
			}
		}
	}
	for c := range na {
		var sum float64
		for _, r := range fresh {
			for j := r[0]; j < r[1]; j++ {
				delta := d[c*W+j]/w.bval[c] - src[c*W+j]
				d[c*W+j] = delta
				sum += delta
			}
		}
		w.normU[c] = sum // 1ᵀδ
		clear(img[(pe+c)*W : (pe+c)*W+m])
	}
	aimg := img[pe*W:]
	for _, r := range fresh {
		a, b := r[0], r[1]
		if b > a {
			serialDgemm(blas.NoTrans, blas.NoTrans, na, m, b-a, 1, d[a:], W, w.gram[a*W:], W, 1, aimg, W)
		}
	}
	for c := range na {
		ai := aimg[c*W : c*W+m]
		bl.Daxpy(m, -w.normU[c]/fm, w.rsum, 1, ai, 1)
		centre(ai)
	}
	return na
}

// rayleighRitzAug is rayleighRitz on span(V, e₁…e_na), the pe orthonormal
// rows V of src (images G = K̃V in img) and the corrections of augment,
// without forming an orthonormal basis of the corrections explicitly: the
// e are zero outside the f fresh slots up to a constant, so their inner
// products with V and G and with each other cost O(f(p+k)k), and the
// Gram–Schmidt step e⊥ = L⁻¹(e − CᵀV) (C = V·eᵀ, LLᵀ = eeᵀ − CᵀC by a
// Cholesky factorisation that drops a correction whose part outside the
// span is below windowAugMin of the norm of v + e) is applied to the
// projected q×q matrix instead of to the vectors. The Ritz vectors are
// then u = (y_V − gCᵀ)·V + g·e with g = y_Z·L⁻¹, and their images
// (y_V − gCᵀ)·G + g·K̃e: O(W·p·(p+k)) in all.
func (w *Window) rayleighRitzAug(src, img []float64, pe, na, m int) (float64, error) {
	a := w.newAugBlocks(pe, na, m)
	w.augInner(&a, src, img)
	if a.factor() == 0 {
		return w.rayleighRitz(src, img, pe, pe, m)
	}
	a.compact(img, w.w)
	q := pe + a.nk
	w.augProject(&a, src, img, q)
	if err := w.ritzSolve(q, pe); err != nil {
		return 0, err
	}
	w.augVectors(&a, src, img, q)
	return w.ritzResidual(q, m), nil
}

// augBlocks holds the small matrices of rayleighRitzAug, views into the
// window's scratch: pe rows V (src) and na corrections e over the first m
// slots, of which nk are kept.
type augBlocks struct {
	pe, na, nk, m int
	fresh         [2][2]int // the fresh slot ranges, where e is not constant
	d             []float64 // the corrections' δ rows (w.s2), stride W
	cm, ave, rr   []float64 // pe×na, stride na: C = V·eᵀ, AVE = G·eᵀ, R
	ee, aee, lo   []float64 // na×na: EE = eeᵀ, AEE = e·(K̃e)ᵀ, L (Cholesky of S)
	gs            []float64 // pe+na: row sums of the images
	ks            []int     // the kept corrections, in order
	mu            []float64 // na: the corrections' means
}

func (w *Window) newAugBlocks(pe, na, m int) augBlocks {
	sm, o := w.sm, 3*pe*na
	return augBlocks{pe: pe, na: na, m: m, fresh: w.freshSlots(m), d: w.s2,
		cm: sm[:pe*na], ave: sm[pe*na : 2*pe*na], rr: sm[2*pe*na : 3*pe*na],
		ee: sm[o : o+na*na], aee: sm[o+na*na : o+2*na*na], lo: sm[o+2*na*na : o+3*na*na],
		gs: w.gsum[:pe+na], ks: w.kept[:na], mu: w.avg[:na]}
}

// augInner computes the inner products of the corrections with V, G and
// each other on the fresh slots: C = V_F·δᵀ, AVE = G_F·δᵀ − gs·μᵀ,
// EE = δδᵀ − m·μμᵀ, AEE = δ·(K̃e)_Fᵀ − μ·gsᵀ.
func (w *Window) augInner(a *augBlocks, src, img []float64) {
	W, pe, na, m := w.w, a.pe, a.na, a.m
	fm := float64(m)
	cm, ave, ee, aee, d, gs, mu := a.cm, a.ave, a.ee, a.aee, a.d, a.gs, a.mu
	for r := range pe + na {
		var s float64
		for _, v := range img[r*W : r*W+m] {
			s += v
		}
		gs[r] = s // ≈ 0: the images are centred
	}
	clear(cm)
	clear(ave)
	clear(ee)
	clear(aee)
	for _, r := range a.fresh {
		lo, hi := r[0], r[1]
		if hi <= lo {
			continue
		}
		serialDgemm(blas.NoTrans, blas.Trans, pe, na, hi-lo, 1, src[lo:], W, d[lo:], W, 1, cm, na)
		serialDgemm(blas.NoTrans, blas.Trans, pe, na, hi-lo, 1, img[lo:], W, d[lo:], W, 1, ave, na)
		serialDgemm(blas.NoTrans, blas.Trans, na, na, hi-lo, 1, d[lo:], W, d[lo:], W, 1, ee, na)
		serialDgemm(blas.NoTrans, blas.Trans, na, na, hi-lo, 1, d[lo:], W, img[pe*W+lo:], W, 1, aee, na)
	}
	for c := range na {
		mu[c] = w.normU[c] / fm
	}
	for r := range pe {
		for c := range na {
			ave[r*na+c] -= gs[r] * mu[c]
		}
	}
	for c := range na {
		for c2 := range na {
			ee[c*na+c2] -= fm * mu[c] * mu[c2]
			aee[c*na+c2] -= mu[c] * gs[pe+c2]
		}
	}
}

// factor factorises S = EE − CᵀC = LLᵀ row by row; a row whose remaining
// norm is below windowAugMin·‖v + e‖ is dropped. It sets and returns nk.
func (a *augBlocks) factor() int {
	pe, na := a.pe, a.na
	cm, ee, lo, ks := a.cm, a.ee, a.lo, a.ks
	nk := 0
	for c := range na {
		before := 1 + 2*cm[c*na+c] + ee[c*na+c] // ‖v + e‖² (v unit, centred)
		sc := lo[nk*na : nk*na+nk+1]
		for t := range nk {
			c2 := ks[t]
			s := ee[c*na+c2]
			for r := range pe {
				s -= cm[r*na+c] * cm[r*na+c2]
			}
			for i := range t {
				s -= sc[i] * lo[t*na+i]
			}
			sc[t] = s / lo[t*na+t]
		}
		after := ee[c*na+c]
		for r := range pe {
			after -= cm[r*na+c] * cm[r*na+c]
		}
		for t := range nk {
			after -= sc[t] * sc[t]
		}
		if !(before > 0) || math.IsInf(before, 0) || !(after > windowAugMin*windowAugMin*before) {
			continue
		}
		sc[nk] = math.Sqrt(after)
		ks[nk] = c
		nk++
	}
	a.nk = nk
	return nk
}

// compact keeps the columns of the kept corrections (in order, so in
// place) in C, AVE, AEE and the correction images.
func (a *augBlocks) compact(img []float64, W int) {
	pe, na, m := a.pe, a.na, a.m
	kept := a.ks[:a.nk]
	for t, c := range kept {
		if t == c {
			continue
		}
		for r := range pe {
			a.cm[r*na+t] = a.cm[r*na+c]
			a.ave[r*na+t] = a.ave[r*na+c]
		}
		copy(img[(pe+t)*W:(pe+t)*W+m], img[(pe+c)*W:(pe+c)*W+m])
	}
	for t, c := range kept {
		for t2, c2 := range kept {
			a.aee[t*na+t2] = a.aee[c*na+c2]
		}
	}
}

// augProject writes the projected q×q matrix into w.t (upper triangle of
// the correction block, both triangles of AVV): AVV = V·Gᵀ,
// AVZ = R·L⁻ᵀ with R = AVE − AVV·C, and AZZ = L⁻¹·inner·L⁻ᵀ with
// inner = AEE − CᵀAVE − AVEᵀC + CᵀAVV·C = AEE − AVEᵀC − CᵀR.
func (w *Window) augProject(a *augBlocks, src, img []float64, q int) {
	W, pe, na, nk, m := w.w, a.pe, a.na, a.nk, a.m
	bl := blas64.Implementation()
	cm, ave, rr, ee, aee, lo := a.cm, a.ave, a.rr, a.ee, a.aee, a.lo
	t := w.t[:q*q]
	for i := range pe {
		si := src[i*W : i*W+m]
		for j := i; j < pe; j++ {
			v := bl.Ddot(m, si, 1, img[j*W:j*W+m], 1)
			t[i*q+j] = v
			t[j*q+i] = v
		}
	}
	for r := range pe {
		for c := range nk {
			s := ave[r*na+c]
			for b := range pe {
				s -= t[r*q+b] * cm[b*na+c]
			}
			rr[r*na+c] = s
		}
	}
	for c := range nk {
		for c2 := c; c2 < nk; c2++ {
			s := 0.5 * (aee[c*na+c2] + aee[c2*na+c])
			for r := range pe {
				s -= ave[r*na+c]*cm[r*na+c2] + cm[r*na+c]*rr[r*na+c2]
			}
			ee[c*na+c2] = s // ee is free now: inner, upper triangle
			ee[c2*na+c] = s
		}
	}
	bl.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, pe, nk, 1, lo, na, rr, na)
	bl.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, nk, nk, 1, lo, na, ee, na)
	bl.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, nk, nk, 1, lo, na, ee, na)
	for r := range pe {
		copy(t[r*q+pe:r*q+q], rr[r*na:r*na+nk])
	}
	for c := range nk {
		for c2 := c; c2 < nk; c2++ {
			t[(pe+c)*q+pe+c2] = ee[c*na+c2]
		}
	}
}

// augVectors turns the Ritz coefficients y = [y_V y_Z] (pe×q) into vectors
// and images: g = y_Z·L⁻¹ (into rr), W_V = y_V − g·Cᵀ (into the first pe
// columns of y); u = W_V·V + g·e (e = δ on the fresh slots minus μ) into
// w.u, and s2 = y·[G; K̃e].
func (w *Window) augVectors(a *augBlocks, src, img []float64, q int) {
	W, pe, na, nk, m := w.w, a.pe, a.na, a.nk, a.m
	bl := blas64.Implementation()
	cm, rr, lo, d, mu := a.cm, a.rr, a.lo, a.d, a.mu
	y := w.y[:pe*q]
	for r := range pe {
		copy(rr[r*na:r*na+nk], y[r*q+pe:r*q+q])
	}
	bl.Dtrsm(blas.Right, blas.Lower, blas.NoTrans, blas.NonUnit, pe, nk, 1, lo, na, rr, na)
	for r := range pe {
		for b := range pe {
			s := y[r*q+b]
			for c := range nk {
				s -= rr[r*na+c] * cm[b*na+c]
			}
			y[r*q+b] = s
		}
		copy(y[r*q+pe:r*q+q], rr[r*na:r*na+nk])
	}
	serialDgemm(blas.NoTrans, blas.NoTrans, pe, m, pe, 1, y, q, src, W, 0, w.u, W)
	for r := range pe {
		ur := w.u[r*W : r*W+m]
		var shift float64
		for tt, c := range a.ks[:nk] {
			g := y[r*q+pe+tt]
			shift += g * mu[c]
			for _, f := range a.fresh {
				bl.Daxpy(f[1]-f[0], g, d[c*W+f[0]:c*W+f[1]], 1, ur[f[0]:f[1]], 1)
			}
		}
		for j := range ur {
			ur[j] -= shift
		}
	}
	serialDgemm(blas.NoTrans, blas.NoTrans, pe, m, q, 1, y, q, img, W, 0, w.s2, W)
}

// rayleighRitz computes the Ritz pairs of the q orthonormal rows of src
// with their images img = K̃·src: the top pe Ritz vectors go to w.u, their
// images to w.s2 and the values to w.theta (descending). It returns the
// relative residual max‖K̃u − θu‖/θ₁ of the top k pairs.
func (w *Window) rayleighRitz(src, img []float64, q, pe, m int) (float64, error) {
	W := w.w
	bl := blas64.Implementation()
	// T = src imgᵀ (q×q, upper triangle).
	t := w.t[:q*q]
	for a := range q {
		sa := src[a*W : a*W+m]
		for b := a; b < q; b++ {
			t[a*q+b] = bl.Ddot(m, sa, 1, img[b*W:b*W+m], 1)
		}
	}
	if err := w.ritzSolve(q, pe); err != nil {
		return 0, err
	}
	y := w.y[:pe*q]
	serialDgemm(blas.NoTrans, blas.NoTrans, pe, m, q, 1, y, q, src, W, 0, w.u, W)
	serialDgemm(blas.NoTrans, blas.NoTrans, pe, m, q, 1, y, q, img, W, 0, w.s2, W)
	return w.ritzResidual(q, m), nil
}

// ritzSolve diagonalises the q×q projected matrix in w.t (upper triangle)
// and leaves the eigenvectors of the top pe eigenvalues as the rows of
// w.y (pe×q) and the eigenvalues in w.theta, still ascending.
func (w *Window) ritzSolve(q, pe int) error {
	t, theta := w.t[:q*q], w.theta[:q]
	if !lapack64.Syev(lapack.EVCompute, blas64.Symmetric{Uplo: blas.Upper, N: q, Stride: q, Data: t}, theta, w.work, len(w.work)) {
		return fmt.Errorf("%w: window: Rayleigh–Ritz eigendecomposition failed", ErrNumerical)
	}
	for _, v := range theta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: window: Ritz value %v", ErrNumerical, v)
		}
	}
	// Descending order: Ritz vector c uses eigenvector column q−1−c of t.
	y := w.y[:pe*q]
	for c := range pe {
		for r := range q {
			y[c*q+r] = t[r*q+q-1-c]
		}
	}
	return nil
}

// ritzResidual puts w.theta in descending order and returns the relative
// residual max‖K̃u − θu‖/θ₁ of the top k pairs in w.u, w.s2.
func (w *Window) ritzResidual(q, m int) float64 {
	W, theta := w.w, w.theta[:q]
	for a, b := 0, q-1; a < b; a, b = a+1, b-1 {
		theta[a], theta[b] = theta[b], theta[a]
	}
	var res float64
	for c := range w.k {
		uc, dc := w.u[c*W:c*W+m], w.s2[c*W:c*W+m]
		var s float64
		for j, v := range dc {
			e := v - theta[c]*uc[j]
			s += e * e
		}
		res = max(res, math.Sqrt(s))
	}
	if theta[0] > 0 {
		return res / theta[0]
	}
	return 0
}

// orthRow makes row c of b (over [0, m)) centred, orthogonal to rows 0..c−1
// and of unit norm by two passes of modified Gram–Schmidt, applying the
// same linear combinations to the rows of img (the images K̃b, which
// centring leaves unchanged) unless img is nil. It reports false when the
// row is (numerically) in the span of the previous rows: when less than
// minNorm of its norm remains.
func (w *Window) orthRow(b, img []float64, c, m int, minNorm float64) bool {
	W := w.w
	bl := blas64.Implementation()
	v := b[c*W : c*W+m]
	before := bl.Dnrm2(m, v, 1)
	if before == 0 || math.IsNaN(before) || math.IsInf(before, 0) {
		return false
	}
	for range 2 {
		centre(v)
		for r := range c {
			vr := b[r*W : r*W+m]
			g := bl.Ddot(m, vr, 1, v, 1)
			bl.Daxpy(m, -g, vr, 1, v, 1)
			if img != nil {
				bl.Daxpy(m, -g, img[r*W:r*W+m], 1, img[c*W:c*W+m], 1)
			}
		}
	}
	after := bl.Dnrm2(m, v, 1)
	if !(after > minNorm*before) {
		return false
	}
	bl.Dscal(m, 1/after, v, 1)
	if img != nil {
		bl.Dscal(m, 1/after, img[c*W:c*W+m], 1)
	}
	return true
}

// randomRow fills row c of b with seeded random values and orthonormalises
// it against rows 0..c−1; it reports false when three draws fail.
func (w *Window) randomRow(b []float64, c, m int) bool {
	v := b[c*w.w : c*w.w+m]
	for range 3 {
		for j := range v {
			v[j] = w.uniform()
		}
		if w.orthRow(b, nil, c, m, windowMinNorm) {
			return true
		}
	}
	clear(v)
	return false
}

// uniform returns a value in [−1, 1) from the window's generator.
func (w *Window) uniform() float64 { return splitmixUniform(&w.rng) }

// oldSlots returns the window slots written before the last publish (at
// least w.since observations ago) as up to two ranges [a, b) (empty ranges
// have a = b).
func (w *Window) oldSlots(m int) [2][2]int {
	n := max(m-w.since, 0) // the n oldest points
	start := 0
	if m == w.w {
		start = w.head
	}
	end := start + n
	if end <= w.w {
		return [2][2]int{{start, end}, {0, 0}}
	}
	return [2][2]int{{start, w.w}, {0, end - w.w}}
}

// freshSlots returns the window slots written since the last publish (the
// w.since newest points) as up to two ranges [a, b).
func (w *Window) freshSlots(m int) [2][2]int {
	f := min(w.since, m)
	if m < w.w {
		return [2][2]int{{m - f, m}, {0, 0}}
	}
	start := w.head - f
	if start >= 0 {
		return [2][2]int{{start, w.head}, {0, 0}}
	}
	return [2][2]int{{start + w.w, w.w}, {0, w.head}}
}

// publish freezes the Ritz pairs in w.u / w.theta as the published
// components of the current window: aligns them with the previous ones,
// computes the coefficients and offsets and copies the window points.
func (w *Window) publish() {
	W, k, m := w.w, w.k, w.ring.Len()
	fm := float64(m)
	// Total and traces of the current window's Gram (w.rsum holds its row sums).
	var sum, diag float64
	for i := range m {
		sum += w.rsum[i]
		diag += w.gram[i*W+i]
	}
	trace := diag - sum/fm
	tiny := windowTiny * math.Abs(diag)

	// Match each new component with the previous basis on the shared slots.
	changed := !w.ready
	if w.ready {
		changed = w.align(m) || changed
	}
	if changed {
		w.version++
	}

	for i := range k {
		th := w.theta[i]
		if th <= tiny {
			th = 0
		}
		w.eig[i] = th
		ui := w.u[i*W : i*W+m]
		copy(w.vecs[i*W:i*W+m], ui)
		scale := 0.0
		if th > 0 {
			scale = 1 / math.Sqrt(th)
		}
		// αᵢ = scale·uᵢ; coefⱼᵢ = αⱼᵢ − (1ᵀαᵢ)/m; offᵢ = αᵢᵀr/m − (1ᵀαᵢ)·1ᵀK1/m².
		var sa, ra float64
		for j, v := range ui {
			a := scale * v
			sa += a
			ra += a * w.rsum[j]
		}
		for j, v := range ui {
			w.coef[j*k+i] = scale*v - sa/fm
		}
		w.off[i] = ra/fm - sa*sum/(fm*fm)
	}
	w.pub.Reset(w.ring.Data(), m)
	w.pubSum = sum
	w.pubTrace = trace
	w.ready = true
	w.since = 0
}

// align flips the signs of the new components w.u to match their best
// matches in the previous basis w.vecs, comparing them on the window slots
// written before the previous publish, and reports whether the basis
// changed (order swap, |cos| below windowBasisCos, or no shared slot).
func (w *Window) align(m int) bool {
	W, k, pm := w.w, w.k, w.pub.Len()
	// cosm[i*k+l] = ⟨uᵢ, vₗ⟩ on shared slots; norms accumulated alongside.
	clear(w.cosm)
	normsU, normsV := w.normU, w.normV
	clear(normsU)
	clear(normsV)
	bl := blas64.Implementation()
	var shared int
	for _, r := range w.oldSlots(m) {
		a, b := r[0], min(r[1], pm)
		if b <= a {
			continue
		}
		shared += b - a
		for i0 := 0; i0 < k; i0 += 64 {
			for l0 := 0; l0 < k; l0 += 64 {
				bl.Dgemm(blas.NoTrans, blas.Trans, min(64, k-i0), min(64, k-l0), b-a, 1, w.u[i0*W+a:], W, w.vecs[l0*W+a:], W, 1, w.cosm[i0*k+l0:], k)
			}
		}
		for i := range k {
			ui, vi := w.u[i*W+a:i*W+b], w.vecs[i*W+a:i*W+b]
			normsU[i] += bl.Ddot(b-a, ui, 1, ui, 1)
			normsV[i] += bl.Ddot(b-a, vi, 1, vi, 1)
		}
	}
	if shared == 0 {
		return true
	}
	changed := false
	for i := range k {
		best, bc := i, 0.0
		for l := range k {
			den := math.Sqrt(normsU[i] * normsV[l])
			c := 0.0
			if den > 0 {
				c = w.cosm[i*k+l] / den
			}
			w.cosm[i*k+l] = c
			if math.Abs(c) > math.Abs(bc) {
				best, bc = l, c
			}
		}
		if best != i || math.Abs(w.cosm[i*k+i]) < windowBasisCos {
			changed = true
		}
		if bc < 0 {
			ui := w.u[i*W : i*W+m]
			for j := range ui {
				ui[j] = -ui[j]
			}
		}
	}
	return changed
}

// Transform writes the projections of x onto the published components into
// dst (see the type's comment). Cost O(Wd + Wk); it does not allocate when
// dst is given and never changes the state. It panics if dst has a length
// other than k.
func (w *Window) Transform(dst, x []float64) ([]float64, error) {
	if err := checkInput(x, w.d); err != nil {
		return nil, err
	}
	if !w.ready {
		return nil, fmt.Errorf("%w: window holds %d points and needs %d and a refresh", ErrNotReady, w.ring.Len(), w.k+1)
	}
	dst = prepareDst(dst, w.k)
	w.project(dst, x)
	return dst, nil
}

// project writes the projections into dst and returns the kernel row of x
// against the published points.
func (w *Window) project(dst, x []float64) []float64 {
	pm := w.pub.Len()
	row := w.pub.Row(w.krow, x, norm2(x))
	blas64.Implementation().Dgemv(blas.Trans, pm, w.k, 1, w.coef, w.k, row, 1, 0, dst, 1)
	for i, o := range w.off {
		dst[i] -= o
	}
	return row
}

// Score is Transform plus the novelty of x with respect to the published
// window: SPE = ‖φ(x) − m‖² − Σyᵢ² (clamped at 0) with
// ‖φ(x) − m‖² = k(x,x) − (2/m)Σⱼk(xⱼ,x) + 1ᵀK1/m², and T² = Σ yᵢ²/(θᵢ/m)
// over the components with nonzero eigenvalue.
func (w *Window) Score(dst, x []float64) ([]float64, Novelty, error) {
	if err := checkInput(x, w.d); err != nil {
		return nil, Novelty{}, err
	}
	if !w.ready {
		return nil, Novelty{}, fmt.Errorf("%w: window holds %d points and needs %d and a refresh", ErrNotReady, w.ring.Len(), w.k+1)
	}
	dst = prepareDst(dst, w.k)
	row := w.project(dst, x)
	fm := float64(w.pub.Len())
	var s float64
	for _, v := range row {
		s += v
	}
	dist := w.cfg.Kernel.Self(x) - 2*s/fm + w.pubSum/(fm*fm)
	var nov Novelty
	var yy float64
	for i, y := range dst {
		yy += y * y
		if w.eig[i] > 0 {
			nov.T2 += y * y * fm / w.eig[i]
		}
	}
	nov.SPE = max(dist-yy, 0)
	return dst, nov, nil
}

// Summary reports the published eigenvalues θᵢ/m (into dst as Transform
// does), the explained variance Σθᵢ/trace(K̃) of the published window, the
// basis version and the current window fill.
func (w *Window) Summary(dst []float64) Summary {
	s := Summary{BasisVersion: w.version, Stored: w.ring.Len(), Ready: w.ready}
	if !w.ready {
		return s
	}
	dst = prepareDst(dst, w.k)
	fm := float64(w.pub.Len())
	var sum float64
	for i, v := range w.eig {
		dst[i] = v / fm
		sum += v
	}
	s.Eigenvalues = dst
	if w.pubTrace > 0 {
		s.ExplainedVariance = min(max(sum/w.pubTrace, 0), 1)
	}
	return s
}

// Model returns the published components as a portable Model: the points
// are the window at the last refresh and Model.Transform equals Transform.
func (w *Window) Model() (*Model, error) {
	if !w.ready {
		return nil, fmt.Errorf("%w: window holds %d points and needs %d and a refresh", ErrNotReady, w.ring.Len(), w.k+1)
	}
	pm := w.pub.Len()
	fm := float64(pm)
	eig := make([]float64, w.k)
	for i, v := range w.eig {
		eig[i] = v / fm
	}
	return modelFrom(KindWindow, w.cfg.Kernel, w.pub.Data(), pm, w.d, w.coef, w.k, w.off, eig, w.seen), nil
}

// State returns a deep copy of the learner's state. Names used (m = window
// fill, pm = published window size, pe = basis rows):
//
//	Ints:     "stored" m, "head", "since", "ready" (0/1), "basis_version",
//	          "rng" (generator state, bit pattern), "basis_rows" pe, "published" pm
//	Scalars:  "pub_sum" 1ᵀK1 and "pub_trace" trace(K̃) of the published window, "residual"
//	Matrices: "points" m×d (by slot), "basis" pe×m, "basis_values" 1×pe,
//	          "basis_images" pe×m (K·basis, kept up to date by Learn),
//	          "published_points" pm×d,
//	          "vectors" k×pm, "eigenvalues" 1×k (of K̃, not /m),
//	          "coefficients" pm×k, "offsets" 1×k
//
// The Gram matrix is not stored: Restore recomputes it from "points" by
// the same kernel-row evaluations as Learn (see gramFromPoints), so a
// restored learner continues bit for bit like an uninterrupted one.
func (w *Window) State() *State {
	W, k, m, pm := w.w, w.k, w.ring.Len(), w.pub.Len()
	s := newState(KindWindow, w.cfg, w.seen)
	s.Ints["stored"] = int64(m)
	s.Ints["head"] = int64(w.head)
	s.Ints["since"] = int64(w.since)
	s.Ints["ready"] = b2i(w.ready)
	s.Ints["basis_version"] = int64(w.version)
	s.Ints["rng"] = int64(w.rng)
	s.Ints["basis_rows"] = int64(w.valid)
	s.Ints["published"] = int64(pm)
	s.Scalars["pub_sum"] = w.pubSum
	s.Scalars["pub_trace"] = w.pubTrace
	s.Scalars["residual"] = w.resid
	s.putMatrix("points", m, w.d, w.ring.Data())
	s.putMatrix("basis", w.valid, m, packRows(w.block, w.valid, m, W))
	s.putMatrix("basis_values", 1, w.valid, w.bval)
	s.putMatrix("basis_images", w.valid, m, packRows(w.img, w.valid, m, W))
	s.putMatrix("published_points", pm, w.d, w.pub.Data())
	s.putMatrix("vectors", k, pm, packRows(w.vecs, k, pm, W))
	s.putMatrix("eigenvalues", 1, k, w.eig)
	s.putMatrix("coefficients", pm, k, w.coef)
	s.putMatrix("offsets", 1, k, w.off)
	return s
}

// Restore replaces the state with s after checking it: header and config,
// counters in range and consistent with Seen (the window fill is min(Seen,
// W)), shapes and finiteness, an orthonormal centred basis, unit published
// eigenvectors, descending non-negative eigenvalues, finite kernel values
// and basis images equal to K·basis (to 1e-6 relative). The Gram matrix is
// recomputed from the points (O(W²d + W²p)). On error
// the learner is unchanged.
func (w *Window) Restore(s *State) error {
	r := &stateReader{s: s}
	r.header(KindWindow, w.cfg)
	if r.err != nil {
		return r.err
	}
	sv := w.readSaved(r, s)
	if r.err != nil {
		return r.err
	}
	if sv.check(r, w); r.err != nil {
		return r.err
	}
	// Build the new state aside, then swap it in.
	nw, err := NewWindow(w.cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	nw.seen = s.Seen
	if err := nw.install(r, sv); err != nil {
		return err
	}
	*w = *nw
	return nil
}

// windowSaved is a window state as read from a State, before it is checked
// and installed.
type windowSaved struct {
	m, head, valid, pm, since         int
	ready                             bool
	version                           int64
	rng                               uint64
	pubSum, pubTrace, resid           float64
	points, basis, bval, bimg, pubPts []float64
	vecs, eig, coef, off              []float64
}

// readSaved reads the named values with their shapes and ranges (which
// depend on the counters read first); errors accumulate in r.
func (w *Window) readSaved(r *stateReader, s *State) *windowSaved {
	W, k, d := w.w, w.k, w.d
	sv := &windowSaved{}
	m := int(r.int("stored", 0, int64(W)))
	sv.m = m
	if r.err == nil && int64(m) != min(s.Seen, int64(W)) {
		r.fail("stored %d does not match seen %d and window %d", m, s.Seen, W)
	}
	headMax := int64(0)
	if m == W {
		headMax = int64(W - 1)
	}
	sv.head = int(r.int("head", 0, headMax))
	sv.ready = r.int("ready", 0, 1) == 1
	sv.version = r.int("basis_version", 0, math.MaxInt64)
	sv.rng = uint64(r.int("rng", math.MinInt64, math.MaxInt64))
	sv.valid = int(r.int("basis_rows", 0, int64(min(w.p, max(m-1, 0)))))
	if sv.ready {
		sv.pm = int(r.int("published", int64(k+1), int64(W)))
	} else {
		r.int("published", 0, 0)
	}
	sinceMax := int64(m)
	if sv.ready {
		sinceMax = int64(w.cfg.Refresh - 1)
	}
	sv.since = int(r.int("since", 0, sinceMax))
	if r.err == nil && sv.ready && sv.version < 1 {
		r.fail("basis_version %d with published components", sv.version)
	}
	if r.err == nil && sv.ready && sv.valid < k {
		r.fail("basis_rows %d below components %d with published components", sv.valid, k)
	}
	sv.pubSum = r.scalar("pub_sum", -math.MaxFloat64, math.MaxFloat64)
	sv.pubTrace = r.scalar("pub_trace", -math.MaxFloat64, math.MaxFloat64)
	sv.resid = r.scalar("residual", 0, math.MaxFloat64)
	if r.err != nil {
		return sv
	}
	sv.points = r.matrix("points", m, d)
	sv.basis = r.matrix("basis", sv.valid, m)
	sv.bval = r.matrix("basis_values", 1, sv.valid)
	sv.bimg = r.matrix("basis_images", sv.valid, m)
	sv.pubPts = r.matrix("published_points", sv.pm, d)
	sv.vecs = r.matrix("vectors", k, sv.pm)
	sv.eig = r.matrix("eigenvalues", 1, k)
	sv.coef = r.matrix("coefficients", sv.pm, k)
	sv.off = r.matrix("offsets", 1, k)
	return sv
}

// check verifies the invariants that the shapes do not: descending
// non-negative eigenvalues (zero, with the offsets, before the first
// publication), an orthonormal basis and unit published vectors.
func (sv *windowSaved) check(r *stateReader, w *Window) {
	k, m, pm := w.k, sv.m, sv.pm
	for i, v := range sv.eig {
		if v < 0 || (i > 0 && v > sv.eig[i-1]) {
			r.fail("eigenvalues %v are not descending and non-negative", sv.eig)
			return
		}
	}
	if !sv.ready {
		for i := range k {
			if sv.eig[i] != 0 || sv.off[i] != 0 {
				r.fail("eigenvalues or offsets set without published components")
				return
			}
		}
	}
	if err := checkOrthonormal(sv.basis, sv.valid, m, true); err != nil {
		r.fail("basis: %v", err)
		return
	}
	if sv.ready {
		for i := range k {
			n := blas64.Implementation().Dnrm2(pm, sv.vecs[i*pm:(i+1)*pm], 1)
			if math.Abs(n-1) > 1e-6 {
				r.fail("vectors row %d has norm %v, want 1", i, n)
				return
			}
		}
	}
}

// install makes a checked state w's (a fresh window): the ring and its
// Gram (recomputed from the points), the basis images (checked against
// K·basis: they are updated, not recomputed, so they hold rounding errors,
// and are kept bit for bit) and the rest as read.
func (w *Window) install(r *stateReader, sv *windowSaved) error {
	W, k, m, pm, valid := w.w, w.k, sv.m, sv.pm, sv.valid
	w.ring.Reset(sv.points, m)
	w.head = sv.head
	if err := w.gramFromPoints(); err != nil {
		r.fail("%v", err)
		return r.err
	}
	bl := blas64.Implementation()
	for c := range valid {
		pc := sv.bimg[c*m : (c+1)*m]
		var big float64
		for i := range m {
			v := bl.Ddot(m, w.gram[i*W:i*W+m], 1, sv.basis[c*m:(c+1)*m], 1)
			big = max(big, math.Abs(v), math.Abs(w.gram[i*W+i]))
			w.diff[i] = v
		}
		for i := range m {
			if math.Abs(pc[i]-w.diff[i]) > 1e-6*big {
				r.fail("basis_images row %d entry %d is %v, want K·basis = %v", c, i, pc[i], w.diff[i])
				return r.err
			}
		}
		copy(w.img[c*W:c*W+m], pc)
	}
	w.since = sv.since
	w.rng = sv.rng
	for c := range valid {
		copy(w.block[c*W:c*W+m], sv.basis[c*m:(c+1)*m])
	}
	copy(w.bval, sv.bval)
	w.valid = valid
	w.ready = sv.ready
	w.pub.Reset(sv.pubPts, pm)
	for i := range k {
		copy(w.vecs[i*W:i*W+pm], sv.vecs[i*pm:(i+1)*pm])
	}
	copy(w.eig, sv.eig)
	copy(w.coef, sv.coef)
	copy(w.off, sv.off)
	w.pubSum = sv.pubSum
	w.pubTrace = sv.pubTrace
	w.resid = sv.resid
	w.version = uint64(sv.version)
	return nil
}

// gramFromPoints fills the Gram matrix of the window points in w.ring
// (with w.seen and w.head set) by the same arithmetic as Learn, so that the
// result is identical to the Gram matrix Learn built: every entry
// between two points was computed by Rows.Row for the later of the two,
// against the window as it was then, and Rows.Row computes each entry
// from that point's coordinates and cached norm at its slot (the rows are
// independent), given the number of points in the set. So the points are
// visited in the order they were learned, and for each the row is
// evaluated against the current points with the set truncated to the
// window fill at that time (the slot itself while the window was filling,
// W afterwards); only the entries against older points are kept.
func (w *Window) gramFromPoints() error {
	W, m := w.w, w.ring.Len()
	start := 0
	if m == W {
		start = w.head
	}
	view := *w.ring
	for idx := range m {
		s := (start + idx) % W
		t := w.seen - int64(m) + int64(idx) // 0-based observation number of slot s
		view.m = W
		if t < int64(W) {
			view.m = s
		}
		x := w.ring.Point(s)
		row := view.Row(w.krow, x, norm2(x))
		for i := range idx {
			j := (start + i) % W
			v := row[j]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("kernel value %v between points %d and %d", v, j, s)
			}
			w.gram[s*W+j] = v
			w.gram[j*W+s] = v
		}
		v := w.cfg.Kernel.Self(x)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("kernel value %v of point %d with itself", v, s)
		}
		w.gram[s*W+s] = v
	}
	return nil
}

// checkOrthonormal checks that the rows of the rows×cols matrix a are
// orthonormal (and, if centred, sum to zero) to 1e-6.
func checkOrthonormal(a []float64, rows, cols int, centred bool) error {
	bl := blas64.Implementation()
	for i := range rows {
		ai := a[i*cols : (i+1)*cols]
		if centred {
			var s float64
			for _, v := range ai {
				s += v
			}
			if math.Abs(s) > 1e-6*math.Sqrt(float64(cols)) {
				return fmt.Errorf("row %d sums to %v, want 0", i, s)
			}
		}
		for j := 0; j <= i; j++ {
			g := bl.Ddot(cols, ai, 1, a[j*cols:(j+1)*cols], 1)
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(g-want) > 1e-6 {
				return fmt.Errorf("rows %d and %d have inner product %v, want %v", i, j, g, want)
			}
		}
	}
	return nil
}
