package e2e

import (
	"fmt"
	"math"

	"github.com/kpcastream/kpcastream/learners"
)

// passKind is the kind of passLearner.
const passKind = "pass"

// passLearner is the baseline's learner: it learns nothing but a count and
// projects x onto its first k coordinates, so that the baseline phase runs
// the real processor (consume, dispatch, decode, snapshot, encode, publish,
// ack) with the learner's own cost taken out. It keeps every promise of
// learners.Learner (its test runs learnertest.Check).
type passLearner struct {
	cfg learners.Config
	n   int64
}

func newPassLearner(cfg learners.Config) (learners.Learner, error) {
	if cfg.Dim < 1 || cfg.Components < 1 || cfg.Components > cfg.Dim || cfg.Budget < 1 {
		return nil, fmt.Errorf("%w: pass learner needs 1 ≤ components ≤ dim and budget ≥ 1, got d=%d k=%d B=%d",
			learners.ErrConfig, cfg.Dim, cfg.Components, cfg.Budget)
	}
	return &passLearner{cfg: cfg}, nil
}

func (l *passLearner) Kind() string    { return passKind }
func (l *passLearner) Dim() int        { return l.cfg.Dim }
func (l *passLearner) Components() int { return l.cfg.Components }
func (l *passLearner) Seen() int64     { return l.n }

func (l *passLearner) check(x []float64) error {
	if len(x) != l.cfg.Dim {
		return fmt.Errorf("%w: got %d values, want %d", learners.ErrDimension, len(x), l.cfg.Dim)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: element %d is %v", learners.ErrNonFinite, i, v)
		}
	}
	return nil
}

func (l *passLearner) Learn(x []float64) error {
	if err := l.check(x); err != nil {
		return err
	}
	l.n++
	return nil
}

func (l *passLearner) Transform(dst, x []float64) ([]float64, error) {
	z, _, err := l.Score(dst, x)
	return z, err
}

// Score projects x onto its first k coordinates; SPE is the squared norm
// of the rest, T² is 0 (the learner has no variances).
func (l *passLearner) Score(dst, x []float64) ([]float64, learners.Novelty, error) {
	k := l.cfg.Components
	if dst != nil && len(dst) != k {
		panic(fmt.Sprintf("pass learner: dst of length %d, want %d", len(dst), k))
	}
	if err := l.check(x); err != nil {
		return nil, learners.Novelty{}, err
	}
	if l.n == 0 {
		return nil, learners.Novelty{}, learners.ErrNotReady
	}
	if dst == nil {
		dst = make([]float64, k)
	}
	copy(dst, x[:k])
	var nov learners.Novelty
	for _, v := range x[k:] {
		nov.SPE += v * v
	}
	return dst, nov, nil
}

func (l *passLearner) Summary(dst []float64) learners.Summary {
	s := learners.Summary{Stored: int(min(l.n, int64(l.cfg.Budget))), Ready: l.n > 0}
	if !s.Ready {
		return s
	}
	k := l.cfg.Components
	if dst == nil {
		dst = make([]float64, k)
	}
	clear(dst)
	s.Eigenvalues = dst
	return s
}

func (l *passLearner) State() *learners.State {
	return &learners.State{Version: learners.StateVersion, Kind: passKind, Config: l.cfg, Seen: l.n}
}

func (l *passLearner) Restore(s *learners.State) error {
	if s == nil || s.Version != learners.StateVersion || s.Kind != passKind || s.Config != l.cfg || s.Seen < 0 {
		return fmt.Errorf("%w: not a %s state of this configuration", learners.ErrState, passKind)
	}
	l.n = s.Seen
	return nil
}

// Model is the projection as an export: a linear kernel against the unit
// vectors, coefficient 1 from eⱼ to component j < k.
func (l *passLearner) Model() (*learners.Model, error) {
	if l.n == 0 {
		return nil, learners.ErrNotReady
	}
	d, k := l.cfg.Dim, l.cfg.Components
	m := &learners.Model{Format: learners.ModelFormat, Learner: passKind, Kernel: learners.Kernel{Name: learners.KernelLinear},
		Offsets: make([]float64, k), Eigenvalues: make([]float64, k), Seen: l.n}
	for j := range d {
		p, row := make([]float64, d), make([]float64, k)
		p[j] = 1
		if j < k {
			row[j] = 1
		}
		m.Points, m.Coefficients = append(m.Points, p), append(m.Coefficients, row)
	}
	return m, nil
}
