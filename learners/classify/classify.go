package classify

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/learners"
)

// Sentinel errors.
var (
	// ErrConfig reports an invalid configuration.
	ErrConfig = errors.New("classify: invalid config")
	// ErrState reports a State that cannot be restored.
	ErrState = errors.New("classify: invalid state")
	// ErrClass reports a class index out of range.
	ErrClass = errors.New("classify: class out of range")
	// ErrInput reports features of the wrong length or not finite.
	ErrInput = errors.New("classify: bad features")
)

// Defaults.
const (
	DefaultRidge = 0.1
)

// Config configures a Classifier. (processor.ClassifierConfig is the YAML
// form of a pipeline's classifier; Validate names the fields in lower case.)
type Config struct {
	// Classes is the number C of classes (≥ 2).
	Classes int
	// Dim is the number n of features (for a basis: its budget B). Feature
	// vectors may be shorter (a dictionary that is not full): the missing
	// trailing features are zero.
	Dim int
	// Ridge is λ > 0, the ridge penalty λ‖W‖² (bias included), in the
	// units of zᵀz (k(x,x) for dictionary coordinates: 1 for rbf).
	// Default 0.1: a prior worth a tenth of one observation of unit kernel norm.
	Ridge float64
	// Forget is the RLS forgetting factor β ∈ (0, 1]; 0 means 1 (none).
	// Past observations weigh βᵃᵍᵉ: the effective memory is about 1/(1−β).
	Forget float64
	// Loss is the training loss: LossSquared (the default; "" means it) or
	// LossHinge (see the package comment).
	Loss string
}

// Losses of Config.Loss.
const (
	// LossSquared is least squares on the class indicators: W is the
	// ridge-regression fit, exact after every step.
	LossSquared = "squared"
	// LossHinge is the one-vs-rest squared hinge: a class's residual is
	// dropped once its score is on the right side of its margin.
	LossHinge = "hinge"
)

func (c Config) withDefaults() Config {
	if c.Ridge == 0 {
		c.Ridge = DefaultRidge
	}
	if c.Forget == 0 {
		c.Forget = 1
	}
	if c.Loss == "" {
		c.Loss = LossSquared
	}
	return c
}

// WithDefaults returns c with unset optional fields at their defaults.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// Validate reports every problem of c at once (errors.Join), each a
// *fielderr.Error naming the field ("ridge") and matching ErrConfig with
// errors.Is.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fielderr.New(ErrConfig.Error(), ErrConfig, field, format, args...))
	}
	if c.Classes < 2 {
		bad("classes", "need at least 2 classes, got %d", c.Classes)
	}
	if c.Classes > 1024 {
		bad("classes", "at most 1024, got %d", c.Classes)
	}
	if c.Dim < 1 || c.Dim > 1<<14 {
		bad("dim", "must be in [1, 16384], got %d", c.Dim)
	}
	if !(c.Ridge > 0) || math.IsInf(c.Ridge, 0) {
		bad("ridge", "must be > 0 and finite, got %v", c.Ridge)
	}
	if !(c.Forget > 0 && c.Forget <= 1) {
		bad("forget", "must be in (0, 1], got %v", c.Forget)
	}
	if c.Loss != LossSquared && c.Loss != LossHinge {
		bad("loss", "must be %q or %q, got %q", LossSquared, LossHinge, c.Loss)
	}
	return errors.Join(errs...)
}

// Classifier is the online RLS classifier (see the package comment).
type Classifier struct {
	cfg  Config
	c, n int       // classes, features; the bias is index n
	w    []float64 // c×(n+1), row r = class r's weights then its bias
	p    []float64 // (n+1)×(n+1), symmetric
	seen int64     // labelled observations learned

	// scratch, never part of the state
	k, zt []float64 // n+1
	drop  []float64 // c: each class's weight on the coordinate just dropped
}

