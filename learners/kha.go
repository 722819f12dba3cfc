package learners

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	lpk "gonum.org/v1/gonum/lapack"
	lapack "gonum.org/v1/gonum/lapack/gonum"
)

func init() { constructors[KindKHA] = func(c Config) (Learner, error) { return NewKHA(c) } }

// Tuning constants of the kha learner.
const (
	// khaBasisCos is the |cos| between a published component and the same
	// component at the last basis version below which BasisVersion moves
	// on (about 8.1°).
	khaBasisCos = 0.99
	// khaSwapMargin is the relative margin by which a component's λ̂ must
	// exceed the λ̂ of the component published above it to take its place.
	khaSwapMargin = 0.1
	// khaLambdaFloor floors the eigenvalue estimates, relative to the mean
	// diagonal of K_DD, so that the gains ‖λ̂‖/λ̂ᵢ and T² stay finite.
	khaLambdaFloor = 1e-9
	// khaSMDMu is SMD's meta-gain μ (Config.Gain "smd"): the gain factor
	// of component i is multiplied by max(½, 1 + μ⟨Γᵢ, Vᵢ⟩/(λ̂ᵢ·V)) per
	// observation (⟨·,·⟩ the RKHS product, V the total variance).
	khaSMDMu = 0.1
	// khaSMDXi is SMD's decay ξ of the gain trace.
	khaSMDXi = 0.99
	// khaSMDMin and khaSMDMax bound the gain factors ρᵢ: without a floor a
	// few anti-correlated steps early in the warm-up replay drove a
	// component's factor to 6·10⁻⁴ on wine, and that component stalled.
	khaSMDMin, khaSMDMax = 0.5, 16
	// khaSeedStream is the second word of the PCG seed (the first is Config.Seed).
	khaSeedStream = 0x6b6861 // "kha"
)

