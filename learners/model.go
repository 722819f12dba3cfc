package learners

import (
	"fmt"
	"math"

	"github.com/kpcastream/kpcastream/internal/fielderr"
)

// ModelFormat is the format tag of the portable model export.
const ModelFormat = "kpcastream.model/v1"

// Model is the portable export of a learner's components, the same for every
// learner: component i of x is
//
//	yᵢ(x) = Σⱼ Coefficients[j][i]·k(Points[j], x) − Offsets[i]
//
// and Eigenvalues are in the covariance-operator convention (eigenvalues of
// K̃/N), largest first. codec writes it as JSON:
//
//	{"format":"kpcastream.model/v1","learner":"ikpca","kernel":{"name":"rbf","gamma":0.5},
//	 "points":[[…d…],…p rows],"coefficients":[[…k…],…p rows],"offsets":[…k],"eigenvalues":[…k],"seen":n}
type Model struct {
	Format       string
	Learner      string
	Kernel       Kernel
	Points       [][]float64 // p×d
	Coefficients [][]float64 // p×k
	Offsets      []float64   // k
	Eigenvalues  []float64   // k
	Seen         int64
	// Classifier is the optional classifier section (a pipeline's
	// classifier stage, replay --label), nil without one.
	Classifier *ModelClassifier
	// Preprocess is the optional preprocessing section: the model applies
	// to (x − Mean)/Scale, and Transform and Predict apply it first. Nil
	// without one (the model applies to x as it is).
	Preprocess *ModelPreprocess
	// Monitor is the optional monitoring section: the control limits the
	// model's key was judged by. Nil without one.
	Monitor *ModelMonitor
}

// ModelPreprocess is the standardisation of the inputs: x'ⱼ = (xⱼ − Mean[j])/Scale[j],
// with Mean and Scale of length d and every Scale > 0.
type ModelPreprocess struct {
	Mean, Scale []float64
}

// ModelMonitor is the monitoring section: the limits of the statistics
// at Level (see learners/monitor) and the learning mode ("always" or
// "normal"). A limit of 0 means the limits were not yet in force.
type ModelMonitor struct {
	Level             float64
	Learn             string
	SPELimit, T2Limit float64
	// Linear is the linear residual (monitor.linear), nil without one or
	// before its model is ready.
	Linear *ModelLinear
}

// ModelLinear is the monitor's linear residual, in the frame the learner
// sees (after Preprocess): r = (I − PPᵀ)(x − Mean) with P the Components
// (k unit vectors of d values, orthonormal), and its statistic
// max_j r_j²/(1 − Σᵢ Components[i][j]²) over the variables j whose
// share 1 − Σᵢ Components[i][j]² exceeds 10⁻⁶, judged by LSPELimit (0:
// not yet in force). See learners/monitor's linear.go.
type ModelLinear struct {
	Mean       []float64
	Components [][]float64
	LSPELimit  float64
}

// Apply writes the preprocessed x into dst (allocated when nil) and
// returns it; without a preprocessing section it returns x itself.
func (m *Model) Apply(dst, x []float64) []float64 {
	p := m.Preprocess
	if p == nil {
		return x
	}
	if dst == nil {
		dst = make([]float64, len(x))
	}
	for j, v := range x {
		dst[j] = (v - p.Mean[j]) / p.Scale[j]
	}
	return dst
}

// ModelClassifier is a classifier on the model's points: the score of
// class c for x is
//
//	s_c(x) = Σⱼ Alpha[j][c]·k(Points[j], x) + Bias[c]
//
// and the prediction is the class with the largest score (the first on
// ties). Alpha is p×C (one row per point, as Coefficients), Bias and
// Classes have C entries.
type ModelClassifier struct {
	Classes []string
	Alpha   [][]float64 // p×C
	Bias    []float64   // C
}

// Predict returns the scores of x (allocated) and the predicted class index.
func (m *Model) Predict(x []float64) ([]float64, int) {
	x = m.Apply(nil, x)
	c := m.Classifier
	s := append([]float64(nil), c.Bias...)
	for j, p := range m.Points {
		kv := m.Kernel.Eval(p, x)
		for i, a := range c.Alpha[j] {
			s[i] += a * kv
		}
	}
	best := 0
	for i, v := range s {
		if v > s[best] {
			best = i
		}
	}
	return s, best
}

// Dims returns the number of points p, the dimension d and the number of components k.
func (m *Model) Dims() (p, d, k int) {
	p = len(m.Points)
	if p > 0 {
		d = len(m.Points[0])
	}
	return p, d, len(m.Offsets)
}