// New returns an untrained classifier: W = 0, P = I/λ.
func New(cfg Config) (*Classifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, n := cfg.Classes, cfg.Dim
	cl := &Classifier{
		cfg: cfg, c: c, n: n,
		w:    make([]float64, c*(n+1)),
		p:    make([]float64, (n+1)*(n+1)),
		k:    make([]float64, n+1),
		zt:   make([]float64, n+1),
		drop: make([]float64, c),
	}
	for i := 0; i <= n; i++ {
		cl.p[i*(n+1)+i] = 1 / cfg.Ridge
	}
	return cl, nil
}

// Config returns the configuration with defaults applied.
func (cl *Classifier) Config() Config { return cl.cfg }

// Classes returns C.
func (cl *Classifier) Classes() int { return cl.c }

// Seen returns the number of labelled observations learned.
func (cl *Classifier) Seen() int64 { return cl.seen }

// MemoryBytes is the fixed memory 8·((n+1)² + (C+2)(n+1) + C).
func (cl *Classifier) MemoryBytes() int {
	return 8 * ((cl.n+1)*(cl.n+1) + (cl.c+2)*(cl.n+1) + cl.c)
}

// checkZ returns ErrInput unless z has at most n finite values.
func (cl *Classifier) checkZ(z []float64) error {
	if len(z) > cl.n {
		return fmt.Errorf("%w: %d features, at most %d", ErrInput, len(z), cl.n)
	}
	for i, v := range z {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: feature %d is %v", ErrInput, i, v)
		}
	}
	return nil
}

// Predict writes the class scores of features z into dst (length C; nil
// is allocated, another length panics) and returns the predicted class
// (the largest score; the lowest index on ties) and dst. Cost O(C·len(z)).
func (cl *Classifier) Predict(dst, z []float64) (int, []float64, error) {
	if dst == nil {
		dst = make([]float64, cl.c)
	}
	if len(dst) != cl.c {
		panic(fmt.Sprintf("classify: dst has length %d, want %d", len(dst), cl.c))
	}
	if err := cl.checkZ(z); err != nil {
		return -1, dst, err
	}
	m, w := len(z), cl.n+1
	best := 0
	for r := range cl.c {
		row := cl.w[r*w : (r+1)*w]
		s := row[cl.n]
		for i, v := range z {
			s += row[i] * v
		}
		_ = m
		dst[r] = s
		if s > dst[best] {
			best = r
		}
	}
	return best, dst, nil
}

// Learn folds one labelled observation (features z, class y ∈ [0, C)) into
// the model: one RLS step. Cost O(len(z)² + C·len(z)); it does not
// allocate. On error the state is unchanged.
func (cl *Classifier) Learn(z []float64, y int) error {
	if y < 0 || y >= cl.c {
		return fmt.Errorf("%w: %d, want 0…%d", ErrClass, y, cl.c-1)
	}
	if err := cl.checkZ(z); err != nil {
		return err
	}
	m, n, w := len(z), cl.n, cl.n+1
	beta := cl.cfg.Forget
	bl := blas64.Implementation()
	// Active indices: 0…m−1 and the bias n. P is zero between an active
	// and an inactive index, so k = P z̃ (z̃ = (z, 0…, 1)) vanishes on the
	// inactive ones.
	k := cl.k
	for i := range m {
		row := cl.p[i*w : (i+1)*w]
		k[i] = bl.Ddot(m, row, 1, z, 1) + row[n]
	}
	rn := cl.p[n*w : (n+1)*w]
	k[n] = bl.Ddot(m, rn, 1, z, 1) + rn[n]
	den := beta + bl.Ddot(m, z, 1, k, 1) + k[n]
	if !(den > 0) || math.IsInf(den, 0) {
		return fmt.Errorf("%w: rls denominator %v", ErrInput, den)
	}
	// W += e gᵀ with e = t − W z̃ (the a-priori error), g = k/den; for
	// the hinge, e is 0 where the score is beyond the target already (the
	// true class's above 1, another's below 0).
	hinge := cl.cfg.Loss == LossHinge
	for r := range cl.c {
		row := cl.w[r*w : (r+1)*w]
		e := -(bl.Ddot(m, row, 1, z, 1) + row[n])
		if r == y {
			e++
		}
		if hinge && (r == y) != (e > 0) {
			continue
		}
		e /= den
		bl.Daxpy(m, e, k, 1, row, 1)
		row[n] += e * k[n]
	}
	// P ← (P − k kᵀ/den)/β on the active block.
	inv := 1 / den
	update := func(i int) {
		row := cl.p[i*w : (i+1)*w]
		ki := -k[i] * inv
		bl.Daxpy(m, ki, k, 1, row, 1)
		row[n] += ki * k[n]
		if beta != 1 {
			bl.Dscal(m, 1/beta, row, 1)
			row[n] /= beta
		}
	}
	for i := range m {
		update(i)
	}
	update(n)
	cl.seen++
	return nil
}