// KHA is Kashima's kernelised generalised Hebbian algorithm (Sanger's rule
// in the RKHS, Kashima 2001 §3.3; Kim, Franz & Schölkopf 2005) with the
// KHA/et gains of Günter, Schraudolph & Vishwanathan 2007, on a fixed
// memorised set.
//
// # Model
//
// The memorised set D = {d₁ … d_B} is the first B = Config.Budget
// observations; with the default Config.Dictionary ("first") it never
// changes afterwards (with "kmeans" see below). The k directions live in its
// span, wᵢ = Σⱼ Aⱼᵢ φ(dⱼ) with A of shape B×k (the uncentred form of the
// centred expansion Σⱼ αⱼᵢ (φ(dⱼ) − m̂): A = α − c 1ᵀα), and
//
//	yᵢ(x) = ⟨wᵢ, φ(x) − m̂⟩ = (Aᵀ(k_D(x) − u))ᵢ,   k_D(x) = (k(dⱼ, x))ⱼ,
//
// which costs O(Bd + Bk) per vector.
//
// The mean m̂ is the running mean of the projections of φ(xₜ) on span(D):
// with Pφ(x) = Φ_D s(x), s(x) = K_ε⁻¹ k_D(x), K_ε = K_DD + εI, the learner
// keeps c = mean of s(xₜ) (so m̂ = Φ_D c = P m, the projection of the true
// running mean, because P is linear) and u = mean of k_D(xₜ) = K_ε c. Since
// every wᵢ lies in span(D), ⟨wᵢ, m̂⟩ = ⟨wᵢ, m⟩ = (Aᵀu)ᵢ: the projections are
// centred exactly, not just approximately; only ‖m̂‖² = cᵀu (used by the
// total variance and SPE) is the in-span part of ‖m‖².
//
// # Update
//
// Learn applies one step of Sanger's rule to the projection of the centred
// feature vector on span(D), whose coefficients are p = s(x) − c:
//
//	y = Aᵀ(k_D(x) − u)
//	wᵢ ← wᵢ + ηₜᵢ yᵢ (Pφ̃(x) − Σ_{l≤i} y_l w_l),   i.e.  A ← A + (p yᵀ − A·LT[y yᵀ])·diag(ηₜ)
//
// with ηₜ = η₀·t₀/(t + t₀) (η₀ = Config.LearningRate, t₀ = Config.Decay,
// t the number of observations before this one) and (Config.Gain "et",
// the default; "smd" below) the KHA/et gains
// ηₜᵢ = ηₜ·‖λ̂‖/λ̂ᵢ, where λ̂ᵢ is an exponential average of yᵢ² over about B
// observations (weight max(1/t, 1/B)), floored at 1e-9 × the mean diagonal
// of K_DD. As a safeguard against outliers each gain is capped so that
// ηₜᵢ‖Pφ̃(x)‖² ≤ 1 (then ηₜᵢyᵢ² ≤ 1 for a unit wᵢ, the normalised-LMS
// bound of Oja's rule); ‖Pφ̃(x)‖² = pᵀ(k_D(x) − u) costs O(B).
//
// Writing eᵢ = ηₜᵢyᵢ and v = k_D(x) − u' (u' the new mean row, so that
// K_ε p = v and pᵀv = ‖Pφ̃(x)‖²), the step is A ← A·T + p eᵀ with the k×k
// matrix T = I − N, N_{li} = y_l eᵢ for l ≤ i. The learner does not keep
// K_εA; it tracks, in k-space, the RKHS Gram matrix of the directions
// G = AᵀK_εA and their inner products H = RᵀK_εA with the reference basis R
// (the directions at the last basis version). Because AᵀK_εp = Aᵀv = y and
// pᵀK_εp = pᵀv,
//
//	G ← TᵀG T + q eᵀ + e qᵀ + (pᵀv) e eᵀ,   q = Tᵀy,     H ← H T + (Rᵀv) eᵀ,
//
// each O(k²) (T is triangular with rank-one structure: the products are
// prefix sums) after the O(Bk) product Rᵀv. Every R = Config.Refresh
// observations the learner re-orthonormalises the directions in the RKHS
// metric (Cholesky G = LLᵀ, A ← A L⁻ᵀ, H ← H L⁻ᵀ, G ← I, which is
// Gram–Schmidt and keeps the order of the components: O(Bk²)), re-sorts
// the published components by λ̂, aligns their signs with the reference
// (cosines read off H) and publishes the eigenvalues. Every R·B
// observations G and H are recomputed exactly from K_εA = L_K(L_KᵀA)
// (O(B²k)) to remove rounding drift.
//
// Per observation Learn costs the kernel row (Bd and B exps), 2B² flops for
// s(x) = K_ε⁻¹k_D(x) (forward and backward substitution with the Cholesky
// factor L_K, blocked so that all but the 16×16 diagonal blocks go through
// gonum's Dgemv), about 8Bk flops for y = Aᵀv, Rᵀv and the Sanger update
// of A, O(k²) for the tracking, Bk(k+1)/R flops amortised for the
// refreshes and O(Bk/R) for the exact recomputation. Transform costs
// O(Bd + Bk). Neither allocates (with dictionary kmeans, the Learn that
// rebases allocates what gonum's Cholesky allocates).
//
// The 2B² term cannot be avoided with an explicit A. The step adds
// K_ε⁻¹v·eᵀ to A·T; from A before and after (T invertible, e ≠ 0) that
// column is recovered in O(Bk), so keeping A costs at least one product of
// K_ε⁻¹ with a vector known only now, which with a dense factor or inverse
// is B² multiply–adds (2B² flops). y itself does not
// need it (y = Aᵀv is O(Bk)); the memorised A does. Keeping
// Ã = L_KᵀA instead, for which y = Ãᵀ(L_K⁻¹v), ‖Pφ̃(x)‖² =
// ‖L_K⁻¹v‖² and Ã ← Ã T + (L_K⁻¹v) eᵀ, halves the term to one
// substitution (B² flops), but Transform then needs A = L_K⁻ᵀÃ: either one
// more substitution per Transform, no cheaper in a pipeline that learns
// and projects every message, or a published A materialised every P
// observations (B²k/P each), which lags the learner. So the learner keeps A
// and pays the two substitutions. An explicit K_ε⁻¹ (one Dgemv) would cost
// the same flops with much worse rounding: with the default jitter κ(K_ε)
// reaches 10¹⁰ (points along a curve), and there the residuals
// K_εs − k_D(x) of the explicit inverse were 10⁷–10¹⁰ times those of
// substitution (10⁴ times with explicitly inverted diagonal blocks).
//
// # Rules
//
// Config.Rule selects one of Kashima's rules; each is a step of the form
// A ← A·T + p eᵀ with T = I − N, N = striu(n eᵀ) + diag(dg∘e) (striu: the
// part strictly above the diagonal) and eᵢ = ηₜᵢ·oᵢ, so the same O(k²)
// tracking of G and H (with q = Tᵀy) and the same refreshes serve all three:
//
//   - gha (default): eq. (12)–(13), wᵢ ← wᵢ + ηₜᵢ yᵢ (Pφ̃(x) − β Σ_{l<i} yₗwₗ
//     − yᵢwᵢ): o = y, n = βy, dg = y. β = Config.Beta, default 1 (Sanger's
//     GHA, the rule above); β = 2 is Oja's stochastic gradient ascent.
//   - oja: Oja's single-component rule, eq. (6), for each component,
//     wᵢ ← wᵢ + ηₜᵢ yᵢ (Pφ̃(x) − yᵢwᵢ) (eq. (12) with β = 0): o = y, n = 0,
//     dg = y. The components are decoupled between refreshes; the
//     refresh's Gram–Schmidt (in index order) deflates them, so component i
//     converges to the i-th eigenvector as in orthogonal iteration. Without
//     it they all turn to the first (with Refresh 1000 on the drift window
//     they collapsed and the refresh failed), so Config.Validate requires
//     Refresh ≤ k with this rule.
//   - apex: kernel APEX, eqs. (9)–(11): the outputs carry lateral weights
//     C (k×k, strictly lower triangular, zero at the start),
//     ŷᵢ = yᵢ + Σ_{l<i} Cᵢₗ ŷₗ, and wᵢ ← wᵢ + ηₜᵢ ŷᵢ (Pφ̃(x) − ŷᵢwᵢ),
//     Cᵢₗ ← Cᵢₗ − ηₜᵢ ŷᵢ (ŷₗ + ŷᵢ Cᵢₗ): o = ŷ, n = 0, dg = ŷ. This is Kung
//     and Diamantaras' APEX with the same output ŷ in every term; the
//     paper's eq. (10) mixes ỹ and y, and its eq. (11) has −ŷᵢCᵢₗ inside
//     the bracket, which makes C grow like exp(η Σ ŷᵢ²) instead of
//     decaying: we read both as typesetting slips. APEX's components are
//     the outputs, ŷ = (I − C)⁻¹Aᵀ(k_D(x) − u): each refresh first folds
//     the lateral weights into the directions, A ← A(I − C)⁻ᵀ (G and H
//     alike), C ← 0, which leaves every ŷ unchanged, and then
//     orthonormalises and publishes as for the other rules. Without the
//     fold the Gram–Schmidt would act on the wᵢ alone and break APEX's
//     balance between wᵢ and C (a linear-kernel stream published
//     eigenvalues 22, 9, 8.8 for 9, 4, 1). The gain is also capped so that
//     ηₜᵢŷᵢ² ≤ 1 (ŷ may exceed ‖Pφ̃(x)‖; the decay factors 1 − ηₜᵢŷᵢ² of
//     wᵢ and C then stay in [0, 1]).
//
// The gains ηₜᵢ and their cap (ηₜᵢ·max(1, β)·‖Pφ̃(x)‖² ≤ 1: with β > 1
// the deflation term is β times larger), λ̂ (a running mean of oᵢ², the
// outputs), the refreshes, the published order and Transform (which
// projects on the wᵢ, y = Aᵀ(k_D(x) − u); for APEX equal to ŷ right after
// a refresh, within the lateral terms learned since between refreshes) are
// the same for every rule. The per-observation cost differs only in O(k²)
// terms (APEX: the lateral weights), plus, for APEX, O(Bk²) per refresh
// for the fold.
//
// # Gain smd
//
// With Config.Gain "smd" (rule gha with β = 1 only) the gains are
// ηₜᵢ = ρᵢ·ηₜ‖λ̂‖/(λ̂ᵢV), V = the running mean of k(x,x) minus ‖m̂‖² (the
// total variance, which makes the base gain free of the kernel's scale), and
// the factors ρᵢ (1 at the start) are adapted by stochastic meta-descent in
// the RKHS (Günter, Schraudolph & Vishwanathan 2007, §4; Schraudolph 1999):
// with Γ the GHA direction of the step (A' = A + Γ·diag(η)) and the gain
// trace V ≈ ∂A/∂ln ρ (B×k, zero at the start),
//
//	ρᵢ ← clamp(ρᵢ·max(½, 1 + μ⟨Γᵢ, Vᵢ⟩/(λ̂ᵢV)), ½, 16),   V ← ξV + (Γ + ξ·dΓ(V))·diag(η),
//
// μ = 0.1, ξ = 0.99, dΓ(V) the derivative of Γ along V (the Hessian–vector
// product of SMD). ⟨Γᵢ, Vᵢ⟩ = ΓᵢᵀK_εVᵢ needs AᵀK_εV: the learner tracks
// M = AᵀK_εV in k-space like G (O(k³) per step; rotated with A at each
// refresh, recomputed exactly with G), so a step costs O(Bk) more for V
// and no extra B² term (see smdStep). The floor ½ of ρ is not in the
// paper: without it, anti-correlated steps early in the warm-up replay
// drove a component's factor to 6·10⁻⁴ on wine and it stalled. μ is
// divided by λ̂ᵢV to make it dimensionless.
//
// # Guard components and the Rayleigh–Ritz step (gain smd)
//
// GHA turns component i towards the i-th eigenvector at a rate ∝ ηᵢ(λᵢ −
// λᵢ₊₁): where λₖ and λₖ₊₁ are close, the k-th published direction can sit
// on the (k+1)-th for many passes (wine, k 5: batch λ₅ 0.0197, λ₆ 0.0167;
// seven of fifteen runs of gain smd held the sixth or seventh direction
// after 3 passes). With gain smd the learner therefore learns g guard
// components more than it publishes, g = max(2, ⌈k/2⌉) (at most B − k),
// the oversampling of subspace iteration (⌈k/4⌉ was as good on wine and
// satellite but lost 0.6 points on two_spirals after 3 passes, 2 after
// one; the guards' share of the per-observation cost is about 5–10 %
// between the two): the span of the k + g directions
// takes in the k-th eigenvector at a rate set by λₖ − λₖ₊g₊₁. Every sync
// (with gain smd the first multiple of R from B on, so about every B
// observations) it takes a Rayleigh–Ritz step on that span: with the
// covariance of the outputs over every observation so far,
//
//	C = Aᵀ(S/n)A − (Aᵀu)(Aᵀu)ᵀ,   S = Σₜ k_D(xₜ)k_D(xₜ)ᵀ (the row moment, B×B),
//
// carried to the orthonormalised directions and diagonalised, C = UΘUᵀ, the
// directions are rotated to the Ritz vectors, A ← AU (largest θ first; G
// stays I; H, V and M are rotated alike, λ̂ ← θ), so that the published
// top k are the best k directions of the learned span for the stream's own
// covariance (not that of the memorised set: its 200 points were too few
// a sample on satellite, where that variant's similarity fell by up to 0.1
// on some seeds). Published
// are the first k in the order of λ̂ with the hysteresis below; a new
// component inherits the published place and sign of the old one it is
// closest to. S costs B² flops per observation (a rank-one update) and B²
// values; the step costs O(B²k) (about Bk per observation) and an O(k³)
// eigenproblem; a kmeans rebase maps S ← QSQᵀ with Q = K(D',D)K_ε⁻¹ (the
// kernel rows of the projections, as u' below; O(B³) more per rebase).
// The step starts once S holds B observations (always, for a fresh
// learner, after the warm-up).
//
// # Dictionary kmeans
//
// A first-B memorised set bounds what any gain can reach: on satellite
// (B 200, k 8) the in-span optimum of the first 200 shuffled rows is about
// 0.977–0.988 in similarity to batch KPCA, where 200 online k-means
// centroids give 0.998. With Config.Dictionary "kmeans" the learner keeps
// B centroids (B×d, starting as the memorised points, count 1 each) and,
// after each step, moves the centroid of the member nearest to x in the
// feature space, argminⱼ k(dⱼ,dⱼ) − 2k(dⱼ,x) (read off the step's kernel
// row, O(B + d)), to the running mean of its observations (MacQueen). At
// 2B, 4B, 8B, 16B observations and then every 16B, rebase installs the
// centroids as the memorised set D' and projects the state on their span:
// every coefficient vector a (the columns of A, of the reference R and of
// smd's trace V) becomes K'_ε⁻¹K(D',D)a, the mean row u' = K(D',D)c (the
// kernel row of the projected mean: the true running mean row over D' is
// not known) and c' = K'_ε⁻¹u'; G, H and M are recomputed exactly and the
// next refresh re-orthonormalises. A rebase costs O(B²(d + 2k) + B³/3)
// (the cross kernel, the factor of K'_ε, two triangular solves per
// column) and allocates what gonum's Cholesky allocates (with gain smd
// also two B×B matrices for the row moment's map S ← QSQᵀ, 4B³ more
// flops); if K'_ε is not
// positive definite the old set is kept.
//
// # Warm-up
//
// The first B observations are only stored. When the set is complete the
// learner factors K_ε (ε = Config.Jitter × the mean diagonal of K_DD),
// draws a random A with standard normal entries from Config.Seed,
// orthonormalises it in the RKHS, and then applies the Hebbian update to the
// B stored points in their arrival order (as if they had been learned
// online), which costs O(B³) once. There is no batch eigen-decomposition:
// kha is a genuine Hebbian learner. Transform returns ErrNotReady until
// the set is complete and at least k+1 observations were seen.
//
// # Eigenvalues and novelty
//
// Eigenvalues are the λ̂ᵢ ≈ E yᵢ² (covariance-operator convention), as
// published at the last refresh, largest first. The published order
// follows λ̂ with a 10 % hysteresis (a component overtakes the one above it
// only when its λ̂ is larger by more than 10 %), so that near-equal
// eigenvalues do not swap on sampling noise; the published eigenvalues are
// the isotonic (pool-adjacent-violators) fit of λ̂ in that order, which
// averages the few values the hysteresis leaves out of order. The total variance is the
// running mean of k(x,x) minus ‖m̂‖² = cᵀu, and ExplainedVariance is Σλ̂ᵢ over
// it, clamped to [0, 1]. Novelty: SPE = ‖φ(x) − m̂‖² − Σyᵢ² with
// ‖φ(x) − m̂‖² = k(x,x) − 2cᵀk_D(x) + cᵀu, clamped at 0 (the directions are
// only approximately orthonormal between refreshes); T² = Σ yᵢ²/λ̂ᵢ.
//
// # State
//
// State uses, besides Seen and Config:
//
//   - "points": the stored points, n×d (n = min(Seen, B));
//
// and once the set is complete (Seen ≥ B) the names below, plus, with rule
// apex, Matrices "lateral" (C, k×k, strictly lower triangular), and with
// gain smd Matrices "gain_scale" (ρ, 1×k, in [½, 16]), "gain_trace" (V,
// B×k), "trace_gram" (M = AᵀK_εV, k×k) and "row_moment" (S, B×B,
// symmetric) with Scalars "moment_count" (the observations in S). With
// gain smd, k in the shapes below is the number of components learned
// (Config.Components plus the guards), the published ones being the first
// Config.Components of "perm". The rule, β and the gain are part of
// State.Config, so a learner with another rule or gain refuses the state (a
// snapshot from before Config.Gain has the default gain et and loads
// unchanged). A gain smd snapshot from before the guards (shapes with
// Config.Components columns, no "row_moment" or "moment_count") loads and
// goes on learning its Config.Components directions without guards, its
// row moment starting empty (the Rayleigh–Ritz step resumes once it holds B
// observations):
//
//   - Ints "version" (BasisVersion ≥ 1), "since_refresh" ∈ [0, R),
//     "since_sync" ∈ [0, R·B);
//   - Scalars "kxx" (running mean of k(x,x));
//   - Matrices "coef" (A, B×k), "ref" (R: A at the last basis version,
//     B×k), "gram" (G = AᵀK_εA, k×k, symmetric), "ref_gram" (H = RᵀK_εA,
//     k×k), "mean_coef" (c, 1×B), "mean_row"
//     (u, 1×B), "lambda" (λ̂ in internal order, 1×k, ≥ 0), "eigenvalues"
//     (published, 1×k, ≥ 0, non-increasing), "perm" and "ref_perm" (published
//     position → internal component, permutations of 0…k−1), "sign" and
//     "ref_sign" (±1 per internal component).
//
// The Cholesky factor of K_ε is not stored: Restore recomputes it from the
// points (O(B³)), which keeps snapshots at O(Bd + Bk) values. A state of an
// earlier version, with "gram_coef" (K_εA, B×k) in place of "gram" and
// "ref_gram", is still accepted: G and H are computed from it.
//
// A KHA is not safe for concurrent use.
type KHA struct {
	cfg     Config
	d, k, b int // k: the components learned (Config.Components plus the guards)
	kp      int // the components published (Config.Components)
	seen    int64
	rows    *kernelRows

	full      bool // the memorised set is complete and the Hebbian state valid
	meanDiag  float64
	floor     float64   // eigenvalue floor
	chol      []float64 // b×b lower Cholesky factor of K_ε
	invDiag   []float64 // b: 1/diag(chol)
	a, a2     []float64 // b×k: A and the next A
	g, g2     []float64 // k×k: G = AᵀK_εA (tracked) and the next G
	h, h2     []float64 // k×k: H = RᵀK_εA (R = ref, tracked) and the next H
	c, u      []float64 // b: mean coefficients and mean kernel row
	c2, u2    []float64 // b: the next c and u
	lam, lam2 []float64 // k: eigenvalue estimates (internal order) and the next ones
	kxx       float64   // running mean of k(x,x)

	sinceRefresh, sinceSync int64

	perm    []int     // k: published position → internal component
	sign    []float64 // k: sign of each internal component
	pubEig  []float64 // k: published eigenvalues
	ref     []float64 // b×k: A at the last basis version
	refPerm []int
	refSign []float64
	version uint64

	// the update rule (Config.Rule): N = striu(nv eᵀ) + diag(dg∘e) in
	// A ← A(I − N) + p eᵀ (see the type's documentation)
	beta     float64   // β of eq. (12) (gha), 0 for oja and apex
	nv, dg   []float64 // k: for gha with β = 1 both alias y; oja: nv zero; apex: nv zero, dg = yo
	apex     bool
	lat      []float64 // k×k, apex only: lateral weights C (strictly lower)
	lat2, yo []float64 // apex only: the next C, and the outputs ŷ with the lateral terms

	// gain smd (Config.Gain): gain factors ρ, the gain trace V (b×k,
	// ∂A/∂ln ρ) and M = AᵀK_εV (k×k), each with its next value, and k×k
	// scratch for M's update; nil otherwise
	smd        bool
	rho, rho2  []float64
	vt, vt2    []float64
	mt, mt2    []float64
	dy         []float64 // k: Vᵀv
	sm, qm, zm []float64 // k×k
	totalVar   float64   // total variance of the current step (smd's base gain)

	// dictionary kmeans (Config.Dictionary): the centroids (b×d) and their
	// counts, k(dⱼ,dⱼ) of the members, the points before a rebase (b×d),
	// and the rebase schedule; nil otherwise
	km                    bool
	cent, cnt, selfK      []float64
	oldPts                []float64
	nextRebase, rebaseGap int64
	// during LearnTracked: the tracker told of a rebase (Map when it is a
	// CoordMapper, else every coordinate dropped and appended anew)
	tr CoordTracker

	// gain smd's Rayleigh–Ritz step: the covariance of the outputs over
	// the memorised set (k×k), the rotation, the eigenvalues and LAPACK
	// workspace of the small eigenproblem, the matching of old to new
	// components; nil otherwise
	cov, rot      []float64
	theta, rrWork []float64
	match         []int
	sumKK         []float64 // b×b: the row moment S = Σₜ k_D(xₜ)k_D(xₜ)ᵀ (upper triangle used)
	momentN       float64   // the number of observations in S

	// scratch
	kr, s, v []float64 // b
	ka       []float64 // b×k: K_ε A for the exact recomputations
	y, eta   []float64 // k
	zr, acc  []float64 // k
	w        []float64 // k×k
}

