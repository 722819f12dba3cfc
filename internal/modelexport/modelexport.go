package modelexport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
)

// Model is the model export as any program reads it: plain JSON
// (README, "The model export format").
type Model struct {
	Format string `json:"format"`
	Kernel struct {
		Name   string   `json:"name"`
		Gamma  *float64 `json:"gamma"`
		Degree *int     `json:"degree"`
		Coef0  *float64 `json:"coef0"`
	} `json:"kernel"`
	Points       [][]float64 `json:"points"`
	Coefficients [][]float64 `json:"coefficients"`
	Offsets      []float64   `json:"offsets"`
	// Preprocess, when present, applies to the raw row first:
	// x'ⱼ = (xⱼ − mean[j]) / scale[j].
	Preprocess *struct {
		Standardize *struct {
			Mean  []float64 `json:"mean"`
			Scale []float64 `json:"scale"`
		} `json:"standardize"`
	} `json:"preprocess"`
	// Monitor, when present, is the key's monitoring section: its limits
	// and, with monitor.linear, the linear residual (Model.LinearIndex).
	Monitor *struct {
		Level    float64 `json:"level"`
		Learn    string  `json:"learn"`
		SPELimit float64 `json:"spe_limit"`
		T2Limit  float64 `json:"t2_limit"`
		Linear   *struct {
			Mean       []float64   `json:"mean"`
			Components [][]float64 `json:"components"`
			LSPELimit  float64     `json:"lspe_limit"`
		} `json:"linear"`
	} `json:"monitor"`
	// Classifier, when present: score of class c is
	// Σⱼ alpha[j][c]·k(points[j], x') + bias[c]; the prediction is the
	// class of the largest score (the first on ties).
	Classifier *struct {
		Classes []string    `json:"classes"`
		Alpha   [][]float64 `json:"alpha"`
		Bias    []float64   `json:"bias"`
	} `json:"classifier"`
}

