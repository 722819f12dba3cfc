package learners

import (
	"errors"
	"fmt"
	"math"

	"github.com/kpcastream/kpcastream/internal/fielderr"
)

// Sentinel errors. Match them with errors.Is; the learners wrap them with context.
var (
	// ErrDimension reports an input vector whose length is not the configured dimension.
	ErrDimension = errors.New("learners: dimension mismatch")
	// ErrNonFinite reports an input containing NaN or ±Inf.
	ErrNonFinite = errors.New("learners: non-finite value")
	// ErrNotReady reports that the learner has not seen enough data to project.
	ErrNotReady = errors.New("learners: not ready")
	// ErrNumerical reports a failed factorization; the state was rolled back.
	ErrNumerical = errors.New("learners: numerical failure")
	// ErrConfig reports an invalid configuration.
	ErrConfig = errors.New("learners: invalid config")
	// ErrState reports a State that cannot be restored (wrong kind, shapes, non-finite values).
	ErrState = errors.New("learners: invalid state")
)

// Learner is an online kernel PCA learner fed one observation at a time.
//
// A Learner is not safe for concurrent use: exactly one goroutine owns it.
// Its memory is fixed at construction (see Config.MemoryBytes) and never
// grows with the length of the stream. Learn and Transform never keep a
// reference to x and never modify it.
type Learner interface {
	// Kind is the learner's name as used in Config.Learner ("ikpca", "kha", "window", "batch").
	Kind() string
	// Dim is the input dimension d.
	Dim() int
	// Components is the number k of published components.
	Components() int
	// Seen is the number of observations learned so far.
	Seen() int64

	// Learn updates the state from one observation x of length d. On error
	// (ErrDimension, ErrNonFinite, ErrNumerical) the state is unchanged.
	Learn(x []float64) error
	// Transform writes the projection of x onto the k published components
	// into dst and returns it. A nil dst is allocated; a dst of length k is
	// reused; any other length panics. It never changes the state. Before the
	// learner is ready it returns ErrNotReady.
	Transform(dst, x []float64) ([]float64, error)
	// Score is Transform plus the novelty scores of x, from one kernel row.
	Score(dst, x []float64) ([]float64, Novelty, error)

	// Summary reports eigenvalues, explained variance and basis version.
	// Eigenvalues are written into dst as Transform does.
	Summary(dst []float64) Summary

	// State returns a deep copy of everything needed to resume.
	State() *State
	// Restore replaces the learner's state with s after checking it fully;
	// on error the learner is unchanged.
	Restore(s *State) error
	// Model returns the portable export of the current components.
	Model() (*Model, error)
}

// CoordTracker is told of every change of a learner's dictionary
// coordinates (see IKPCA.Coords and IKPCA.LearnTracked), so that it can
// re-express what it defines on them — a linear classifier's weights, its
// inverse covariance — by the same transform. Coordinates are indexed
// 0…m−1 with m the number of stored points; they are whitened (zᵀz' is the
// kernel on the dictionary's span), so every change is an orthogonal map
// of the span, a projection, or an extension:
//
//   - Rotate(i, c, s): the plane rotation of coordinates i and i+1,
//     z'ᵢ = c·zᵢ + s·zᵢ₊₁, z'ᵢ₊₁ = −s·zᵢ + c·zᵢ₊₁, for every x. Exact: a
//     weight vector rotated the same way gives the same w'ᵀz' = wᵀz.
//   - Drop(last): coordinate last (the last one, after the rotations of an
//     eviction brought the removed member's direction there) is removed;
//     a weight vector loses its component along it, which is its
//     orthogonal projection on the remaining span: exact for every x in
//     that span, an approximation (the best one in the RKHS norm) for x
//     outside it.
//   - Append(m, carried): coordinate m (a new member's direction, orthogonal
//     to the others) is added. Points seen before had no component along
//     it (they were within the admission tolerance of the old span), so a
//     weight gets 0 there — exact for every x in the old span — unless
//     carried ≠ 0: then the coordinate dropped just before (a centroid
//     move) is projected on the new direction, and a weight's new entry is
//     carried times its dropped component.
type CoordTracker interface {
	Rotate(i int, c, s float64)
	Drop(last int)
	Append(m int, carried float64)
}