// NewKHA returns an empty kha learner for cfg. An empty cfg.Learner means
// "kha"; any other name is an error. All memory is allocated here (see
// MemoryBytes).
func NewKHA(cfg Config) (*KHA, error) {
	if cfg.Learner == "" {
		cfg.Learner = KindKHA
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Learner != KindKHA {
		return nil, fmt.Errorf("%w: learner: NewKHA given %q", ErrConfig, cfg.Learner)
	}
	return newKHA(cfg, cfg.Components+khaGuards(cfg)), nil
}

// khaGuards is the number of guard components of a learner for cfg (valid,
// defaults applied): with gain smd ⌈k/2⌉ but at least 2 (no more than the
// budget leaves), else 0. See "Guard components" in the type's
// documentation.
func khaGuards(cfg Config) int {
	if cfg.Gain != GainSMD {
		return 0
	}
	return max(0, min(max(2, (cfg.Components+1)/2), cfg.Budget-cfg.Components))
}

// newKHA allocates a learner for cfg (valid, defaults applied) that learns
// k ≥ cfg.Components components.
func newKHA(cfg Config, k int) *KHA {
	b, d := cfg.Budget, cfg.Dim
	l := &KHA{
		cfg: cfg, d: d, k: k, b: b, kp: cfg.Components,
		rows:    newKernelRows(cfg.Kernel, d, b),
		chol:    make([]float64, b*b),
		invDiag: make([]float64, b),
		a:       make([]float64, b*k),
		a2:      make([]float64, b*k),
		ka:      make([]float64, b*k),
		ref:     make([]float64, b*k),
		g:       make([]float64, k*k),
		g2:      make([]float64, k*k),
		h:       make([]float64, k*k),
		h2:      make([]float64, k*k),
		w:       make([]float64, k*k),
		zr:      make([]float64, k),
		acc:     make([]float64, k),
		c:       make([]float64, b),
		u:       make([]float64, b),
		c2:      make([]float64, b),
		u2:      make([]float64, b),
		kr:      make([]float64, b),
		s:       make([]float64, b),
		v:       make([]float64, b),
		lam:     make([]float64, k),
		lam2:    make([]float64, k),
		y:       make([]float64, k),
		eta:     make([]float64, k),
		sign:    make([]float64, k),
		refSign: make([]float64, k),
		pubEig:  make([]float64, k),
		perm:    make([]int, k),
		refPerm: make([]int, k),
	}
	l.nv, l.dg = l.y, l.y
	switch cfg.Rule {
	case "":
		l.beta = 1
		if cfg.Beta != 0 {
			l.beta = cfg.Beta
			l.nv = make([]float64, k)
		}
	case RuleOja:
		l.nv = make([]float64, k) // zero: no deflation term
	case RuleAPEX:
		l.apex = true
		l.nv = make([]float64, k)
		l.yo = make([]float64, k)
		l.dg = l.yo
		l.lat = make([]float64, k*k)
		l.lat2 = make([]float64, k*k)
	}
	if cfg.Dictionary == DictKMeans {
		l.km = true
		l.cent, l.oldPts = make([]float64, b*d), make([]float64, b*d)
		l.cnt, l.selfK = make([]float64, b), make([]float64, b)
	}
	if cfg.Gain == GainSMD {
		l.smd = true
		l.rho, l.rho2 = make([]float64, k), make([]float64, k)
		l.vt, l.vt2 = make([]float64, b*k), make([]float64, b*k)
		l.mt, l.mt2 = make([]float64, k*k), make([]float64, k*k)
		l.dy = make([]float64, k)
		l.sm, l.qm, l.zm = make([]float64, k*k), make([]float64, k*k), make([]float64, k*k)
		l.cov, l.rot = make([]float64, k*k), make([]float64, k*k)
		l.sumKK = make([]float64, b*b)
		l.theta, l.match = make([]float64, k), make([]int, k)
		var q [1]float64
		(lapack.Implementation{}).Dsyev(lpk.EVCompute, blas.Upper, k, l.rot, k, l.theta, q[:], -1)
		l.rrWork = make([]float64, int(q[0]))
	}
	return l
}

// Rule returns the update rule: "gha", "oja" or "apex".
func (l *KHA) Rule() string {
	if l.cfg.Rule == "" {
		return RuleGHA
	}
	return l.cfg.Rule
}

// MemoryBytes returns the bytes held by the learner's arrays:
//
//	8·(B² + B·d + 4·B·k + 9·B + 5·k² + 11·k)
//
// (the Cholesky factor of K_ε and the reciprocals of its diagonal, the
// memorised points and their norms; A, its next value, the reference basis
// and a B×k scratch; seven B-vectors of means and scratch; G, H, their next
// values and a k×k scratch; the k-sized vectors), plus 8·k for rule oja or
// a β other than 1, 8·(2k² + 2k) for rule apex (the lateral weights, their
// next value, the outputs and a coefficient vector), 8·(B² + 2Bk + 7k² +
// 39k) for gain smd (the row moment S; the gain trace and its next value;
// M, its next value, three k×k scratch matrices, the covariance and the
// rotation of the Rayleigh–Ritz step; ρ, its next value, Vᵀv, θ, the
// component matching and the eigensolver's 34k workspace), plus a fixed
// overhead of a few hundred bytes. k is the number of components learned,
// Config.Components plus the guards of gain smd. It does not depend on the
// length of the stream.
func (l *KHA) MemoryBytes() int {
	b, d, k := l.b, l.d, l.k
	n := b*b + b*d + 4*b*k + 9*b + 5*k*k + 11*k
	switch {
	case l.apex:
		n += 2*k*k + 2*k
	case l.cfg.Beta != 0 || l.cfg.Rule == RuleOja:
		n += k
	}
	if l.smd {
		n += b*b + 2*b*k + 7*k*k + 5*k + len(l.rrWork)
	}
	if l.km {
		n += 2*b*d + 2*b
	}
	return 8 * n
}

// Kind returns "kha".
func (l *KHA) Kind() string { return KindKHA }

// Dim returns the input dimension d.
func (l *KHA) Dim() int { return l.d }

// Components returns the number k of components.
func (l *KHA) Components() int { return l.kp }

// Seen returns the number of observations learned.
func (l *KHA) Seen() int64 { return l.seen }

// ready tells whether Transform can project.
func (l *KHA) ready() bool { return l.full && l.seen >= int64(l.kp)+1 }

// syncPeriod is the number of observations between exact recomputations of G and H.
// With gain smd it is the first multiple of R from B on: each sync also
// takes the Rayleigh–Ritz step.
func (l *KHA) syncPeriod() int64 {
	r := int64(l.cfg.Refresh)
	if l.smd {
		return r * ((int64(l.b) + r - 1) / r)
	}
	return r * int64(l.b)
}

// Learn folds x into the state. The first B observations are stored; the
// B-th also starts the Hebbian learner (O(B³) once). On error the state is
// unchanged.
func (l *KHA) Learn(x []float64) error {
	if err := checkInput(x, l.d); err != nil {
		return err
	}
	if !l.full {
		l.rows.Append(x)
		if l.rows.Len() == l.b {
			if err := l.complete(); err != nil {
				l.rows.Remove(l.b - 1)
				l.full = false
				return err
			}
		}
		l.seen++
		return nil
	}
	if err := l.step(x, l.seen); err != nil {
		return err
	}
	l.seen++
	if l.km {
		l.moveCentroid(x)
		if l.seen >= l.nextRebase {
			l.rebase()
		}
	}
	return nil
}

// moveCentroid moves the centroid of the member nearest to x in the
// feature space, argminⱼ k(dⱼ,dⱼ) − 2k(dⱼ,x) (from the kernel row of the
// step, still in l.kr), to the running mean of its observations.
func (l *KHA) moveCentroid(x []float64) {
	best, bj := math.Inf(1), 0
	for j, kv := range l.kr[:l.b] {
		if dist := l.selfK[j] - 2*kv; dist < best {
			best, bj = dist, j
		}
	}
	l.cnt[bj]++
	c := l.cent[bj*l.d : (bj+1)*l.d]
	w := 1 / l.cnt[bj]
	for i, xv := range x {
		c[i] += (xv - c[i]) * w
	}
}

// rebase makes the centroids the memorised set and re-expresses the state
// in their span: with D the old and D' the new set, every coefficient
// vector a of a direction in span(D) becomes K'_ε⁻¹K(D',D)a, the RKHS
// projection of Φ_D a on span(D') (A, the reference basis R, the gain
// trace V), the mean row becomes u' = K(D',D)c (the kernel row of the
// projected mean, as the true running mean row over D' is unknown) and
// c' = K'_ε⁻¹u'; G, H and M are recomputed exactly. O(B²(d + 2k) + B³/3).
// When K'_ε is not positive definite (coinciding centroids) the set is
// kept. It then schedules the next rebase (at 2B, 4B, 8B, 16B
// observations, then every 16B).
func (l *KHA) rebase() {
	b, k, d := l.b, l.k, l.d
	l.nextRebase = l.seen + l.rebaseGap
	l.rebaseGap = min(2*l.rebaseGap, 16*int64(b))
	bl := blas64.Implementation()
	// T for a mapper: transient B×B scratch, allocated per rebase (rare)
	// so that MemoryBytes, the steady state, does not carry it.
	mapper, _ := l.tr.(CoordMapper)
	var tmap, q []float64
	if mapper != nil {
		tmap = make([]float64, b*b)
	}
	if l.smd {
		q = make([]float64, b*b)
	}
	// X = K(D',D)·[A R V], u' = K(D',D)c, row by row from the old set.
	for i := range b {
		x := l.cent[i*d : (i+1)*d]
		kr := l.rows.Row(l.kr, x, norm2(x))
		if mapper != nil {
			copy(tmap[i*b:(i+1)*b], kr)
		}
		if q != nil {
			copy(q[i*b:(i+1)*b], kr)
		}
		bl.Dgemv(blas.Trans, b, k, 1, l.a, k, kr, 1, 0, l.ka[i*k:(i+1)*k], 1)
		bl.Dgemv(blas.Trans, b, k, 1, l.ref, k, kr, 1, 0, l.a2[i*k:(i+1)*k], 1)
		if l.smd {
			bl.Dgemv(blas.Trans, b, k, 1, l.vt, k, kr, 1, 0, l.vt2[i*k:(i+1)*k], 1)
		}
		var u float64
		for j, kv := range kr {
			u += kv * l.c[j]
		}
		l.u2[i] = u
	}
	if mapper != nil {
		// T = K(D',D)L⁻ᵀ now, L'⁻¹ from the left once L' is known.
		bl.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, b, b, 1, l.chol, b, tmap, b)
	}
	if q != nil {
		// Q = K(D',D)K_ε⁻¹ with the old factor; S ← QSQᵀ once the new
		// set is in (below).
		bl.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, b, b, 1, l.chol, b, q, b)
		bl.Dtrsm(blas.Right, blas.Lower, blas.NoTrans, blas.NonUnit, b, b, 1, l.chol, b, q, b)
	}
	copy(l.oldPts, l.rows.Data())
	l.rows.Reset(l.cent, b)
	if err := l.factor(); err != nil {
		// Back to the old set: the same operations on the same points as
		// the factor that succeeded before, so this one succeeds too.
		l.rows.Reset(l.oldPts, b)
		_ = l.factor()
		return
	}
	if q != nil {
		// Σ k_D'(x)k_D'(x)ᵀ with k_D'(x) ≈ Q k_D(x) (the kernel row of x's
		// projection on span(D), as u' above): S ← QSQᵀ.
		x := make([]float64, b*b)
		bl.Dsymm(blas.Right, blas.Upper, b, b, 1, l.sumKK, b, q, b, 0, x, b)
		bl.Dgemm(blas.NoTrans, blas.Trans, b, b, b, 1, x, b, q, b, 0, l.sumKK, b)
	}
	switch {
	case mapper != nil:
		bl.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, b, b, 1, l.chol, b, tmap, b)
		mapper.Map(tmap, b)
	case l.tr != nil:
		for j := b - 1; j >= 0; j-- {
			l.tr.Drop(j)
		}
		for j := range b {
			l.tr.Append(j, 0)
		}
	}
	solve := func(m []float64) {
		bl.Dtrsm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, b, k, 1, l.chol, b, m, k)
		bl.Dtrsm(blas.Left, blas.Lower, blas.Trans, blas.NonUnit, b, k, 1, l.chol, b, m, k)
	}
	solve(l.ka)
	solve(l.a2)
	l.a, l.ka = l.ka, l.a
	l.ref, l.a2 = l.a2, l.ref
	copy(l.u, l.u2)
	copy(l.c, l.u2)
	l.solve(l.c)
	l.exactGram(l.g, l.h, l.a)
	if l.smd {
		solve(l.vt2)
		l.vt, l.vt2 = l.vt2, l.vt
		blas64.Gemm(blas.Trans, blas.NoTrans, 1,
			blas64.General{Rows: b, Cols: k, Stride: k, Data: l.ka},
			blas64.General{Rows: b, Cols: k, Stride: k, Data: l.vt}, 0,
			blas64.General{Rows: k, Cols: k, Stride: k, Data: l.mt})
	}
}