// Read reads and checks a model export: its format, kernel, and that
// the arrays agree (p points of d values, p rows of k coefficients, k offsets).
func Read(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Model
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: not a model export: %w", path, err)
	}
	if m.Format != "kpcastream.model/v1" {
		return nil, fmt.Errorf("%s: format %q, want kpcastream.model/v1", path, m.Format)
	}
	k := len(m.Offsets)
	if len(m.Points) == 0 || len(m.Points) != len(m.Coefficients) || k == 0 {
		return nil, fmt.Errorf("%s: %d points, %d coefficient rows, %d offsets: want p ≥ 1 of each, and k ≥ 1 offsets", path, len(m.Points), len(m.Coefficients), k)
	}
	d := len(m.Points[0])
	for j := range m.Points {
		if len(m.Points[j]) != d || len(m.Coefficients[j]) != k {
			return nil, fmt.Errorf("%s: point %d has %d values and %d coefficients, want %d and %d", path, j, len(m.Points[j]), len(m.Coefficients[j]), d, k)
		}
	}
	if pp := m.Preprocess; pp != nil {
		st := pp.Standardize
		if st == nil || len(st.Mean) != d || len(st.Scale) != d {
			return nil, fmt.Errorf("%s: preprocess.standardize needs mean and scale of %d values", path, d)
		}
		for j, v := range st.Scale {
			if !(v > 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: preprocess.standardize.scale[%d] is %v, want > 0", path, j, v)
			}
		}
	}
	if mo := m.Monitor; mo != nil && mo.Linear != nil {
		l := mo.Linear
		if len(l.Mean) != d || len(l.Components) < 1 || len(l.Components) >= d {
			return nil, fmt.Errorf("%s: monitor.linear has %d means and %d components, want %d and 1 to %d", path, len(l.Mean), len(l.Components), d, d-1)
		}
		for i, c := range l.Components {
			if len(c) != d {
				return nil, fmt.Errorf("%s: monitor.linear component %d has %d values, want %d", path, i, len(c), d)
			}
		}
	}
	if c := m.Classifier; c != nil {
		if len(c.Classes) < 2 || len(c.Alpha) != len(m.Points) || len(c.Bias) != len(c.Classes) {
			return nil, fmt.Errorf("%s: classifier has %d classes, %d alpha rows and %d biases, want ≥ 2, %d and one per class", path, len(c.Classes), len(c.Alpha), len(c.Bias), len(m.Points))
		}
		for j, a := range c.Alpha {
			if len(a) != len(c.Classes) {
				return nil, fmt.Errorf("%s: classifier alpha row %d has %d values, want %d", path, j, len(a), len(c.Classes))
			}
		}
	}
	kn := m.Kernel
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s: kernel %s needs %s", path, kn.Name, what)
		}
		return nil
	}
	switch kn.Name {
	case "linear":
	case "rbf", "laplacian":
		err = need(kn.Gamma != nil, "gamma")
	case "poly":
		err = errors.Join(need(kn.Gamma != nil, "gamma"), need(kn.Degree != nil, "degree"), need(kn.Coef0 != nil, "coef0"))
	case "sigmoid":
		err = errors.Join(need(kn.Gamma != nil, "gamma"), need(kn.Coef0 != nil, "coef0"))
	default:
		err = fmt.Errorf("%s: unknown kernel %q", path, kn.Name)
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// kernel is k(p, x) with scikit-learn's definitions, written out.
func (m *Model) kernel(p, x []float64) float64 {
	dot, sq, abs := 0.0, 0.0, 0.0
	for i := range p {
		dot += p[i] * x[i]
		d := p[i] - x[i]
		sq += d * d
		abs += math.Abs(d)
	}
	kn := m.Kernel
	switch kn.Name {
	case "rbf":
		return math.Exp(-*kn.Gamma * sq)
	case "laplacian":
		return math.Exp(-*kn.Gamma * abs)
	case "poly":
		return math.Pow(*kn.Gamma*dot+*kn.Coef0, float64(*kn.Degree))
	case "sigmoid":
		return math.Tanh(*kn.Gamma*dot + *kn.Coef0)
	}
	return dot // linear
}

// Prepare writes the preprocessed x into dst and returns it (x itself
// without a preprocess section).
func (m *Model) Prepare(dst, x []float64) []float64 {
	if m.Preprocess == nil {
		return x
	}
	st := m.Preprocess.Standardize
	for j, v := range x {
		dst[j] = (v - st.Mean[j]) / st.Scale[j]
	}
	return dst
}

// Classify writes the class scores of the preprocessed x into s and
// returns the index of the predicted class.
func (m *Model) Classify(s, x []float64) int {
	c := m.Classifier
	copy(s, c.Bias)
	for j, p := range m.Points {
		kv := m.kernel(p, x)
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
	return best
}

// Project writes component i of x into z: Σⱼ coefficients[j][i]·k(points[j], x) − offsets[i].
func (m *Model) Project(z, x []float64) {
	for i := range z {
		z[i] = -m.Offsets[i]
	}
	for j, p := range m.Points {
		kv := m.kernel(p, x)
		for i, c := range m.Coefficients[j] {
			z[i] += c * kv
		}
	}
}

// HasLinear tells whether the export has a linear residual (monitor.linear).
func (m *Model) HasLinear() bool { return m.Monitor != nil && m.Monitor.Linear != nil }

// LinearIndex returns the linear residual's statistic of the preprocessed
// x (the output's lspe; HasLinear must hold): with r = x − mean minus its
// projection on the components, the largest r_j²/(1 − Σᵢ components[i][j]²)
// over the variables whose share exceeds 10⁻⁶.
func (m *Model) LinearIndex(x []float64) float64 {
	l := m.Monitor.Linear
	r := make([]float64, len(x))
	for j, v := range x {
		r[j] = v - l.Mean[j]
	}
	dx := append([]float64(nil), r...)
	for _, c := range l.Components {
		var s float64
		for j, v := range c {
			s += v * dx[j]
		}
		for j, v := range c {
			r[j] -= s * v
		}
	}
	var best float64
	for j := range r {
		share := 1.0
		for _, c := range l.Components {
			share -= c[j] * c[j]
		}
		if share > 1e-6 {
			best = max(best, r[j]*r[j]/share)
		}
	}
	return best
}