// Validate checks the model's format, kernel, shapes and finiteness.
func (m *Model) Validate() error {
	if m.Format != ModelFormat {
		return fmt.Errorf("%w: model format %q, want %q", ErrState, m.Format, ModelFormat)
	}
	if errs := fielderr.Prefix(ErrConfig.Error(), "kernel", m.Kernel.Validate()); errs != nil {
		return errs[0]
	}
	p, d, k := m.Dims()
	if p == 0 || d == 0 || k == 0 {
		return fmt.Errorf("%w: model has %d points of dimension %d and %d components", ErrState, p, d, k)
	}
	if len(m.Coefficients) != p || len(m.Eigenvalues) != k {
		return fmt.Errorf("%w: model has %d coefficient rows and %d eigenvalues, want %d and %d", ErrState, len(m.Coefficients), len(m.Eigenvalues), p, k)
	}
	finite := func(what string, v []float64, n int) error {
		if len(v) != n {
			return fmt.Errorf("%w: model %s has length %d, want %d", ErrState, what, len(v), n)
		}
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: model %s holds %v", ErrState, what, x)
			}
		}
		return nil
	}
	for j := range p {
		if err := finite("point", m.Points[j], d); err != nil {
			return err
		}
		if err := finite("coefficient row", m.Coefficients[j], k); err != nil {
			return err
		}
	}
	if err := finite("offsets", m.Offsets, k); err != nil {
		return err
	}
	if err := finite("eigenvalues", m.Eigenvalues, k); err != nil {
		return err
	}
	if pp := m.Preprocess; pp != nil {
		if err := finite("preprocess mean", pp.Mean, d); err != nil {
			return err
		}
		if err := finite("preprocess scale", pp.Scale, d); err != nil {
			return err
		}
		for j, v := range pp.Scale {
			if !(v > 0) {
				return fmt.Errorf("%w: model preprocess scale %d is %v, want > 0", ErrState, j, v)
			}
		}
	}
	if mo := m.Monitor; mo != nil {
		if !(mo.Level > 0 && mo.Level < 1) || (mo.Learn != "always" && mo.Learn != "normal") {
			return fmt.Errorf("%w: model monitor level %v learn %q, want in (0, 1) and always or normal", ErrState, mo.Level, mo.Learn)
		}
		if err := finite("monitor limits", []float64{mo.SPELimit, mo.T2Limit}, 2); err != nil {
			return err
		}
		if mo.SPELimit < 0 || mo.T2Limit < 0 {
			return fmt.Errorf("%w: model monitor limits %v and %v, want ≥ 0", ErrState, mo.SPELimit, mo.T2Limit)
		}
		if l := mo.Linear; l != nil {
			if err := finite("monitor linear mean", l.Mean, d); err != nil {
				return err
			}
			if len(l.Components) < 1 || len(l.Components) >= d {
				return fmt.Errorf("%w: model monitor linear has %d components, want 1 ≤ k < d = %d", ErrState, len(l.Components), d)
			}
			for i, c := range l.Components {
				if err := finite(fmt.Sprintf("monitor linear component %d", i), c, d); err != nil {
					return err
				}
			}
			if !(l.LSPELimit >= 0) || math.IsInf(l.LSPELimit, 0) {
				return fmt.Errorf("%w: model monitor linear limit %v, want finite ≥ 0", ErrState, l.LSPELimit)
			}
		}
	}
	if c := m.Classifier; c != nil {
		nc := len(c.Classes)
		if nc < 2 || len(c.Alpha) != p {
			return fmt.Errorf("%w: model classifier has %d classes and %d alpha rows, want ≥ 2 and %d", ErrState, nc, len(c.Alpha), p)
		}
		seen := map[string]bool{}
		for _, name := range c.Classes {
			if name == "" || seen[name] {
				return fmt.Errorf("%w: model classifier class %q is empty or repeated", ErrState, name)
			}
			seen[name] = true
		}
		for j := range p {
			if err := finite("classifier alpha row", c.Alpha[j], nc); err != nil {
				return err
			}
		}
		return finite("classifier bias", c.Bias, nc)
	}
	return nil
}

// Transform applies the model to x (after the preprocessing section, if
// any): dst[i] = Σⱼ Coefficients[j][i]·k(Points[j], x) − Offsets[i].
// It allocates dst when nil and is meant for evaluation, not the hot path.
func (m *Model) Transform(dst, x []float64) []float64 {
	_, _, k := m.Dims()
	dst = prepareDst(dst, k)
	x = m.Apply(nil, x)
	for i := range dst {
		dst[i] = -m.Offsets[i]
	}
	for j, p := range m.Points {
		kv := m.Kernel.Eval(p, x)
		for i, c := range m.Coefficients[j] {
			dst[i] += c * kv
		}
	}
	return dst
}

// modelFrom builds a Model from row-major arrays: points p×d, coef p×k.
func modelFrom(kind string, kern Kernel, points []float64, p, d int, coef []float64, k int, offsets, eig []float64, seen int64) *Model {
	m := &Model{
		Format:       ModelFormat,
		Learner:      kind,
		Kernel:       kern,
		Points:       make([][]float64, p),
		Coefficients: make([][]float64, p),
		Offsets:      append([]float64(nil), offsets[:k]...),
		Eigenvalues:  append([]float64(nil), eig[:k]...),
		Seen:         seen,
	}
	for j := range p {
		m.Points[j] = append([]float64(nil), points[j*d:(j+1)*d]...)
		m.Coefficients[j] = append([]float64(nil), coef[j*k:(j+1)*k]...)
	}
	return m
}