// complete factors K_ε, draws the initial directions and replays the stored
// points through the Hebbian update.
func (l *KHA) complete() error {
	if err := l.factor(); err != nil {
		return err
	}
	b, k := l.b, l.k
	rng := rand.New(rand.NewPCG(l.cfg.Seed, khaSeedStream))
	for i := range l.a {
		l.a[i] = rng.NormFloat64()
	}
	l.exactGram(l.g, nil, l.a)
	clear(l.h)
	if !l.orthonormalise(l.g, l.h, l.a, l.a2) {
		return fmt.Errorf("%w: kha: initial directions are not independent in the RKHS", ErrNumerical)
	}
	l.a, l.a2 = l.a2, l.a
	clear(l.c)
	clear(l.u)
	clear(l.lam)
	clear(l.lat)
	if l.smd {
		for i := range l.rho {
			l.rho[i] = 1
		}
		clear(l.vt)
		clear(l.mt)
		clear(l.sumKK)
		l.momentN = 0
	}
	l.kxx = 0
	l.sinceRefresh, l.sinceSync = 0, 0
	l.version = 0
	for i := range k {
		l.perm[i] = i
		l.sign[i] = 1
	}
	l.full = true
	if l.km {
		copy(l.cent, l.rows.Data())
		for j := range b {
			l.cnt[j] = 1
		}
		l.nextRebase, l.rebaseGap = 2*int64(b), 2*int64(b)
	}
	for j := range b {
		if err := l.step(l.rows.Point(j), int64(j)); err != nil {
			return err
		}
	}
	if l.version == 0 {
		// Fewer than R updates so far: publish the first basis now.
		if !l.orthonormalise(l.g, l.h, l.a, l.a2) {
			return fmt.Errorf("%w: kha: directions collapsed during warm-up", ErrNumerical)
		}
		l.a, l.a2 = l.a2, l.a
		if l.smd {
			l.rotateTrace(l.vt, l.mt, l.vt2, l.mt2)
			l.vt, l.vt2 = l.vt2, l.vt
			l.mt, l.mt2 = l.mt2, l.mt
		}
		l.publish()
	}
	return nil
}

// factor builds the lower Cholesky factor of K_ε = K_DD + εI in l.chol.
func (l *KHA) factor() error {
	b := l.b
	var diag float64
	for j := range b {
		row := l.rows.Row(l.kr, l.rows.Point(j), l.rows.norms[j])
		copy(l.chol[j*b:j*b+j+1], row[:j+1])
		clear(l.chol[j*b+j+1 : (j+1)*b])
		diag += row[j]
		if l.km {
			l.selfK[j] = row[j]
		}
	}
	diag /= float64(b)
	if !(diag > 0) || math.IsInf(diag, 0) {
		return fmt.Errorf("%w: kha: mean diagonal of the kernel matrix is %v", ErrNumerical, diag)
	}
	eps := l.cfg.Jitter * diag
	for j := range b {
		l.chol[j*b+j] += eps
	}
	if ok := (lapack.Implementation{}).Dpotrf(blas.Lower, b, l.chol, b); !ok {
		return fmt.Errorf("%w: kha: kernel matrix of the memorised set is not positive definite (jitter %v)", ErrNumerical, eps)
	}
	for j := range b {
		l.invDiag[j] = 1 / l.chol[j*b+j]
	}
	l.meanDiag = diag
	l.floor = khaLambdaFloor * diag
	return nil
}

// khaSolveBlock is the block size of the triangular solves: the
// off-diagonal blocks go through Dgemv (gonum's assembly kernels), the
// diagonal blocks through short scalar loops.
const khaSolveBlock = 16

// solve overwrites x (length b) with K_ε⁻¹x = L⁻ᵀ(L⁻¹x), by blocked forward
// and backward substitution: the operations of two Dtrsv calls in another
// order of summation, with the reciprocals of the diagonal instead of
// divisions, and as accurate (TestKHASolve). gonum's Dtrsv is a scalar loop
// with one accumulator, about three times slower at B = 128 and 512.
func (l *KHA) solve(x []float64) {
	b, ch, inv := l.b, l.chol, l.invDiag
	bl := blas64.Implementation()
	// L w = x, block row by block row.
	for i0 := 0; i0 < b; i0 += khaSolveBlock {
		i1 := min(i0+khaSolveBlock, b)
		if i0 > 0 {
			bl.Dgemv(blas.NoTrans, i1-i0, i0, -1, ch[i0*b:], b, x[:i0], 1, 1, x[i0:i1], 1)
		}
		for i := i0; i < i1; i++ {
			row := ch[i*b+i0 : i*b+i]
			xb := x[i0:i]
			var s0, s1 float64
			j := 0
			for ; j+1 < len(row); j += 2 {
				s0 += row[j] * xb[j]
				s1 += row[j+1] * xb[j+1]
			}
			if j < len(row) {
				s0 += row[j] * xb[j]
			}
			x[i] = (x[i] - s0 - s1) * inv[i]
		}
	}
	// Lᵀ s = w, block row by block row from the bottom: solve the diagonal
	// block, then remove its contribution from the rows above.
	for i1 := b; i1 > 0; {
		i0 := max(0, i1-khaSolveBlock)
		for i := i1 - 1; i >= i0; i-- {
			xi := x[i] * inv[i]
			x[i] = xi
			row := ch[i*b+i0 : i*b+i]
			xb := x[i0:i]
			for j, v := range row {
				xb[j] -= xi * v
			}
		}
		if i0 > 0 {
			bl.Dgemv(blas.Trans, i1-i0, i0, -1, ch[i0*b:], b, x[i0:i1], 1, 1, x[:i0], 1)
		}
		i1 = i0
	}
}

// exactGram recomputes, from scratch, g = aᵀK_εa and, when h is not nil,
// h = RᵀK_εa (R = l.ref), with K_ε a = L(Lᵀa) in l.ka: O(B²k).
func (l *KHA) exactGram(g, h, a []float64) {
	b, k := l.b, l.k
	ka := l.ka
	copy(ka, a)
	bl := blas64.Implementation()
	bl.Dtrmm(blas.Left, blas.Lower, blas.Trans, blas.NonUnit, b, k, 1, l.chol, b, ka, k)
	bl.Dtrmm(blas.Left, blas.Lower, blas.NoTrans, blas.NonUnit, b, k, 1, l.chol, b, ka, k)
	for i := range k {
		bl.Dgemv(blas.Trans, b, k, 1, ka, k, a[i:], k, 0, g[i*k:(i+1)*k], 1)
	}
	for i := range k {
		for j := range i {
			v := (g[i*k+j] + g[j*k+i]) / 2
			g[i*k+j], g[j*k+i] = v, v
		}
	}
	if h != nil {
		for j := range k {
			bl.Dgemv(blas.Trans, b, k, 1, ka, k, l.ref[j:], k, 0, h[j*k:(j+1)*k], 1)
		}
	}
}

// orthonormalise writes into na the columns of a made orthonormal in the
// RKHS metric g = aᵀK_εa, in order: with the Cholesky factor g = LLᵀ and
// W = L⁻¹, na = a Wᵀ, which is Gram–Schmidt in the RKHS. It then sets g to
// the identity and h (the inner products RᵀK_εa with the reference basis)
// to h Wᵀ. It reports false, writing nothing, when g is not positive
// definite. a is not modified. O(Bk²) through k Dgemv calls (gonum's
// assembly kernels) plus O(k³), no allocation.
func (l *KHA) orthonormalise(g, h, a, na []float64) bool {
	b, k, w := l.b, l.k, l.w
	copy(w, g)
	for _, v := range w {
		if !finite(v) {
			return false
		}
	}
	lp := lapack.Implementation{}
	if ok := lp.Dpotrf(blas.Lower, k, w, k); !ok {
		return false
	}
	for i := range k {
		if !(w[i*k+i] > 0) {
			return false
		}
	}
	if ok := lp.Dtrtri(blas.Lower, blas.NonUnit, k, w, k); !ok {
		return false
	}
	// Column i of a Wᵀ is a[:, :i+1] W[i, :i+1]ᵀ.
	bl := blas64.Implementation()
	for i := range k {
		bl.Dgemv(blas.NoTrans, b, i+1, 1, a, k, w[i*k:i*k+i+1], 1, 0, na[i:], k)
	}
	// h Wᵀ row by row, in place from the last entry (entry i needs the
	// entries j ≤ i, still the old ones).
	for r := range k {
		hr := h[r*k : (r+1)*k]
		for i := k - 1; i >= 0; i-- {
			wi := w[i*k : i*k+i+1]
			var sum float64
			for j, wv := range wi {
				sum += wv * hr[j]
			}
			hr[i] = sum
		}
	}
	clear(g)
	for i := range k {
		g[i*k+i] = 1
	}
	return true
}