// Rotate applies the plane rotation (c, s) to coordinates i and i+1 (see
// learners.CoordTracker): W's columns, and P ← GPGᵀ.
func (cl *Classifier) Rotate(i int, c, s float64) {
	w := cl.n + 1
	for r := range cl.c {
		rotate(cl.w[r*w:(r+1)*w], i, i+1, c, s)
	}
	// rows i, i+1, then columns i, i+1
	ri, rj := cl.p[i*w:(i+1)*w], cl.p[(i+1)*w:(i+2)*w]
	for j := range ri {
		a, b := ri[j], rj[j]
		ri[j] = c*a + s*b
		rj[j] = -s*a + c*b
	}
	for r := range w {
		rotate(cl.p[r*w:(r+1)*w], i, i+1, c, s)
	}
}

// Drop removes coordinate last (see learners.CoordTracker): W loses its
// column (kept for a following Append's carry), and P becomes the inverse
// of the covariance restricted to the other coordinates (Schur
// complement), with row and column last reset to those of an unseen
// direction.
func (cl *Classifier) Drop(last int) {
	w := cl.n + 1
	for r := range cl.c {
		cl.drop[r] = cl.w[r*w+last]
		cl.w[r*w+last] = 0
	}
	pl := cl.p[last*w : (last+1)*w]
	pll := pl[last]
	if pll > 0 {
		for i := range w {
			if i == last || cl.p[i*w+last] == 0 {
				continue
			}
			f := cl.p[i*w+last] / pll
			row := cl.p[i*w : (i+1)*w]
			for j, v := range pl {
				row[j] -= f * v
			}
		}
	}
	for i := range w {
		cl.p[i*w+last] = 0
	}
	clear(pl)
	pl[last] = 1 / cl.cfg.Ridge
}

// Append adds coordinate m (see learners.CoordTracker): its weights are
// carried times those just dropped (0 without a carry), its row of P that
// of an unseen direction.
func (cl *Classifier) Append(m int, carried float64) {
	w := cl.n + 1
	for r := range cl.c {
		cl.w[r*w+m] = carried * cl.drop[r]
		cl.drop[r] = 0
	}
	for i := range w {
		cl.p[i*w+m] = 0
	}
	pm := cl.p[m*w : (m+1)*w]
	clear(pm)
	pm[m] = 1 / cl.cfg.Ridge
}

