package processor

import (
	"fmt"
	"math"
	"slices"

	"github.com/kpcastream/kpcastream/learners"
)

// pcaLearner is a small but real learner for the tests (linear PCA from a
// running mean and scatter matrix), used until the kernel learners land.
// It panics on an observation whose first value is panicValue, to test the
// worker's panic recovery.
type pcaLearner struct {
	cfg     learners.Config
	n       int64
	mean    []float64 // d
	scatter []float64 // d×d, Σ (x−m)(x−m)ᵀ
	basis   uint64
	// Derived from mean and scatter after every change (never in State):
	// the eigenvalues of the covariance, largest first, and its
	// eigenvectors as columns of vecs (d×d), so that Transform, Score and
	// Summary allocate nothing.
	vals, vecs []float64
	cov, delta []float64 // eig's and Learn's scratch
}

const (
	pcaKind    = "testpca"
	pcaWarm    = 4 // observations before Transform works
	panicValue = 12345.0
)

func newPCA(cfg learners.Config) (learners.Learner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	d := cfg.Dim
	return &pcaLearner{cfg: cfg, mean: make([]float64, d), scatter: make([]float64, d*d),
		vals: make([]float64, d), vecs: make([]float64, d*d), cov: make([]float64, d*d), delta: make([]float64, d)}, nil
}

// restorePCA is learners.Restore for the test learner.
func restorePCA(s *learners.State) (learners.Learner, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil state", learners.ErrState)
	}
	l, err := newPCA(s.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", learners.ErrState, err)
	}
	if err := l.Restore(s); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *pcaLearner) Kind() string    { return pcaKind }
func (l *pcaLearner) Dim() int        { return l.cfg.Dim }
func (l *pcaLearner) Components() int { return l.cfg.Components }
func (l *pcaLearner) Seen() int64     { return l.n }

func (l *pcaLearner) check(x []float64) error {
	if len(x) != l.cfg.Dim {
		return fmt.Errorf("%w: got %d, want %d", learners.ErrDimension, len(x), l.cfg.Dim)
	}
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return learners.ErrNonFinite
		}
	}
	return nil
}

func (l *pcaLearner) Learn(x []float64) error {
	if err := l.check(x); err != nil {
		return err
	}
	if x[0] == panicValue {
		panic("testpca: panic value")
	}
	d := l.cfg.Dim
	l.n++
	for i := range d {
		l.delta[i] = x[i] - l.mean[i]
		l.mean[i] += l.delta[i] / float64(l.n)
	}
	for i := range d {
		for j := range d {
			l.scatter[i*d+j] += l.delta[i] * (x[j] - l.mean[j])
		}
	}
	l.basis++
	l.eig()
	return nil
}