// track writes the next G and H into l.g2 and l.h2, in O(k²), from the
// current ones and the step's y = Aᵀv (l.y), e = ηₜ∘y (l.eta), Rᵀv (l.zr)
// and pv = pᵀv (see the type's documentation), and returns the sum of
// their entries (finite only if every entry is).
func (l *KHA) track(pv float64) float64 {
	k := l.k
	y, e, zr := l.y[:k], l.eta[:k], l.zr[:k]
	n, dg := l.nv[:k], l.dg[:k]
	var sum float64
	// T = I − N with N = striu(n eᵀ) + diag(dg∘e) (see the type's
	// documentation; for GHA n = dg = y and N = LT[y yᵀ]·diag(ηₜ)).
	// H' = H T + (Rᵀv) eᵀ, with (H T)ᵣᵢ = Hᵣᵢ − eᵢ (Σ_{l<i} Hᵣₗ nₗ + Hᵣᵢ dgᵢ).
	for r := range k {
		hr, nr := l.h[r*k:(r+1)*k], l.h2[r*k:(r+1)*k]
		hr, nr = hr[:k], nr[:k]
		z := zr[r]
		var acc float64
		for i, ei := range e {
			v := hr[i] + ei*(z-(acc+hr[i]*dg[i]))
			acc += hr[i] * n[i]
			nr[i] = v
			sum += v
		}
	}
	// X = G T into l.w.
	x := l.w
	for r := range k {
		gr, xr := l.g[r*k:(r+1)*k], x[r*k:(r+1)*k]
		gr, xr = gr[:k], xr[:k]
		var acc float64
		for i, ei := range e {
			xr[i] = gr[i] - ei*(acc+gr[i]*dg[i])
			acc += gr[i] * n[i]
		}
	}
	// G' = TᵀX + q eᵀ + e qᵀ + pv e eᵀ with q = Tᵀy (y = AᵀK_εp),
	// qᵢ = yᵢ − eᵢ (Σ_{l<i} nₗyₗ + dgᵢyᵢ) (q goes to l.zr, free now),
	// (TᵀX)ᵢ꜀ = Xᵢ꜀ − eᵢ (Σ_{l<i} nₗ Xₗ꜀ + dgᵢ Xᵢ꜀).
	q, acc := zr, l.acc[:k]
	clear(acc)
	var yy float64
	for i, ei := range e {
		yi, ni, di := y[i], n[i], dg[i]
		q[i] = yi - ei*(yy+di*yi)
		yy += ni * yi
		xi, gi := x[i*k:(i+1)*k], l.g2[i*k:(i+1)*k]
		xi, gi = xi[:k], gi[:k]
		for c, xv := range xi {
			gi[c] = xv - ei*(acc[c]+di*xv)
			acc[c] += ni * xv
		}
	}
	g2 := l.g2
	for i, ei := range e {
		for c := range i + 1 {
			v := (g2[i*k+c]+g2[c*k+i])/2 + q[i]*e[c] + ei*q[c] + pv*ei*e[c]
			g2[i*k+c], g2[c*k+i] = v, v
			sum += v
		}
	}
	return sum
}

// step applies one Hebbian update for x, the observation number t+1 of the
// Hebbian statistics. It computes the next state in the spare buffers and
// swaps them in only when everything is finite.
func (l *KHA) step(x []float64, t int64) error {
	pv, nkxx := l.observe(x, t)
	out := l.outputs()
	l.gains(out, pv, t)
	var check float64
	if l.beta != 1 && l.beta != 0 {
		for i, yi := range l.y {
			l.nv[i] = l.beta * yi
		}
	}
	if l.apex {
		check += l.lateral(out)
	}
	if l.smd {
		check += l.smdStep(pv)
	}
	check += l.update(l.s)
	// The next G and H in k-space (see the type's documentation).
	check += l.track(pv)
	if !finite(check + pv + nkxx) {
		return fmt.Errorf("%w: kha: update overflowed", ErrNumerical)
	}
	if err := l.commit(nkxx); err != nil {
		return err
	}
	if l.smd {
		// The row moment S += k_D(x)k_D(x)ᵀ (B² flops, once the step has
		// succeeded: commit's Rayleigh–Ritz step adds x's term itself).
		blas64.Implementation().Dsyr(blas.Upper, l.b, 1, l.kr, 1, l.sumKK, l.b)
		l.momentN++
	}
	return nil
}

// observe computes x's kernel row and s(x) = K_ε⁻¹k_D(x), the next means
// c' and u' (into c2, u2), p = s − c' (in l.s), v = k_D(x) − u' (l.v),
// y = Aᵀv and Rᵀv (l.zr), and returns ‖Pφ̃(x)‖² = pᵀv and the next running
// mean of k(x,x). t is the number of observations before x.
func (l *KHA) observe(x []float64, t int64) (pv, nkxx float64) {
	b, k := l.b, l.k
	kr := l.rows.Row(l.kr, x, norm2(x))
	kxx := l.cfg.Kernel.Self(x)
	s := l.s
	copy(s, kr)
	l.solve(s)
	bl := blas64.Implementation()

	n := float64(t + 1)
	// Next means; s becomes p = s − c', v = k_D(x) − u'.
	var cu float64
	for j := range b {
		c := l.c[j] + (s[j]-l.c[j])/n
		u := l.u[j] + (kr[j]-l.u[j])/n
		l.c2[j], l.u2[j] = c, u
		cu += c * u
		s[j] -= c
		l.v[j] = kr[j] - u
		pv += s[j] * l.v[j]
	}
	nkxx = l.kxx + (kxx-l.kxx)/n
	// The running total variance (smd's base gain is ∝ 1/V): k(x,x)'s
	// mean minus ‖m̂‖², floored at the mean diagonal's 10⁻⁹.
	l.totalVar = max(nkxx-cu, l.floor)

	y := l.y
	bl.Dgemv(blas.Trans, b, k, 1, l.a, k, l.v, 1, 0, y, 1)
	if l.version > 0 {
		// Rᵀv = RᵀK_εp, for H (unused before the first basis).
		bl.Dgemv(blas.Trans, b, k, 1, l.ref, k, l.v, 1, 0, l.zr, 1)
	} else {
		clear(l.zr)
	}
	return pv, nkxx
}

// outputs returns the outputs the rule learns from: the projections y, or
// for APEX ŷᵢ = yᵢ + Σ_{l<i} Cᵢₗ ŷₗ (eq. (9), lateral weights C).
func (l *KHA) outputs() []float64 {
	y, k := l.y, l.k
	out := y
	if l.apex {
		out = l.yo
		for i := range k {
			v := y[i]
			for lj, c := range l.lat[i*k : i*k+i] {
				v += c * out[lj]
			}
			out[i] = v
		}
	}
	return out
}

// gains updates λ̂ (into lam2) from the outputs and sets e = ηₜ∘o (l.eta)
// with the KHA/et gains ηₜᵢ = ηₜ‖λ̂‖/λ̂ᵢ and their caps; pv is ‖Pφ̃(x)‖².
func (l *KHA) gains(out []float64, pv float64, t int64) {
	k := l.k
	n := float64(t + 1)
	// λ̂ᵢ: running mean of the outputs' squares.
	rho := max(1/n, 1/float64(l.b))
	var norm float64
	for i, yi := range out {
		l.lam2[i] = l.lam[i] + rho*(yi*yi-l.lam[i])
		f := max(l.lam2[i], l.floor)
		norm += f * f
	}
	norm = math.Sqrt(norm)
	etaT := l.cfg.LearningRate * l.cfg.Decay / (float64(t) + l.cfg.Decay)
	// The cap ηₜᵢ‖Pφ̃(x)‖² ≤ 1; with β > 1 the deflation term is β times
	// larger, so ηₜᵢβ‖Pφ̃(x)‖² ≤ 1 (β = 2 overflowed during the warm-up
	// replay without it, TestKHARulesLinear).
	capv := pv
	if l.beta > 1 {
		capv = pv * l.beta
	}
	if l.smd {
		// smd: the scale-free base gain ηₜ‖λ̂‖/(λ̂ᵢV) times SMD's factor ρᵢ.
		etaT /= l.totalVar
	}
	for i := range k {
		e := etaT * norm / max(l.lam2[i], l.floor)
		if l.smd {
			e *= l.rho[i]
		}
		if capv > 0 && e*capv > 1 {
			e = 1 / capv
		}
		if o2 := out[i] * out[i]; l.apex && e*o2 > 1 {
			// APEX's output carries the lateral terms and may exceed
			// ‖Pφ̃(x)‖: cap ηₜᵢŷᵢ² ≤ 1 as well, so that the decay factors
			// 1 − ηₜᵢŷᵢ² of wᵢ and Cᵢ stay in [0, 1].
			e = 1 / o2
		}
		l.eta[i] = e * out[i]
		if l.smd {
			l.dy[i] = e // the gain ηₜᵢ, read (and replaced by Vᵀv) in smdStep
		}
	}
}

// smdStep computes the next gain factors ρ (rho2), gain trace V (vt2) and
// M = AᵀK_εV (mt2) of stochastic meta-descent for GHA (β = 1), from the
// current A, G, V, M, the step's p (l.s), v, y, the gains ηₜᵢ (in l.dy on
// entry) and pv = pᵀv, and returns the sum of the new values (an overflow
// check). With Γ = p yᵀ − A·N the GHA direction (N_{li} = y_l yᵢ for
// l ≤ i, so A' = A + Γ·diag(η)), dy = Vᵀv the derivative of y along V and
// dΓ = p dyᵀ − A·N₂ − V·N (N₂_{li} = y_l dyᵢ + dy_l yᵢ, l ≤ i) that of Γ:
//
//	ρᵢ ← clamp(ρᵢ·max(½, 1 + μ⟨Γᵢ, Vᵢ⟩/(λ̂ᵢV)), ½, 16),  ⟨Γᵢ, Vᵢ⟩ = yᵢdyᵢ − yᵢΣ_{l≤i} y_l M_{li}
//	V ← ξV + (Γ + ξ dΓ)·diag(η) = V·S + A·Q + p rᵀ
//
// with S = ξT, T = I − N·diag(η), Q = −(N + ξN₂)·diag(η), r = η∘(y + ξdy),
// so that M' = A'ᵀK_εV' = Tᵀ(M S + G Q + y rᵀ) + e (Sᵀdy + Qᵀy + pv·r)ᵀ
// (e = η∘y; AᵀK_εp = y, VᵀK_εp = dy, pᵀK_εp = pv). O(Bk) for dy and V',
// O(k³) for M'.
func (l *KHA) smdStep(pv float64) float64 {
	b, k := l.b, l.k
	y, e, eta, dy := l.y[:k], l.eta[:k], l.acc[:k], l.dy[:k]
	copy(eta, dy)
	bl := blas64.Implementation()
	bl.Dgemv(blas.Trans, b, k, 1, l.vt, k, l.v, 1, 0, dy, 1)
	var check float64
	// Gain factors from ⟨Γᵢ, Vᵢ⟩ (the previous trace, the current step).
	for i := range k {
		var s float64
		for lj := 0; lj <= i; lj++ {
			s += y[lj] * l.mt[lj*k+i]
		}
		gv := y[i]*dy[i] - y[i]*s
		f := 1 + khaSMDMu*gv/(max(l.lam2[i], l.floor)*l.totalVar)
		r := min(khaSMDMax, max(khaSMDMin, l.rho[i]*max(0.5, f)))
		l.rho2[i] = r
		check += r
	}
	// V' row by row: prefix sums over the components.
	xi := khaSMDXi
	for j := range b {
		vr, ar, nr := l.vt[j*k:(j+1)*k], l.a[j*k:(j+1)*k], l.vt2[j*k:(j+1)*k]
		vr, ar, nr = vr[:k], ar[:k], nr[:k]
		pj := l.s[j]
		var sv, say, sady float64
		for i, yi := range y {
			sv += vr[i] * yi
			say += ar[i] * yi
			sady += ar[i] * dy[i]
			ei := eta[i]
			v := xi*vr[i] - xi*ei*yi*sv + ei*(yi+xi*dy[i])*(pj-say) - xi*ei*yi*sady
			nr[i] = v
			check += v
		}
	}
	// T (sm), Q (qm), r (into l.zr: free after track? no — track needs it;
	// r is recomputed on the fly).
	tm, qm, zm := l.sm, l.qm, l.zm
	for lj := range k {
		for i := range k {
			var t, q float64
			if lj <= i {
				t = -y[lj] * y[i] * eta[i]
				q = -eta[i] * (y[lj]*y[i] + xi*(y[lj]*dy[i]+dy[lj]*y[i]))
			}
			if lj == i {
				t++
			}
			tm[lj*k+i], qm[lj*k+i] = t, q
		}
	}
	// Z = ξ M T + G Q + y rᵀ.
	for lj := range k {
		for i := range k {
			zm[lj*k+i] = y[lj] * eta[i] * (y[i] + xi*dy[i])
		}
	}
	g64 := func(data []float64) blas64.General { return blas64.General{Rows: k, Cols: k, Stride: k, Data: data} }
	blas64.Gemm(blas.NoTrans, blas.NoTrans, xi, g64(l.mt), g64(tm), 1, g64(zm))
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, g64(l.g), g64(qm), 1, g64(zm))
	// M' = Tᵀ Z + e wᵀ, w = ξTᵀdy + Qᵀy + pv·r.
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, g64(tm), g64(zm), 0, g64(l.mt2))
	for c := range k {
		var w float64
		for lj := range k {
			w += xi*tm[lj*k+c]*dy[lj] + qm[lj*k+c]*y[lj]
		}
		w += pv * eta[c] * (y[c] + xi*dy[c])
		for i := range k {
			v := l.mt2[i*k+c] + e[i]*w
			l.mt2[i*k+c] = v
			check += v
		}
	}
	return check
}