// Map re-expresses the classifier for the new coordinates z' = T z of the
// first m (see learners.CoordMapper; T is m×m, row-major): every class's
// weights w ← T w (its function projected on the new span, the bias
// kept), and P ← T P Tᵀ + (I − T Tᵀ)/λ on those coordinates (the
// covariance carried along T, a direction of the new span outside the
// old one given the prior of an unseen direction, as Append does), its
// rows and columns of the bias and of coordinates m… ← T times theirs.
// Cost O(m³ + Cm² + (n−m)m²), two matrix products (0.9 s at m 800 on
// a loaded 2-core machine, BenchmarkMap); it allocates m² + m scratch
// values (a rebase is rare: kha's at 2B…16B observations, then every
// 16B).
func (cl *Classifier) Map(t []float64, m int) {
	w := cl.n + 1
	tm := blas64.General{Rows: m, Cols: m, Stride: m, Data: t[:m*m]}
	// W's rows: w[:m] ← T w[:m].
	v := make([]float64, m)
	for r := range cl.c {
		row := cl.w[r*w : (r+1)*w]
		copy(v, row[:m])
		blas64.Gemv(blas.NoTrans, 1, tm, blas64.Vector{N: m, Inc: 1, Data: v}, 0, blas64.Vector{N: m, Inc: 1, Data: row[:m]})
	}
	// P's block: T P Tᵀ + (I − T Tᵀ)/λ = T (P − I/λ) Tᵀ + I/λ, two products.
	pb := blas64.General{Rows: m, Cols: m, Stride: w, Data: cl.p}
	x := blas64.General{Rows: m, Cols: m, Stride: m, Data: make([]float64, m*m)}
	inv := 1 / cl.cfg.Ridge
	for i := range m {
		cl.p[i*w+i] -= inv
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, tm, pb, 0, x)
	blas64.Gemm(blas.NoTrans, blas.Trans, 1, x, tm, 0, pb)
	for i := range m {
		cl.p[i*w+i] += inv
	}
	// The columns (and rows) of the other coordinates and the bias: T
	// times the old column.
	for j := m; j < w; j++ {
		for i := range m {
			v[i] = cl.p[i*w+j]
		}
		for i := range m {
			s := blas64.Implementation().Ddot(m, t[i*m:(i+1)*m], 1, v, 1)
			cl.p[i*w+j], cl.p[j*w+i] = s, s
		}
	}
	// Symmetrise against rounding.
	for i := range m {
		for j := range i {
			a := 0.5 * (cl.p[i*w+j] + cl.p[j*w+i])
			cl.p[i*w+j], cl.p[j*w+i] = a, a
		}
	}
}

// Weights returns a copy of W: C rows of n+1 values, the n feature weights
// then the bias.
func (cl *Classifier) Weights() []float64 { return slices.Clone(cl.w) }

func rotate(v []float64, i, j int, c, s float64) {
	vi, vj := v[i], v[j]
	v[i] = c*vi + s*vj
	v[j] = -s*vi + c*vj
}

var _ learners.CoordMapper = (*Classifier)(nil)

// Basis is what a basis-aware classifier needs of a learner: whitened
// dictionary coordinates, and learning that reports every change of them.
// *learners.IKPCA implements it.
type Basis interface {
	// Budget is the largest number of coordinates B.
	Budget() int
	// Coords writes x's coordinates into dst (length B) and returns the
	// used prefix.
	Coords(dst, x []float64) ([]float64, error)
	// LearnTracked learns x, telling t of every change of coordinates.
	LearnTracked(x []float64, t learners.CoordTracker) error
	// CoordTransform writes the dual form α = L⁻ᵀw of n coordinate
	// weight rows (stride Budget) over the stored points (n×m).
	CoordTransform(dst, w []float64, n int) []float64
}

// OnBasis is a Classifier on a Basis learner's coordinates, kept
// basis-aware. Prequential use per observation: Learn (the learner learns
// x, the weights follow its coordinates), Predict, then Teach with the
// label when there is one. Not safe for concurrent use.
type OnBasis struct {
	b  Basis
	c  *Classifier
	z  []float64 // B: coordinates of the last x predicted
	nz int       // their number, −1 when none is held
}

// NewOnBasis returns an untrained classifier on b's coordinates; cfg.Dim
// is set to b.Budget().
func NewOnBasis(b Basis, cfg Config) (*OnBasis, error) {
	cfg.Dim = b.Budget()
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &OnBasis{b: b, c: c, z: make([]float64, cfg.Dim), nz: -1}, nil
}

// Classifier returns the classifier (for State, Restore and Weights).
func (o *OnBasis) Classifier() *Classifier { return o.c }

// Learn has the learner learn x and re-expresses the weights along.
func (o *OnBasis) Learn(x []float64) error {
	o.nz = -1
	return o.b.LearnTracked(x, o.c)
}