// CoordMapper is a CoordTracker that also follows a change of the whole
// dictionary (kha's kmeans rebase, KHA.LearnTracked): the coordinates of
// every x in the old span become z' = T z, T the m×m matrix
// L'⁻¹K(D',D)L⁻ᵀ (row-major, stride m) of the old set D and the new set
// D' (K_ε = LLᵀ and K'_ε = L'L'ᵀ), and a weight vector w becomes T w: the
// RKHS projection of wᵀz on the new span, the best approximation there. T
// is a contraction (‖T v‖ ≤ ‖v‖ up to the jitter ε). Map must not retain t.
type CoordMapper interface {
	CoordTracker
	Map(t []float64, m int)
}

// Novelty holds the per-vector novelty scores of an observation.
type Novelty struct {
	// SPE is the squared feature-space reconstruction error (Q statistic):
	// ‖φ(x) − m‖² − Σᵢ yᵢ², where m is the feature-space mean.
	SPE float64
	// T2 is Hotelling's T² = Σᵢ yᵢ²/λᵢ over the published components.
	T2 float64
}

// Summary describes the learner's current eigenspace.
type Summary struct {
	// Eigenvalues of the feature-space covariance operator (eigenvalues of
	// K̃/N with the forgetting-weighted N), largest first; length k. Nil if
	// the learner is not ready.
	Eigenvalues []float64
	// ExplainedVariance is Σᵢ λᵢ over the total feature-space variance, in [0, 1].
	ExplainedVariance float64
	// BasisVersion counts real changes of the published basis (a component
	// turning away from its previous direction or a change of order).
	BasisVersion uint64
	// Stored is the number of stored points (dictionary or window fill).
	Stored int
	// Ready tells whether Transform would succeed.
	Ready bool

	// How well the budget B fits the stream (ikpca; zero values and an
	// empty advice for the other kinds). The rates are averaged over the
	// last ~1,000 messages (over all of them before that).
	//
	// DroppedMass is the fraction of the scatter (feature-space variance
	// within the dictionary's span, forgetting-weighted) that evictions and
	// moves have dropped so far: dropped / (dropped + held), in [0, 1].
	DroppedMass float64
	// SwapsPer1000 is the number of members replaced by a new point per
	// 1,000 messages.
	SwapsPer1000 float64
	// MovesPer1000 is the number of members moved to the mean of the
	// points they stand for per 1,000 messages (centroid eviction).
	MovesPer1000 float64
	// OutsideSpan is the mean ALD residual δ = ‖φ(x) − Π_D φ(x)‖² that the
	// recent messages leave outside the dictionary's span (0 for a message
	// that joined it) over the total feature-space variance: the share of
	// each new point's variance that the B stored points cannot express,
	// in [0, 1].
	OutsideSpan float64
	// BudgetAdvice is "ok", "tight" or "too_small" (see BudgetAdvice), ""
	// when the learner cannot judge.
	BudgetAdvice string
}

// Budget advice values of Summary.BudgetAdvice.
const (
	// AdviceOK: the dictionary is not full, or its span holds at least 90 %
	// of the new points' variance and fewer than 5 % of the messages
	// replace a member.
	AdviceOK = "ok"
	// AdviceTight: the span misses 10–25 % of the new points' variance, or
	// 5–50 % of the messages replace a member; the top components are
	// usually still accurate when the residual is noise, but a larger B
	// would be safer.
	AdviceTight = "tight"
	// AdviceTooSmall: the span misses at least 25 % of the new points'
	// variance, or at least every other message replaces a member: raise B.
	AdviceTooSmall = "too_small"
)

