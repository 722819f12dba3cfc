package processor

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

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
	return &pcaLearner{cfg: cfg, mean: make([]float64, d), scatter: make([]float64, d*d)}, nil
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
	delta := make([]float64, d)
	for i := range d {
		delta[i] = x[i] - l.mean[i]
		l.mean[i] += delta[i] / float64(l.n)
	}
	for i := range d {
		for j := range d {
			l.scatter[i*d+j] += delta[i] * (x[j] - l.mean[j])
		}
	}
	l.basis++
	return nil
}

// eig returns the eigenvalues (largest first) and eigenvectors (columns) of the covariance.
func (l *pcaLearner) eig() ([]float64, *mat.Dense) {
	d := l.cfg.Dim
	cov := make([]float64, d*d)
	for i := range cov {
		cov[i] = l.scatter[i] / float64(l.n)
	}
	for i := range d {
		for j := range i {
			v := (cov[i*d+j] + cov[j*d+i]) / 2
			cov[i*d+j], cov[j*d+i] = v, v
		}
	}
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(d, cov), true) {
		return nil, nil
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	// Largest first.
	slices.Reverse(vals)
	rev := mat.NewDense(d, d, nil)
	for j := range d {
		for i := range d {
			rev.Set(i, j, vecs.At(i, d-1-j))
		}
	}
	return vals, rev
}

func (l *pcaLearner) Transform(dst, x []float64) ([]float64, error) {
	z, _, err := l.Score(dst, x)
	return z, err
}

func (l *pcaLearner) Score(dst, x []float64) ([]float64, learners.Novelty, error) {
	if err := l.check(x); err != nil {
		return nil, learners.Novelty{}, err
	}
	if l.n < pcaWarm {
		return nil, learners.Novelty{}, learners.ErrNotReady
	}
	k, d := l.cfg.Components, l.cfg.Dim
	if dst == nil {
		dst = make([]float64, k)
	}
	vals, vecs := l.eig()
	if vals == nil {
		return nil, learners.Novelty{}, learners.ErrNumerical
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
			s += vecs.At(i, c) * (x[i] - l.mean[i])
		}
		dst[c] = s
		nov.SPE -= s * s
		if vals[c] > 0 {
			nov.T2 += s * s / vals[c]
		}
	}
	nov.SPE += total
	return dst, nov, nil
}

func (l *pcaLearner) Summary(dst []float64) learners.Summary {
	s := learners.Summary{BasisVersion: l.basis, Stored: int(min(l.n, int64(l.cfg.Budget))), Ready: l.n >= pcaWarm}
	if !s.Ready {
		return s
	}
	vals, _ := l.eig()
	k := l.cfg.Components
	if dst == nil {
		dst = make([]float64, k)
	}
	copy(dst, vals[:k])
	s.Eigenvalues = dst
	tot, top := 0.0, 0.0
	for i, v := range vals {
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

func (l *pcaLearner) Restore(s *learners.State) error {
	d := l.cfg.Dim
	if s == nil || s.Kind != pcaKind || s.Config.WithDefaults() != l.cfg {
		return fmt.Errorf("%w: not a matching %s state", learners.ErrState, pcaKind)
	}
	m, sc := s.Matrices["mean"], s.Matrices["scatter"]
	if len(m.Data) != d || len(sc.Data) != d*d || s.Seen < 0 {
		return fmt.Errorf("%w: bad shapes", learners.ErrState)
	}
	l.n, l.basis = s.Seen, uint64(s.Ints["basis"])
	copy(l.mean, m.Data)
	copy(l.scatter, sc.Data)
	return nil
}

func (l *pcaLearner) Model() (*learners.Model, error) {
	if l.n < pcaWarm {
		return nil, learners.ErrNotReady
	}
	vals, vecs := l.eig()
	d, k := l.cfg.Dim, l.cfg.Components
	m := &learners.Model{Format: learners.ModelFormat, Learner: pcaKind, Kernel: learners.Kernel{Name: learners.KernelLinear},
		Offsets: make([]float64, k), Eigenvalues: slices.Clone(vals[:k]), Seen: l.n}
	for j := range d {
		p := make([]float64, d)
		p[j] = 1
		m.Points = append(m.Points, p)
		row := make([]float64, k)
		for c := range k {
			row[c] = vecs.At(j, c)
			m.Offsets[c] += vecs.At(j, c) * l.mean[j]
		}
		m.Coefficients = append(m.Coefficients, row)
	}
	return m, nil
}