// Predict writes x's class scores into dst (length C) and returns the
// predicted class; it keeps x's coordinates for Teach.
func (o *OnBasis) Predict(dst, x []float64) (int, []float64, error) {
	z, err := o.b.Coords(o.z, x)
	if err != nil {
		o.nz = -1
		return -1, dst, err
	}
	o.nz = len(z)
	return o.c.Predict(dst, z)
}

// Teach learns class y for the x of the last Predict (the learner has not
// changed since). Without a preceding Predict it is an error.
func (o *OnBasis) Teach(y int) error {
	if o.nz < 0 {
		return fmt.Errorf("%w: teach without a prediction", ErrInput)
	}
	return o.c.Learn(o.z[:o.nz], y)
}

// State is a deep copy of a classifier's state, for snapshots. W is
// C×(n+1) and P (n+1)×(n+1), row-major.
type State struct {
	Config Config
	Seen   int64
	W, P   []float64
}

// State returns a deep copy of the classifier's state.
func (cl *Classifier) State() *State {
	return &State{Config: cl.cfg, Seen: cl.seen, W: slices.Clone(cl.w), P: slices.Clone(cl.p)}
}

// Restore replaces the state with s after checking its config (which
// must equal this classifier's but for the loss: W and P mean the same
// under both, so a saved state may be trained on with the other loss),
// shapes and finiteness; on error the classifier is unchanged.
func (cl *Classifier) Restore(s *State) error {
	if s == nil {
		return fmt.Errorf("%w: nil state", ErrState)
	}
	if sc := s.Config.withDefaults(); sc.Loss == LossSquared || sc.Loss == LossHinge {
		sc.Loss = cl.cfg.Loss
		if sc != cl.cfg {
			return fmt.Errorf("%w: config %+v, this classifier's is %+v", ErrState, s.Config.withDefaults(), cl.cfg)
		}
	} else {
		return fmt.Errorf("%w: unknown loss %q", ErrState, sc.Loss)
	}
	if len(s.W) != len(cl.w) || len(s.P) != len(cl.p) {
		return fmt.Errorf("%w: W has %d values and P %d, want %d and %d", ErrState, len(s.W), len(s.P), len(cl.w), len(cl.p))
	}
	if s.Seen < 0 {
		return fmt.Errorf("%w: seen %d", ErrState, s.Seen)
	}
	for _, v := range [][]float64{s.W, s.P} {
		for i, f := range v {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("%w: value %d is %v", ErrState, i, f)
			}
		}
	}
	copy(cl.w, s.W)
	copy(cl.p, s.P)
	cl.seen = s.Seen
	clear(cl.drop)
	return nil
}

// FromState returns a classifier restored from s (its config from s).
func FromState(s *State) (*Classifier, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil state", ErrState)
	}
	cl, err := New(s.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	if err := cl.Restore(s); err != nil {
		return nil, err
	}
	return cl, nil
}

// Export returns the classifier in the model export's dual form over the
// learner's stored points, in their order (Model.Points): scores
// s_c(x) = Σⱼ Alpha[j][c]·k(dⱼ, x) + Bias[c], equal to Predict's up to
// rounding. classes names the C classes. Cost O(C·B²).
func (o *OnBasis) Export(classes []string) (*learners.ModelClassifier, error) {
	c := o.c
	if len(classes) != c.c {
		return nil, fmt.Errorf("%w: %d class names for %d classes", ErrConfig, len(classes), c.c)
	}
	b, w := c.n, c.n+1
	rows := make([]float64, c.c*b)
	for r := range c.c {
		copy(rows[r*b:(r+1)*b], c.w[r*w:r*w+b])
	}
	alpha := o.b.CoordTransform(nil, rows, c.c)
	m := len(alpha) / c.c
	ex := &learners.ModelClassifier{Classes: slices.Clone(classes), Alpha: make([][]float64, m), Bias: make([]float64, c.c)}
	for j := range m {
		ex.Alpha[j] = make([]float64, c.c)
		for r := range c.c {
			ex.Alpha[j][r] = alpha[r*m+j]
		}
	}
	for r := range c.c {
		ex.Bias[r] = c.w[r*w+b]
	}
	return ex, nil
}