// BudgetAdvice turns the budget-fit figures of a learner whose dictionary
// holds stored of budget points into AdviceOK, AdviceTight or
// AdviceTooSmall. The thresholds are heuristics, documented on the
// constants; the figures themselves are in Summary.
func BudgetAdvice(stored, budget int, outsideSpan, swapsPer1000 float64) string {
	switch {
	case stored < budget:
		return AdviceOK
	case outsideSpan >= 0.25 || swapsPer1000 >= 500:
		return AdviceTooSmall
	case outsideSpan >= 0.10 || swapsPer1000 >= 50:
		return AdviceTight
	}
	return AdviceOK
}

// Config configures any learner. The zero value of an optional field means
// "use the default" named in its comment. The yaml tags name the fields in
// a configuration file (pipelines[i].learner) and in Validate's errors.
//
// Memory is fixed by (Budget B, Dim d, Components k); each learner documents
// its formula in MemoryBytes.
type Config struct {
	// Learner is "ikpca" (default), "kha", "window" or "batch"; in YAML, kind.
	Learner string `yaml:"kind"`
	// Dim is the input dimension d (required, ≥ 1).
	Dim int `yaml:"dim"`
	// Components is the number k of components (required, 1 ≤ k ≤ Budget).
	Components int `yaml:"components"`
	// Budget is the number B of stored points: dictionary size for ikpca
	// and kha, window length W for window, the maximum number of rows for
	// batch. Default 256.
	Budget int `yaml:"budget"`
	// Kernel is the kernel and its parameters (required).
	Kernel Kernel `yaml:"kernel"`
	// Forget is the forgetting factor f ∈ (0, 1] applied per observation;
	// 0 means 1 (no forgetting). The effective memory is about 1/(1−f)
	// observations. ikpca only.
	Forget float64 `yaml:"forget"`
	// Admission is the dictionary admission rule: "ald" (default) or "coherence".
	Admission string `yaml:"admission"`
	// Eviction is the dictionary eviction policy when full: "centroid"
	// (default: members move to the mean of the points they stand for and
	// are replaced when they stand for nothing), "lli" (least linearly
	// independent; the default before centroid), "fifo" or "contribution".
	// ikpca only.
	Eviction string `yaml:"eviction"`
	// SwapRatio is the hysteresis of lli eviction: a full dictionary swaps
	// its least independent member dⱼ for x only when x's residual exceeds
	// SwapRatio times dⱼ's, δ(x) > SwapRatio/[K⁻¹]ⱼⱼ, so every swap raises
	// log det K_DD by more than log SwapRatio. Must be ≥ 1; 1 swaps on
	// any gain (the rule before this field existed). Default 2. ikpca only.
	SwapRatio float64 `yaml:"swap_ratio"`
	// Tolerance is the ALD threshold ν relative to k(x,x): a point is admitted
	// when δ = k(x,x) − ‖z‖² > ν·k(x,x). Default 1e-3.
	Tolerance float64 `yaml:"tolerance"`
	// Coherence is the coherence threshold μ₀ ∈ (0,1): a point is admitted
	// when max_j |k(x,dⱼ)|/√(k(x,x)k(dⱼ,dⱼ)) ≤ μ₀. Default 0.95.
	Coherence float64 `yaml:"coherence"`
	// Jitter ε is added to the diagonal of the dictionary Gram matrix
	// relative to its mean diagonal. Default 1e-10.
	Jitter float64 `yaml:"jitter"`
	// LearningRate is η₀ of kha's schedule η_t = η₀·t₀/(t+t₀). Default 0.1.
	LearningRate float64 `yaml:"learning_rate"`
	// Decay is t₀ of kha's schedule. Default 1000 (observations).
	Decay float64 `yaml:"decay"`
	// Rule is kha's update rule (Kashima 2001): "gha" (default) is the
	// generalised Hebbian rule of eq. (12)–(13) with Beta (Sanger's rule
	// at β = 1), "oja" Oja's single-component rule, eq. (6), for every
	// component (eq. (12) with β = 0; the refresh's Gram–Schmidt deflates
	// and orders them, so Refresh must be ≤ k), "apex" the kernel APEX rule of eqs. (9)–(11) with lateral
	// weights. The default is kept as "" ("gha" is normalised to it), so
	// that configurations and snapshots from before the field compare and
	// encode as before. kha only.
	Rule string `yaml:"rule"`
	// Beta is β of eq. (12) for rule gha: component p's input is
	// φ(x) − β·Σ_{j<p} yⱼwⱼ. 1 is Sanger's GHA, 2 Oja's stochastic gradient
	// ascent. 0 means 1 (and 1 is normalised to 0); must be finite and
	// > 0 when set. kha with rule gha only.
	Beta float64 `yaml:"beta"`
	// Gain is kha's gain schedule: "et" (default) is KHA/et of Günter,
	// Schraudolph & Vishwanathan (2007), ηₜᵢ = η₀·t₀/(t+t₀)·‖λ̂‖/λ̂ᵢ; "smd"
	// scales it by 1/V (V the running total variance, which makes it free
	// of the kernel's scale) and adapts one gain factor per component by
	// stochastic meta-descent in the RKHS (the same paper, §4); with
	// "smd" kha also learns max(2, ⌈k/2⌉) guard components beyond the k it
	// publishes and takes a Rayleigh–Ritz step on their span about every
	// B observations (kha's documentation). "smd"
	// needs rule gha with β = 1. The default is kept as "" ("et" is
	// normalised to it), so that configurations and snapshots from before
	// the field compare and encode as before. kha only.
	Gain string `yaml:"gain"`
	// Dictionary is kha's memorised set: "first" (default) keeps the first
	// Budget observations for good; "kmeans" starts from them and moves
	// each member to the running mean of the observations nearest to it in
	// the feature space (MacQueen's online k-means), and makes the
	// centroids the memorised set, the directions projected on their span,
	// at 2B, 4B, 8B and 16B observations and then every 16B. The default is kept as "" ("first" is
	// normalised to it), so that configurations and snapshots from before
	// the field compare and encode as before. kha only.
	Dictionary string `yaml:"dictionary"`
	// Refresh is the number of observations between refreshes of the
	// published components: one warm-started subspace iteration for ikpca
	// (default 2p with the block size p = k + max(k, 8)) and window
	// (default max(2k, W/40)), one re-orthonormalisation for kha (default
	// max(1, k/2)). Learners with a Sync method can catch up on demand.
	Refresh int `yaml:"refresh"`
	// Seed seeds the learner's random generator.
	Seed uint64 `yaml:"seed"`
}