// eig sets vals and vecs to the eigen-decomposition of the covariance
// scatter/n (symmetrised) by cyclic Jacobi rotations, in place.
func (l *pcaLearner) eig() {
	d := l.cfg.Dim
	cov, v := l.cov, l.vecs
	for i := range d {
		for j := range d {
			cov[i*d+j] = (l.scatter[i*d+j] + l.scatter[j*d+i]) / (2 * float64(l.n))
			v[i*d+j] = 0
		}
		v[i*d+i] = 1
	}
	for sweep := 0; sweep < 64; sweep++ {
		off := 0.0
		for i := range d {
			for j := i + 1; j < d; j++ {
				off += cov[i*d+j] * cov[i*d+j]
			}
		}
		if off < 1e-30 {
			break
		}
		for p := range d {
			for q := p + 1; q < d; q++ {
				apq := cov[p*d+q]
				if apq == 0 {
					continue
				}
				theta := (cov[q*d+q] - cov[p*d+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range d { // columns p and q of cov·J
					akp, akq := cov[k*d+p], cov[k*d+q]
					cov[k*d+p], cov[k*d+q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range d { // rows p and q of Jᵀ·cov
					apk, aqk := cov[p*d+k], cov[q*d+k]
					cov[p*d+k], cov[q*d+k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range d {
					vkp, vkq := v[k*d+p], v[k*d+q]
					v[k*d+p], v[k*d+q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	for i := range d {
		l.vals[i] = max(cov[i*d+i], 0)
	}
	// Largest first (selection sort, swapping eigenvector columns along).
	for i := range d {
		m := i
		for j := i + 1; j < d; j++ {
			if l.vals[j] > l.vals[m] {
				m = j
			}
		}
		if m != i {
			l.vals[i], l.vals[m] = l.vals[m], l.vals[i]
			for k := range d {
				v[k*d+i], v[k*d+m] = v[k*d+m], v[k*d+i]
			}
		}
	}
}

func (l *pcaLearner) Transform(dst, x []float64) ([]float64, error) {
	z, _, err := l.Score(dst, x)
	return z, err
}

func (l *pcaLearner) Score(dst, x []float64) ([]float64, learners.Novelty, error) {
	k, d := l.cfg.Components, l.cfg.Dim
	if dst != nil && len(dst) != k {
		panic(fmt.Sprintf("testpca: dst of length %d, want %d", len(dst), k))
	}
	if err := l.check(x); err != nil {
		return nil, learners.Novelty{}, err
	}
	if l.n < pcaWarm {
		return nil, learners.Novelty{}, learners.ErrNotReady
	}
	if dst == nil {
		dst = make([]float64, k)
	}
	var nov learners.Novelty
	total := 0.0
	for i := range d {
		c := x[i] - l.mean[i]
		total += c * c
	}
	for c := range k {
		s := 0.0
		for i := range d {
			s += l.vecs[i*d+c] * (x[i] - l.mean[i])
		}
		dst[c] = s
		nov.SPE -= s * s
		if l.vals[c] > 0 {
			nov.T2 += s * s / l.vals[c]
		}
	}
	nov.SPE = max(nov.SPE+total, 0)
	return dst, nov, nil
}

func (l *pcaLearner) Summary(dst []float64) learners.Summary {
	s := learners.Summary{BasisVersion: l.basis, Stored: int(min(l.n, int64(l.cfg.Budget))), Ready: l.n >= pcaWarm}
	if !s.Ready {
		return s
	}
	k := l.cfg.Components
	if dst == nil {
		dst = make([]float64, k)
	}
	copy(dst, l.vals[:k])
	s.Eigenvalues = dst
	tot, top := 0.0, 0.0
	for i, v := range l.vals {
		tot += v
		if i < k {
			top += v
		}
	}
	if tot > 0 {
		s.ExplainedVariance = top / tot
	}
	return s
}

func (l *pcaLearner) State() *learners.State {
	d := l.cfg.Dim
	return &learners.State{
		Version: learners.StateVersion, Kind: pcaKind, Config: l.cfg, Seen: l.n,
		Ints:     map[string]int64{"basis": int64(l.basis)},
		Scalars:  map[string]float64{},
		Matrices: map[string]learners.Matrix{"mean": {Rows: 1, Cols: d, Data: slices.Clone(l.mean)}, "scatter": {Rows: d, Cols: d, Data: slices.Clone(l.scatter)}},
	}
}

// Restore checks everything before it changes anything.
func (l *pcaLearner) Restore(s *learners.State) error {
	d := l.cfg.Dim
	if s == nil || s.Version != learners.StateVersion || s.Kind != pcaKind || s.Config.WithDefaults() != l.cfg {
		return fmt.Errorf("%w: not a matching %s state", learners.ErrState, pcaKind)
	}
	basis, ok := s.Ints["basis"]
	if !ok || basis < 0 || s.Seen < 0 {
		return fmt.Errorf("%w: basis or seen missing or negative", learners.ErrState)
	}
	for name, rows := range map[string]int{"mean": 1, "scatter": d} {
		m, ok := s.Matrices[name]
		if !ok || m.Rows != rows || m.Cols != d || len(m.Data) != rows*d {
			return fmt.Errorf("%w: matrix %s missing or not %d×%d", learners.ErrState, name, rows, d)
		}
		for _, v := range m.Data {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: matrix %s holds %v", learners.ErrState, name, v)
			}
		}
	}
	l.n, l.basis = s.Seen, uint64(basis)
	copy(l.mean, s.Matrices["mean"].Data)
	copy(l.scatter, s.Matrices["scatter"].Data)
	if l.n > 0 {
		l.eig()
	}
	return nil
}

func (l *pcaLearner) Model() (*learners.Model, error) {
	if l.n < pcaWarm {
		return nil, learners.ErrNotReady
	}
	d, k := l.cfg.Dim, l.cfg.Components
	m := &learners.Model{Format: learners.ModelFormat, Learner: pcaKind, Kernel: learners.Kernel{Name: learners.KernelLinear},
		Offsets: make([]float64, k), Eigenvalues: slices.Clone(l.vals[:k]), Seen: l.n}
	for j := range d {
		p := make([]float64, d)
		p[j] = 1
		m.Points = append(m.Points, p)
		row := make([]float64, k)
		for c := range k {
			row[c] = l.vecs[j*d+c]
			m.Offsets[c] += l.vecs[j*d+c] * l.mean[j]
		}
		m.Coefficients = append(m.Coefficients, row)
	}
	return m, nil
}