// rotateTrace applies a refresh's W = L⁻¹ (lower triangular, in l.w, as
// left by orthonormalise) to smd's gain trace and M: V' = V Wᵀ (as A) into
// vdst, M' = W M Wᵀ into mdst. O(Bk² + k³).
func (l *KHA) rotateTrace(vsrc, msrc, vdst, mdst []float64) {
	b, k, w := l.b, l.k, l.w
	bl := blas64.Implementation()
	for i := range k {
		bl.Dgemv(blas.NoTrans, b, i+1, 1, vsrc, k, w[i*k:i*k+i+1], 1, 0, vdst[i:], k)
	}
	lowerCongruence(mdst, msrc, w, l.zm, k)
}

// lateral computes APEX's next lateral weights (into lat2) by eq. (11) in
// Kung and Diamantaras' stable form, Cᵢₗ ← Cᵢₗ − ηᵢ ŷᵢ (ŷₗ + ŷᵢ Cᵢₗ),
// l < i, and returns their sum (an overflow check).
func (l *KHA) lateral(out []float64) (check float64) {
	k := l.k
	for i := range k {
		ei, oi := l.eta[i], out[i]
		row, nrow := l.lat[i*k:i*k+i], l.lat2[i*k:i*k+i]
		for lj, c := range row {
			v := c - ei*(out[lj]+oi*c)
			nrow[lj] = v
			check += v
		}
	}
	return check
}

// commit refreshes (re-orthonormalises and publishes) when due, with the
// exact recomputation of G and H every R·B observations, and makes the
// next state current.
func (l *KHA) commit(nkxx float64) error {
	refresh := l.sinceRefresh+1 >= int64(l.cfg.Refresh)
	sync := refresh && l.sinceSync+1 >= l.syncPeriod()
	if sync {
		l.exactGram(l.g2, l.h2, l.a2)
		if l.smd {
			// M = AᵀK_εV exactly, with K_εA' from exactGram (in l.ka).
			blas64.Gemm(blas.Trans, blas.NoTrans, 1,
				blas64.General{Rows: l.b, Cols: l.k, Stride: l.k, Data: l.ka},
				blas64.General{Rows: l.b, Cols: l.k, Stride: l.k, Data: l.vt2}, 0,
				blas64.General{Rows: l.k, Cols: l.k, Stride: l.k, Data: l.mt2})
			if l.momentN+1 >= float64(l.b) {
				l.outputCov(l.a2)
			}
		}
	}
	if refresh {
		next := l.a2
		if l.apex {
			// APEX's components are the outputs ŷ = (I − C)⁻¹Aᵀ(k_D(x) − u):
			// fold the lateral weights into the directions before they are
			// orthonormalised and published (see the type's documentation).
			l.foldLateral()
			next = l.ka
		}
		// The orthonormalised directions go straight into l.a (the old
		// ones are no longer needed once this succeeds).
		if !l.orthonormalise(l.g2, l.h2, next, l.a) {
			return fmt.Errorf("%w: kha: directions are not independent in the RKHS", ErrNumerical)
		}
		if l.smd {
			// The gain trace follows A (the old V and M are free now).
			l.rotateTrace(l.vt2, l.mt2, l.vt, l.mt)
			if sync && l.momentN+1 >= float64(l.b) {
				l.carryCov()
				l.rayleighRitz()
			}
		}
	} else {
		l.a, l.a2 = l.a2, l.a
		if l.smd {
			l.vt, l.vt2 = l.vt2, l.vt
			l.mt, l.mt2 = l.mt2, l.mt
		}
	}
	if l.smd {
		l.rho, l.rho2 = l.rho2, l.rho
	}

	// Commit.
	l.g, l.g2 = l.g2, l.g
	l.h, l.h2 = l.h2, l.h
	l.c, l.c2 = l.c2, l.c
	l.u, l.u2 = l.u2, l.u
	l.lam, l.lam2 = l.lam2, l.lam
	if l.apex {
		l.lat, l.lat2 = l.lat2, l.lat
	}
	l.kxx = nkxx
	l.sinceRefresh++
	l.sinceSync++
	if sync {
		l.sinceSync = 0
	}
	if refresh {
		l.sinceRefresh = 0
		l.publish()
	}
	return nil
}

// rayleighRitz is gain smd's Rayleigh–Ritz step, at each refresh right
// after the directions (now in l.a, G = I, H in l.h2, V and M in l.vt and
// l.mt) were orthonormalised with W = L⁻¹ (in l.w): the next running mean
// of y yᵀ (l.cov2) is carried to the new outputs y' = Wy (C ← WCWᵀ), its
// eigenvectors U (eigenvalues θ, largest first) rotate the directions,
// A ← AU, H ← HU, V ← VU, M ← UᵀMU (G stays I), C ← diag(θ) and λ̂ ← θ;
// the gain factors become ρⱼ ← Σᵢ Uᵢⱼ²ρᵢ. The published order and signs
// follow the components: new component j inherits the place and sign of
// the old component it is closest to (greedy on |Uᵢⱼ|). O(Bk² + k³), no
// allocation. It leaves a state of the same shape, so it needs nothing in
// the snapshot beyond C.
// memorisedCov writes into l.cov the covariance of the outputs of the
// directions a over the memorised set, Σⱼ wⱼ yⱼyⱼᵀ/Σⱼ wⱼ with
// yⱼ = aᵀ(k_D(dⱼ) − u) = (K_εa − εa)ᵀeⱼ − aᵀu and wⱼ = 1 (with dictionary
// kmeans the centroids' counts), from K_εa in l.ka (exactGram), which it
// overwrites. O(Bk²).
// outputCov writes into l.cov the covariance of the outputs of the
// directions a over the observations of the row moment S (l.sumKK) and the
// current one (kernel row l.kr), n = momentN + 1 of them:
// aᵀ(S + k_D(x)k_D(x)ᵀ)a/n − (aᵀu)(aᵀu)ᵀ with u the next mean row (l.u2).
// It uses l.ka as scratch (after the exact recomputation has read it).
// O(B²k).
func (l *KHA) outputCov(a []float64) {
	b, k := l.b, l.k
	n := l.momentN + 1
	bl := blas64.Implementation()
	au, ax := l.acc[:k], l.zr[:k]
	bl.Dgemv(blas.Trans, b, k, 1, a, k, l.u2, 1, 0, au, 1)
	bl.Dgemv(blas.Trans, b, k, 1, a, k, l.kr, 1, 0, ax, 1)
	bl.Dsymm(blas.Left, blas.Upper, b, k, 1/n, l.sumKK, b, a, k, 0, l.ka, k)
	blas64.Gemm(blas.Trans, blas.NoTrans, 1,
		blas64.General{Rows: b, Cols: k, Stride: k, Data: a},
		blas64.General{Rows: b, Cols: k, Stride: k, Data: l.ka}, 0,
		blas64.General{Rows: k, Cols: k, Stride: k, Data: l.cov})
	for i := range k {
		for j := range k {
			l.cov[i*k+j] += ax[i]*ax[j]/n - au[i]*au[j]
		}
	}
}

// carryCov carries l.cov to the orthonormalised directions A Wᵀ (W = L⁻¹ in
// l.w): C ← W C Wᵀ.
func (l *KHA) carryCov() {
	k, c := l.k, l.cov
	lowerCongruence(c, c, l.w, l.rot, k)
	for i := range k {
		for j := range i {
			v := (c[i*k+j] + c[j*k+i]) / 2
			c[i*k+j], c[j*k+i] = v, v
		}
	}
}

func (l *KHA) rayleighRitz() {
	b, k := l.b, l.k
	c, u := l.cov, l.rot
	copy(u, c)
	if ok := (lapack.Implementation{}).Dsyev(lpk.EVCompute, blas.Upper, k, u, k, l.theta, l.rrWork, len(l.rrWork)); !ok || !finiteAll(u) {
		return // the step is an improvement, not a requirement
	}
	// Dsyev's eigenvalues ascend: reverse the columns so that θ descends.
	for i := range k {
		row := u[i*k : (i+1)*k]
		for a, z := 0, k-1; a < z; a, z = a+1, z-1 {
			row[a], row[z] = row[z], row[a]
		}
	}
	for a, z := 0, k-1; a < z; a, z = a+1, z-1 {
		l.theta[a], l.theta[z] = l.theta[z], l.theta[a]
	}
	bl := blas64.Implementation()
	gen := func(r, c int, d []float64) blas64.General {
		return blas64.General{Rows: r, Cols: c, Stride: c, Data: d}
	}
	// A ← AU and V ← VU through l.a2 and l.vt2 (free during the refresh).
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, gen(b, k, l.a), gen(k, k, u), 0, gen(b, k, l.a2))
	l.a, l.a2 = l.a2, l.a
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, gen(b, k, l.vt), gen(k, k, u), 0, gen(b, k, l.vt2))
	l.vt, l.vt2 = l.vt2, l.vt
	// H ← HU and M ← UᵀMU through the k×k scratch l.zm and l.sm.
	copy(l.zm, l.h2)
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, gen(k, k, l.zm), gen(k, k, u), 0, gen(k, k, l.h2))
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, gen(k, k, u), gen(k, k, l.mt), 0, gen(k, k, l.zm))
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, gen(k, k, l.zm), gen(k, k, u), 0, gen(k, k, l.mt))
	_ = bl
	// λ̂ and ρ.
	for j := range k {
		l.lam2[j] = max(l.theta[j], 0)
		var r float64
		for i := range k {
			r += u[i*k+j] * u[i*k+j] * l.rho2[i]
		}
		l.zr[j] = min(max(r, khaSMDMin), khaSMDMax)
	}
	copy(l.rho2, l.zr[:k])
	// Old component i → new component match[i], greedy on the largest |Uᵢⱼ|.
	for i := range l.match {
		l.match[i] = -1
	}
	used := l.acc[:k] // 1 once a new component is taken
	clear(used)
	for range k {
		bi, bj, best := -1, -1, -1.0
		for i := range k {
			if l.match[i] >= 0 {
				continue
			}
			for j := range k {
				if used[j] == 0 && math.Abs(u[i*k+j]) > best {
					bi, bj, best = i, j, math.Abs(u[i*k+j])
				}
			}
		}
		l.match[bi] = bj
		used[bj] = 1
	}
	// sign and perm: new component match[i] takes old component i's.
	for i := range k {
		j := l.match[i]
		sg := l.sign[i]
		if u[i*k+j] < 0 {
			sg = -sg
		}
		l.eta[j] = sg
	}
	copy(l.sign, l.eta[:k])
	for p, i := range l.perm {
		l.perm[p] = l.match[i]
	}
}