// Learner names.
const (
	KindIKPCA  = "ikpca"
	KindKHA    = "kha"
	KindWindow = "window"
	KindBatch  = "batch"
)

// EvictCentroid names the centroid eviction policy (see IKPCA).
const EvictCentroid = "centroid"

// kha update rules (Config.Rule).
const (
	RuleGHA  = "gha"
	RuleOja  = "oja"
	RuleAPEX = "apex"
	// kha's gain schedules (Config.Gain).
	GainET  = "et"
	GainSMD = "smd"
	// kha's memorised sets (Config.Dictionary).
	DictFirst  = "first"
	DictKMeans = "kmeans"
)

// Defaults.
const (
	DefaultBudget       = 256
	DefaultTolerance    = 1e-3
	DefaultSwapRatio    = 2
	DefaultCoherence    = 0.95
	DefaultJitter       = 1e-10
	DefaultLearningRate = 0.1
	DefaultDecay        = 1000
)

// withDefaults returns c with every zero optional field set to its default.
func (c Config) withDefaults() Config {
	if c.Learner == "" {
		c.Learner = KindIKPCA
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.Forget == 0 {
		c.Forget = 1
	}
	if c.Admission == "" {
		c.Admission = "ald"
	}
	if c.Eviction == "" {
		c.Eviction = EvictCentroid
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.SwapRatio == 0 {
		c.SwapRatio = DefaultSwapRatio
	}
	if c.Coherence == 0 {
		c.Coherence = DefaultCoherence
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.LearningRate == 0 {
		c.LearningRate = DefaultLearningRate
	}
	if c.Decay == 0 {
		c.Decay = DefaultDecay
	}
	// kha's default rule and β are kept as their zero values (see Rule).
	if c.Rule == RuleGHA {
		c.Rule = ""
	}
	if c.Beta == 1 {
		c.Beta = 0
	}
	if c.Gain == GainET {
		c.Gain = ""
	}
	if c.Dictionary == DictFirst {
		c.Dictionary = ""
	}
	if c.Refresh == 0 {
		switch c.Learner {
		case KindIKPCA:
			c.Refresh = 2 * (c.Components + max(c.Components, 8))
		case KindWindow:
			c.Refresh = max(1, 2*c.Components, c.Budget/40)
		default:
			c.Refresh = max(1, c.Components/2)
		}
	}
	c.Kernel = c.Kernel.withDefaults(c.Dim)
	return c
}

// WithDefaults returns c with every unset optional field set to its default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// Validate reports every problem of c at once (errors.Join), each a
// *fielderr.Error naming the field by its YAML name ("kind", "dim",
// "kernel.gamma") and matching ErrConfig with errors.Is. Defaults are
// applied first, so a zero optional field is valid.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, configErr(field, format, args...))
	}
	switch c.Learner {
	case KindIKPCA, KindKHA, KindWindow, KindBatch:
	default:
		bad("kind", "unknown learner %q (want ikpca, kha, window or batch)", c.Learner)
	}
	if c.Dim < 1 {
		bad("dim", "must be ≥ 1, got %d", c.Dim)
	}
	if c.Budget < 1 {
		bad("budget", "must be ≥ 1, got %d", c.Budget)
	}
	if c.Components < 1 {
		bad("components", "must be ≥ 1, got %d", c.Components)
	} else if c.Budget >= 1 && c.Components > c.Budget {
		bad("components", "must be ≤ budget (%d), got %d", c.Budget, c.Components)
	} else if c.Learner == KindWindow && c.Components == c.Budget {
		// The centred Gram of W points has rank at most W−1.
		bad("components", "window needs components < budget (%d), got %d", c.Budget, c.Components)
	}
	if c.Learner == KindWindow && c.Budget > WindowMaxBudget {
		bad("budget", "window length must be ≤ %d, got %d", WindowMaxBudget, c.Budget)
	}
	errs = append(errs, fielderr.Prefix(ErrConfig.Error(), "kernel", c.Kernel.Validate())...)
	if !(c.Forget > 0 && c.Forget <= 1) {
		bad("forget", "must be in (0, 1], got %v", c.Forget)
	}
	switch c.Admission {
	case "ald", "coherence":
	default:
		bad("admission", "unknown rule %q (want ald or coherence)", c.Admission)
	}
	switch c.Eviction {
	case EvictCentroid, "lli", "fifo", "contribution":
	default:
		bad("eviction", "unknown policy %q (want centroid, lli, fifo or contribution)", c.Eviction)
	}
	if !(c.SwapRatio >= 1) || math.IsInf(c.SwapRatio, 0) {
		bad("swap_ratio", "must be ≥ 1 and finite, got %v", c.SwapRatio)
	}
	if !(c.Tolerance > 0 && c.Tolerance < 1) {
		bad("tolerance", "must be in (0, 1), got %v", c.Tolerance)
	}
	if !(c.Coherence > 0 && c.Coherence < 1) {
		bad("coherence", "must be in (0, 1), got %v", c.Coherence)
	}
	if !(c.Jitter > 0 && c.Jitter < 1) {
		bad("jitter", "must be in (0, 1), got %v", c.Jitter)
	}
	if !(c.LearningRate > 0) || math.IsInf(c.LearningRate, 0) {
		bad("learning_rate", "must be > 0 and finite, got %v", c.LearningRate)
	}
	if !(c.Decay > 0) || math.IsInf(c.Decay, 0) {
		bad("decay", "must be > 0 and finite, got %v", c.Decay)
	}
	if c.Refresh < 1 {
		bad("refresh", "must be ≥ 1, got %d", c.Refresh)
	}
	switch c.Rule {
	case "", RuleOja, RuleAPEX:
		if c.Rule != "" && c.Learner != KindKHA {
			bad("rule", "applies to learner kha only, got %q for %s", c.Rule, c.Learner)
		}
		if c.Rule == RuleOja && c.Components > 1 && c.Refresh > c.Components {
			// Oja's single-component rule has no deflation term: the
			// refresh's Gram–Schmidt is its deflation, and with rarer
			// refreshes the components collapse onto the first.
			bad("refresh", "must be ≤ components (%d) with kha rule oja (the refresh deflates its components), got %d", c.Components, c.Refresh)
		}
	default:
		bad("rule", "unknown kha rule %q (want gha, oja or apex)", c.Rule)
	}
	switch {
	case c.Beta == 0:
	case !(c.Beta > 0) || math.IsInf(c.Beta, 0):
		bad("beta", "must be > 0 and finite, got %v", c.Beta)
	case c.Rule != "":
		bad("beta", "applies to kha rule gha only, got %v with rule %s", c.Beta, c.Rule)
	case c.Learner != KindKHA:
		bad("beta", "applies to learner kha only, got %v for %s", c.Beta, c.Learner)
	}
	switch {
	case c.Gain == "":
	case c.Gain != GainSMD:
		bad("gain", "unknown kha gain %q (want et or smd)", c.Gain)
	case c.Learner != KindKHA:
		bad("gain", "applies to learner kha only, got %q for %s", c.Gain, c.Learner)
	case c.Rule != "" || c.Beta != 0:
		bad("gain", "smd needs kha rule gha with beta 1, got rule %q beta %v", c.Rule, c.Beta)
	}
	switch {
	case c.Dictionary == "":
	case c.Dictionary != DictKMeans:
		bad("dictionary", "unknown kha dictionary %q (want first or kmeans)", c.Dictionary)
	case c.Learner != KindKHA:
		bad("dictionary", "applies to learner kha only, got %q for %s", c.Dictionary, c.Learner)
	}
	return errors.Join(errs...)
}

// configErr is the problem of a Config or Kernel field: "learners: invalid
// config: <field>: <problem>", matching ErrConfig.
func configErr(field, format string, args ...any) *fielderr.Error {
	return fielderr.New(ErrConfig.Error(), ErrConfig, field, format, args...)
}

// New returns a learner of the kind named by cfg.Learner.
func New(cfg Config) (Learner, error) {
	cfg = cfg.withDefaults()
	if ctor, ok := constructors[cfg.Learner]; ok {
		return ctor(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: learner: %q is not built in", ErrConfig, cfg.Learner)
}

// constructors holds the constructor of each learner kind; each kind's
// file registers itself in an init function.
var constructors = map[string]func(Config) (Learner, error){}

// Restore builds a learner from a State: the kind and config come from s.
func Restore(s *State) (Learner, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil state", ErrState)
	}
	l, err := New(s.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	if err := l.Restore(s); err != nil {
		return nil, err
	}
	return l, nil
}

// checkInput returns ErrDimension or ErrNonFinite for a bad observation.
func checkInput(x []float64, d int) error {
	if len(x) != d {
		return fmt.Errorf("%w: got %d values, want %d", ErrDimension, len(x), d)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: element %d is %v", ErrNonFinite, i, v)
		}
	}
	return nil
}

// prepareDst returns dst sized k, allocating when nil and panicking on a wrong length.
func prepareDst(dst []float64, k int) []float64 {
	if dst == nil {
		return make([]float64, k)
	}
	if len(dst) != k {
		panic(fmt.Sprintf("learners: dst has length %d, want %d", len(dst), k))
	}
	return dst
}