// foldLateral writes into l.ka the next directions with APEX's lateral
// weights folded in, A' = A Nᵀ with N = (I − C)⁻¹ (C = l.lat2, the next
// lateral weights, strictly lower triangular, so N is unit lower
// triangular), so that A'ᵀ(k_D(x) − u) = ŷ; transforms the next G and H
// alike (G ← N G Nᵀ, H ← H Nᵀ) and zeroes C. O(Bk² + k³); it uses l.w as
// scratch (free between track and orthonormalise).
func (l *KHA) foldLateral() {
	b, k := l.b, l.k
	c, nm := l.lat2, l.w
	// N = (I − C)⁻¹ by forward substitution: N = I + C N.
	clear(nm)
	for i := range k {
		nm[i*k+i] = 1
		for j := range i {
			var v float64
			for m := j; m < i; m++ {
				v += c[i*k+m] * nm[m*k+j]
			}
			nm[i*k+j] = v
		}
	}
	// A' = A Nᵀ: column i is Σ_{j≤i} N[i][j] A[:, j].
	bl := blas64.Implementation()
	for i := range k {
		bl.Dgemv(blas.NoTrans, b, i+1, 1, l.a2, k, nm[i*k:i*k+i+1], 1, 0, l.ka[i:], k)
	}
	// Rows times Nᵀ in place, from the last entry (entry i needs the
	// entries j ≤ i, still the old ones): H ← H Nᵀ, G ← G Nᵀ, then
	// G ← N G (columns, the same way on Gᵀ, as G Nᵀ's transpose is N G).
	rowsNt := func(m []float64) {
		for r := range k {
			mr := m[r*k : (r+1)*k]
			for i := k - 1; i >= 0; i-- {
				var sum float64
				for j, nv := range nm[i*k : i*k+i+1] {
					sum += nv * mr[j]
				}
				mr[i] = sum
			}
		}
	}
	rowsNt(l.h2)
	rowsNt(l.g2)       // G Nᵀ
	for i := range k { // transpose: (G Nᵀ)ᵀ = N G
		for j := range i {
			l.g2[i*k+j], l.g2[j*k+i] = l.g2[j*k+i], l.g2[i*k+j]
		}
	}
	rowsNt(l.g2) // (N G) Nᵀ
	for i := range k {
		for j := range i {
			v := (l.g2[i*k+j] + l.g2[j*k+i]) / 2
			l.g2[i*k+j], l.g2[j*k+i] = v, v
		}
	}
	clear(c)
}

// update writes A·T + p eᵀ = A + p eᵀ − A·N into l.a2, with N =
// striu(nv eᵀ) + diag(dg∘e) and l.eta holding e (for GHA with β = 1,
// A + (p yᵀ − A·LT[y yᵀ])·diag(ηₜ), eᵢ = ηₜᵢyᵢ), and returns the sum of the new entries. That sum is
// finite only if every entry is (a NaN or an infinity propagates; a finite
// sum overflows only when entries approach 10³⁰⁸, a failure anyway), so no
// second pass over the new A is needed. Four rows at a time, so that the
// prefix sums Σ_{l≤i} yₗAⱼₗ are independent chains; the per-column sums of
// the new entries go to l.acc.
func (l *KHA) update(p []float64) float64 {
	b, k := l.b, l.k
	e, y, dg := l.eta[:k], l.nv[:k], l.dg[:k]
	col := l.acc[:k]
	clear(col)
	j := 0
	for ; j+3 < b; j += 4 {
		a0, a1, a2, a3 := l.a[j*k:(j+1)*k], l.a[(j+1)*k:(j+2)*k], l.a[(j+2)*k:(j+3)*k], l.a[(j+3)*k:(j+4)*k]
		n0, n1, n2, n3 := l.a2[j*k:(j+1)*k], l.a2[(j+1)*k:(j+2)*k], l.a2[(j+2)*k:(j+3)*k], l.a2[(j+3)*k:(j+4)*k]
		a0, a1, a2, a3 = a0[:k], a1[:k], a2[:k], a3[:k]
		n0, n1, n2, n3 = n0[:k], n1[:k], n2[:k], n3[:k]
		p0, p1, p2, p3 := p[j], p[j+1], p[j+2], p[j+3]
		var s0, s1, s2, s3 float64
		for i, ei := range e {
			yi, di := y[i], dg[i]
			x0 := a0[i] + ei*(p0-(s0+a0[i]*di))
			x1 := a1[i] + ei*(p1-(s1+a1[i]*di))
			x2 := a2[i] + ei*(p2-(s2+a2[i]*di))
			x3 := a3[i] + ei*(p3-(s3+a3[i]*di))
			s0 += a0[i] * yi
			s1 += a1[i] * yi
			s2 += a2[i] * yi
			s3 += a3[i] * yi
			n0[i], n1[i], n2[i], n3[i] = x0, x1, x2, x3
			col[i] += (x0 + x1) + (x2 + x3)
		}
	}
	for ; j < b; j++ {
		ar, an := l.a[j*k:(j+1)*k], l.a2[j*k:(j+1)*k]
		ar, an = ar[:k], an[:k]
		pj := p[j]
		var sa float64
		for i, ei := range e {
			x := ar[i] + ei*(pj-(sa+ar[i]*dg[i]))
			sa += ar[i] * y[i]
			an[i] = x
			col[i] += x
		}
	}
	var sum float64
	for _, c := range col {
		sum += c
	}
	return sum
}

// publish sorts the components by λ̂, aligns their signs with the basis of
// the last version, moves the version on after a real change and publishes
// the eigenvalues. The directions must be orthonormal (just refreshed).
func (l *KHA) publish() {
	k := l.k
	if l.version == 0 {
		for i := range k {
			l.perm[i] = i
		}
	}
	// Insertion sort of the current order, λ̂ descending with hysteresis: a
	// component moves above another only when its λ̂ is larger by more than
	// the margin, so near-equal eigenvalues do not swap back and forth on
	// sampling noise.
	for i := 1; i < k; i++ {
		for j := i; j > 0 && l.lam[l.perm[j]] > (1+khaSwapMargin)*l.lam[l.perm[j-1]]; j-- {
			l.perm[j], l.perm[j-1] = l.perm[j-1], l.perm[j]
		}
	}
	changed := l.version == 0
	if !changed {
		for p := range l.kp {
			if l.perm[p] != l.refPerm[p] {
				changed = true
			}
			// ⟨ref_j, w_i⟩ = H_ji, tracked in k-space.
			i, j := l.perm[p], l.refPerm[p]
			cos := l.sign[i] * l.refSign[j] * l.h[j*k+i]
			if cos < 0 {
				l.sign[i] = -l.sign[i]
				cos = -cos
			}
			if cos < khaBasisCos {
				changed = true
			}
		}
	}
	if changed {
		l.version++
		copy(l.ref, l.a)
		copy(l.h, l.g)
		copy(l.refPerm, l.perm)
		copy(l.refSign, l.sign)
	}
	// Published eigenvalues: λ̂ in the published order, made non-increasing
	// by pooling adjacent violators (the isotonic least-squares fit; it only
	// changes values that the hysteresis left out of order, i.e. within
	// the margin). The scratch vectors y and eta are free here.
	means, sizes := l.eta[:0], l.y[:0]
	for _, i := range l.perm {
		means = append(means, max(l.lam[i], l.floor))
		sizes = append(sizes, 1)
		for n := len(means); n > 1 && means[n-1] > means[n-2]; n = len(means) {
			s := sizes[n-1] + sizes[n-2]
			means[n-2] = (means[n-1]*sizes[n-1] + means[n-2]*sizes[n-2]) / s
			sizes[n-2] = s
			means, sizes = means[:n-1], sizes[:n-1]
		}
	}
	p := 0
	for b, mv := range means {
		for range int(sizes[b]) {
			l.pubEig[p] = mv
			p++
		}
	}
}

// project writes the internal-order projection of x into l.y and returns
// the kernel row (in l.kr).
func (l *KHA) project(x []float64) []float64 {
	kr := l.rows.Row(l.kr, x, norm2(x))
	for j, kv := range kr {
		l.v[j] = kv - l.u[j]
	}
	blas64.Implementation().Dgemv(blas.Trans, l.b, l.k, 1, l.a, l.k, l.v, 1, 0, l.y, 1)
	return kr
}

// Transform writes the projection of x on the k published components into
// dst (allocated when nil; any length other than k panics) and returns it.
// It costs O(Bd + Bk), does not allocate for a non-nil dst and does not
// change the state (it uses internal scratch buffers).
func (l *KHA) Transform(dst, x []float64) ([]float64, error) {
	if err := checkInput(x, l.d); err != nil {
		return dst, err
	}
	if !l.ready() {
		return dst, fmt.Errorf("%w: kha: %d of %d memorised points, %d observations", ErrNotReady, l.rows.Len(), l.b, l.seen)
	}
	dst = prepareDst(dst, l.kp)
	l.project(x)
	for p, i := range l.perm[:l.kp] {
		dst[p] = l.sign[i] * l.y[i]
	}
	return dst, nil
}

// Score is Transform plus the novelty scores of x, from the same kernel row.
func (l *KHA) Score(dst, x []float64) ([]float64, Novelty, error) {
	dst, err := l.Transform(dst, x)
	if err != nil {
		return dst, Novelty{}, err
	}
	kr := l.kr // filled by Transform
	var ck, cu float64
	for j, kv := range kr {
		ck += l.c[j] * kv
		cu += l.c[j] * l.u[j]
	}
	var nov Novelty
	var yy float64
	for p, yp := range dst {
		yy += yp * yp
		nov.T2 += yp * yp / l.pubEig[p]
	}
	nov.SPE = max(0, l.cfg.Kernel.Self(x)-2*ck+cu-yy)
	return dst, nov, nil
}

// Summary reports the published eigenvalues (written into dst as Transform
// does; nil before the learner is ready), the explained variance and the
// basis version.
func (l *KHA) Summary(dst []float64) Summary {
	sum := Summary{BasisVersion: l.version, Stored: l.rows.Len(), Ready: l.ready()}
	if !sum.Ready {
		return sum
	}
	dst = prepareDst(dst, l.kp)
	copy(dst, l.pubEig)
	sum.Eigenvalues = dst
	var cu, lam float64
	for j := range l.b {
		cu += l.c[j] * l.u[j]
	}
	for _, e := range l.pubEig[:l.kp] {
		lam += e
	}
	if total := l.kxx - cu; total > 0 {
		sum.ExplainedVariance = min(1, lam/total)
	}
	return sum
}

// Model exports the published components: the points are the memorised
// set, coefficient column p is ±A's column for published component p and
// offset p is the same column applied to u (the mean term), so that
// Model.Transform equals Transform up to rounding.
func (l *KHA) Model() (*Model, error) {
	if !l.ready() {
		return nil, fmt.Errorf("%w: kha: %d of %d memorised points, %d observations", ErrNotReady, l.rows.Len(), l.b, l.seen)
	}
	b, k, kp := l.b, l.k, l.kp
	coef := make([]float64, b*kp)
	off := make([]float64, kp)
	for p, i := range l.perm[:kp] {
		sg := l.sign[i]
		var o float64
		for j := range b {
			a := sg * l.a[j*k+i]
			coef[j*kp+p] = a
			o += a * l.u[j]
		}
		off[p] = o
	}
	return modelFrom(KindKHA, l.cfg.Kernel, l.rows.Data(), b, l.d, coef, kp, off, l.pubEig, l.seen), nil
}

// State returns a deep copy of the learner's state (names in the type's
// documentation).
func (l *KHA) State() *State {
	s := newState(KindKHA, l.cfg, l.seen)
	s.putMatrix("points", l.rows.Len(), l.d, l.rows.Data())
	if !l.full {
		return s
	}
	b, k := l.b, l.k
	s.Ints["version"] = int64(l.version)
	s.Ints["since_refresh"] = l.sinceRefresh
	s.Ints["since_sync"] = l.sinceSync
	s.Scalars["kxx"] = l.kxx
	s.putMatrix("coef", b, k, l.a)
	s.putMatrix("gram", k, k, l.g)
	s.putMatrix("ref_gram", k, k, l.h)
	s.putMatrix("ref", b, k, l.ref)
	s.putMatrix("mean_coef", 1, b, l.c)
	s.putMatrix("mean_row", 1, b, l.u)
	s.putMatrix("lambda", 1, k, l.lam)
	s.putMatrix("eigenvalues", 1, k, l.pubEig)
	s.putMatrix("sign", 1, k, l.sign)
	s.putMatrix("ref_sign", 1, k, l.refSign)
	perm := make([]float64, 2*k)
	for i := range k {
		perm[i] = float64(l.perm[i])
		perm[k+i] = float64(l.refPerm[i])
	}
	s.putMatrix("perm", 1, k, perm[:k])
	s.putMatrix("ref_perm", 1, k, perm[k:])
	if l.apex {
		s.putMatrix("lateral", k, k, l.lat)
	}
	if l.km {
		s.putMatrix("centroids", b, l.d, l.cent)
		s.putMatrix("counts", 1, b, l.cnt)
		s.Ints["next_rebase"] = l.nextRebase
		s.Ints["rebase_gap"] = l.rebaseGap
	}
	if l.smd {
		s.putMatrix("gain_scale", 1, k, l.rho)
		s.putMatrix("gain_trace", b, k, l.vt)
		s.putMatrix("trace_gram", k, k, l.mt)
		// S symmetric in full (the learner updates its upper triangle).
		sym := make([]float64, b*b)
		for i := range b {
			for j := i; j < b; j++ {
				sym[i*b+j], sym[j*b+i] = l.sumKK[i*b+j], l.sumKK[i*b+j]
			}
		}
		s.Matrices["row_moment"] = Matrix{Rows: b, Cols: b, Data: sym}
		s.Scalars["moment_count"] = l.momentN
	}
	return s
}

// Restore replaces the state with s after checking it fully (kind, config,
// shapes, finiteness, ranges, permutations, signs, and that the memorised
// points give a positive definite kernel matrix). On error the learner is
// unchanged. It allocates a fresh set of buffers and costs O(B³).
func (l *KHA) Restore(s *State) error {
	r := &stateReader{s: s}
	r.header(KindKHA, l.cfg)
	if r.err != nil {
		return r.err
	}
	nl, err := NewKHA(l.cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if m, ok := s.Matrices["coef"]; ok && nl.k != nl.kp && m.Cols == nl.kp && s.Seen >= int64(l.b) {
		// A gain smd state from before the guard components: it goes on
		// learning its k components, without guards.
		nl = newKHA(nl.cfg, nl.kp)
	}
	nl.seen = s.Seen
	if s.Seen < int64(l.b) {
		pts := r.matrix("points", int(s.Seen), l.d)
		if r.err != nil {
			return r.err
		}
		nl.rows.Reset(pts, int(s.Seen))
		*l = *nl
		return nil
	}
	sv := nl.readSaved(r, s)
	if r.err != nil {
		return r.err
	}
	sv.check(r, nl)
	if r.err != nil {
		return r.err
	}
	if err := nl.install(sv); err != nil {
		return err
	}
	*l = *nl
	return nil
}

// khaSaved is a complete kha state as read from a State (see the type's
// documentation), before it is checked and installed.
type khaSaved struct {
	pts                                    []float64
	version, sinceRefresh, sinceSync       int64
	kxx                                    float64
	a, ref, c, u                           []float64
	g, h                                   []float64 // nil with gramCoef (an earlier version's state)
	gramCoef                               []float64 // K_εA of an earlier version, else nil
	lam, eig, sign, refSign, perm, refPerm []float64
	lat                                    []float64 // apex only
	rho, vt, mt                            []float64 // gain smd only
	moment                                 []float64 // gain smd only; nil from a state before the Rayleigh–Ritz step
	momentN                                float64
	cent, cnt                              []float64 // dictionary kmeans only
	nextRebase, rebaseGap                  int64
}

// readSaved reads the named values of a complete state (Seen ≥ B) with
// their shapes and ranges; errors accumulate in r.
func (l *KHA) readSaved(r *stateReader, s *State) *khaSaved {
	b, k, d := l.b, l.k, l.d
	sv := &khaSaved{}
	sv.pts = r.matrix("points", b, d)
	sv.version = r.int("version", 1, math.MaxInt64)
	sv.sinceRefresh = r.int("since_refresh", 0, int64(l.cfg.Refresh)-1)
	// R·B − 1 bounds since_sync for every gain (a gain smd state from
	// before its shorter period syncs at its next refresh).
	sv.sinceSync = r.int("since_sync", 0, int64(l.cfg.Refresh)*int64(l.b)-1)
	sv.kxx = r.scalar("kxx", -math.MaxFloat64, math.MaxFloat64)
	sv.a = r.matrix("coef", b, k)
	if _, ok := s.Matrices["gram"]; !ok && s.Matrices["gram_coef"].Rows > 0 {
		// A snapshot of an earlier version keeps M = K_εA instead of G
		// and H: they are recomputed from it in install.
		sv.gramCoef = r.matrix("gram_coef", b, k)
	} else {
		sv.g = r.matrix("gram", k, k)
		sv.h = r.matrix("ref_gram", k, k)
	}
	sv.ref = r.matrix("ref", b, k)
	sv.c = r.matrix("mean_coef", 1, b)
	sv.u = r.matrix("mean_row", 1, b)
	sv.lam = r.matrix("lambda", 1, k)
	sv.eig = r.matrix("eigenvalues", 1, k)
	sv.sign = r.matrix("sign", 1, k)
	sv.refSign = r.matrix("ref_sign", 1, k)
	sv.perm = r.matrix("perm", 1, k)
	sv.refPerm = r.matrix("ref_perm", 1, k)
	if l.apex {
		sv.lat = r.matrix("lateral", k, k)
	}
	if l.km {
		sv.cent = r.matrix("centroids", b, d)
		sv.cnt = r.matrix("counts", 1, b)
		sv.rebaseGap = r.int("rebase_gap", 2*int64(b), 16*int64(b))
		sv.nextRebase = r.int("next_rebase", s.Seen+1, s.Seen+16*int64(b))
	}
	if l.smd {
		sv.rho = r.matrix("gain_scale", 1, k)
		sv.vt = r.matrix("gain_trace", b, k)
		sv.mt = r.matrix("trace_gram", k, k)
		// The row moment came with the Rayleigh–Ritz step: a gain smd
		// state from before has neither, and starts them empty.
		if _, ok := s.Matrices["row_moment"]; ok {
			sv.moment = r.matrix("row_moment", b, b)
			sv.momentN = r.scalar("moment_count", 0, math.MaxInt64)
		} else {
			sv.momentN = r.optionalScalar("moment_count", 0, 0)
		}
	}
	return sv
}

// check verifies the invariants of a read state that its shapes do not:
// strictly lower lateral weights, non-negative λ̂, non-increasing
// eigenvalues, signs ±1, permutations, a symmetric G. It fills l's perm
// and refPerm.
func (sv *khaSaved) check(r *stateReader, l *KHA) {
	k := l.k
	for i := range k {
		for j := i; j < k && sv.lat != nil; j++ {
			if sv.lat[i*k+j] != 0 {
				r.fail("lateral[%d][%d] = %v: the lateral weights are strictly lower triangular", i, j, sv.lat[i*k+j])
			}
		}
	}
	for i := range k {
		if sv.lam[i] < 0 {
			r.fail("lambda[%d] = %v is negative", i, sv.lam[i])
		}
		if sv.eig[i] < 0 || (i > 0 && sv.eig[i] > sv.eig[i-1]) {
			r.fail("eigenvalues %v are not non-negative and non-increasing", sv.eig)
		}
		if (sv.sign[i] != 1 && sv.sign[i] != -1) || (sv.refSign[i] != 1 && sv.refSign[i] != -1) {
			r.fail("sign %v or ref_sign %v holds a value other than ±1", sv.sign, sv.refSign)
		}
	}
	if sv.momentN != math.Trunc(sv.momentN) {
		r.fail("moment_count %v is not a whole number", sv.momentN)
	}
	if m := sv.moment; m != nil {
		b := l.b
		for i := range b {
			if m[i*b+i] < 0 {
				r.fail("row_moment[%d][%d] = %v is negative", i, i, m[i*b+i])
			}
			for j := range i {
				if m[i*b+j] != m[j*b+i] {
					r.fail("row_moment is not symmetric: [%d][%d] = %v, [%d][%d] = %v", i, j, m[i*b+j], j, i, m[j*b+i])
					return
				}
			}
		}
	}
	for j, c := range sv.cnt {
		if !(c >= 1) {
			r.fail("counts[%d] = %v: every centroid stands for at least its first point", j, c)
		}
	}
	for i, r0 := range sv.rho {
		if !(r0 >= khaSMDMin && r0 <= khaSMDMax) {
			r.fail("gain_scale[%d] = %v is outside [%v, %v]", i, r0, khaSMDMin, khaSMDMax)
		}
	}
	if !isPerm(sv.perm, l.perm) || !isPerm(sv.refPerm, l.refPerm) {
		r.fail("perm %v or ref_perm %v is not a permutation of 0…%d", sv.perm, sv.refPerm, k-1)
	}
	for i := range k {
		for j := range i {
			if sv.g != nil && sv.g[i*k+j] != sv.g[j*k+i] {
				r.fail("gram is not symmetric: [%d][%d] = %v, [%d][%d] = %v", i, j, sv.g[i*k+j], j, i, sv.g[j*k+i])
			}
		}
	}
}

// install makes a checked state l's: the points and the factor of K_ε
// (recomputed, O(B³)), G and H (from K_εA for an earlier version's state),
// and the rest as read.
func (l *KHA) install(sv *khaSaved) error {
	b, k := l.b, l.k
	l.rows.Reset(sv.pts, b)
	if err := l.factor(); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	l.full = true
	l.version = uint64(sv.version)
	l.sinceRefresh, l.sinceSync = sv.sinceRefresh, sv.sinceSync
	l.kxx = sv.kxx
	copy(l.a, sv.a)
	copy(l.ref, sv.ref)
	if m := sv.gramCoef; m != nil {
		bl := blas64.Implementation()
		for i := range k {
			bl.Dgemv(blas.Trans, b, k, 1, m, k, l.a[i:], k, 0, l.g[i*k:(i+1)*k], 1)
			bl.Dgemv(blas.Trans, b, k, 1, m, k, l.ref[i:], k, 0, l.h[i*k:(i+1)*k], 1)
		}
		for i := range k {
			for j := range i {
				v := (l.g[i*k+j] + l.g[j*k+i]) / 2
				l.g[i*k+j], l.g[j*k+i] = v, v
			}
		}
	} else {
		copy(l.g, sv.g)
		copy(l.h, sv.h)
	}
	copy(l.c, sv.c)
	copy(l.u, sv.u)
	copy(l.lam, sv.lam)
	copy(l.pubEig, sv.eig)
	copy(l.sign, sv.sign)
	copy(l.refSign, sv.refSign)
	if sv.lat != nil {
		copy(l.lat, sv.lat)
	}
	if l.km {
		copy(l.cent, sv.cent)
		copy(l.cnt, sv.cnt)
		l.nextRebase, l.rebaseGap = sv.nextRebase, sv.rebaseGap
	}
	if l.smd {
		copy(l.rho, sv.rho)
		copy(l.vt, sv.vt)
		copy(l.mt, sv.mt)
		if sv.moment != nil {
			copy(l.sumKK, sv.moment)
		}
		l.momentN = sv.momentN
	}
	return nil
}

// isPerm converts v to ints in dst and reports whether it is a permutation of 0…len(v)−1.
func isPerm(v []float64, dst []int) bool {
	used := make([]bool, len(v))
	for i, f := range v {
		j := int(f)
		if float64(j) != f || j < 0 || j >= len(v) || used[j] {
			return false
		}
		used[j] = true
		dst[i] = j
	}
	return true
}

// lowerCongruence sets dst ← W src Wᵀ for k×k row-major matrices, W lower
// triangular, with x (k×k) as scratch for W src; dst may be src.
func lowerCongruence(dst, src, w, x []float64, k int) {
	for i := range k {
		for c := range k {
			var s float64
			for j := 0; j <= i; j++ {
				s += w[i*k+j] * src[j*k+c]
			}
			x[i*k+c] = s
		}
	}
	for i := range k {
		for r := range k {
			var s float64
			for j := 0; j <= r; j++ {
				s += x[i*k+j] * w[r*k+j]
			}
			dst[i*k+r] = s
		}
	}
}
