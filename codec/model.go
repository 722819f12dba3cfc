package codec

import (
	"encoding/json"
	"fmt"

	"github.com/kpcastream/kpcastream/learners"
)

// Wire structs of the model export. Field order is the order on the wire.
type wireModel struct {
	Format       string          `json:"format"`
	Learner      string          `json:"learner"`
	Kernel       wireModelKernel `json:"kernel"`
	Points       [][]float64     `json:"points"`
	Coefficients [][]float64     `json:"coefficients"`
	Offsets      []float64       `json:"offsets"`
	Eigenvalues  []float64       `json:"eigenvalues"`
	Seen         int64           `json:"seen"`
	// Classifier is the optional classifier section.
	Classifier *wireModelClassifier `json:"classifier,omitempty"`
	// Preprocess and Monitor are the optional preprocessing and monitoring sections.
	Preprocess *wireModelPreprocess `json:"preprocess,omitempty"`
	Monitor    *wireModelMonitor    `json:"monitor,omitempty"`
}

type wireModelPreprocess struct {
	Standardize *wireStandardize `json:"standardize"`
}

type wireStandardize struct {
	Mean  []float64 `json:"mean"`
	Scale []float64 `json:"scale"`
}

type wireModelMonitor struct {
	Level    float64 `json:"level"`
	Learn    string  `json:"learn"`
	SPELimit float64 `json:"spe_limit"`
	T2Limit  float64 `json:"t2_limit"`
	// Linear is the optional linear residual (monitor.linear).
	Linear *wireModelLinear `json:"linear,omitempty"`
}

type wireModelLinear struct {
	Mean       []float64   `json:"mean"`
	Components [][]float64 `json:"components"`
	LSPELimit  float64     `json:"lspe_limit"`
}

type wireModelClassifier struct {
	Classes []string    `json:"classes"`
	Alpha   [][]float64 `json:"alpha"`
	Bias    []float64   `json:"bias"`
}

// wireModelKernel uses pointers so that a parameter is present exactly when
// the kernel has it.
type wireModelKernel struct {
	Name   string   `json:"name"`
	Gamma  *float64 `json:"gamma,omitempty"`
	Degree *int     `json:"degree,omitempty"`
	Coef0  *float64 `json:"coef0,omitempty"`
}

// EncodeModel validates m and encodes it as JSON, exactly:
//
//	{"format":"kpcastream.model/v1","learner":"ikpca","kernel":{"name":"rbf","gamma":0.5},
//	 "points":[[…]],"coefficients":[[…]],"offsets":[…],"eigenvalues":[…],"seen":n}
//
// followed, for a model with a classifier, by
// "classifier":{"classes":[…C…],"alpha":[[…C…],…p rows],"bias":[…C…]},
// for a model with preprocessing by
// "preprocess":{"standardize":{"mean":[…d…],"scale":[…d…]}} (the model
// applies to (x − mean)/scale), and for a model with monitoring by
// "monitor":{"level":0.99,"learn":"normal","spe_limit":…,"t2_limit":…},
// whose optional last member, with monitor.linear, is
// "linear":{"mean":[…d…],"components":[[…d…],…k rows],"lspe_limit":…}.
// A model without these sections has exactly the bytes it had before
// they existed.
//
// The kernel object has "name"; "gamma" except for linear; "degree" for
// poly only; "coef0" for poly and sigmoid. Numbers are written in the
// shortest form that reads back to the same float64. An invalid model gives
// the error of m.Validate.
func EncodeModel(m *learners.Model) ([]byte, error) {
	if m == nil {
		return nil, fmt.Errorf("codec: encode model: nil model")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("codec: encode model: %w", err)
	}
	k := m.Kernel
	w := wireModel{
		Format: m.Format, Learner: m.Learner, Kernel: wireModelKernel{Name: k.Name},
		Points: m.Points, Coefficients: m.Coefficients, Offsets: m.Offsets, Eigenvalues: m.Eigenvalues, Seen: m.Seen,
	}
	if k.Name != learners.KernelLinear {
		w.Kernel.Gamma = &k.Gamma
	}
	if k.Name == learners.KernelPoly {
		w.Kernel.Degree = &k.Degree
	}
	if k.Name == learners.KernelPoly || k.Name == learners.KernelSigmoid {
		w.Kernel.Coef0 = &k.Coef0
	}
	if c := m.Classifier; c != nil {
		w.Classifier = &wireModelClassifier{Classes: c.Classes, Alpha: c.Alpha, Bias: c.Bias}
	}
	if p := m.Preprocess; p != nil {
		w.Preprocess = &wireModelPreprocess{Standardize: &wireStandardize{Mean: p.Mean, Scale: p.Scale}}
	}
	if mo := m.Monitor; mo != nil {
		w.Monitor = &wireModelMonitor{Level: mo.Level, Learn: mo.Learn, SPELimit: mo.SPELimit, T2Limit: mo.T2Limit}
		if l := mo.Linear; l != nil {
			w.Monitor.Linear = &wireModelLinear{Mean: l.Mean, Components: l.Components, LSPELimit: l.LSPELimit}
		}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("codec: encode model: %w", err)
	}
	return b, nil
}

// DecodeModel decodes a model written by EncodeModel and validates it with
// m.Validate. Unknown fields, trailing data and a kernel parameter the
// kernel does not have are errors wrapping ErrMalformed; a model that fails
// validation gives the validation error (learners.ErrState or
// learners.ErrConfig) wrapped together with ErrMalformed.
func DecodeModel(data []byte) (*learners.Model, error) {
	var w wireModel
	if err := unmarshalJSONObject(data, &w, true); err != nil {
		return nil, malformed("model: %v", err)
	}
	k := learners.Kernel{Name: w.Kernel.Name}
	if w.Kernel.Gamma != nil {
		if k.Name == learners.KernelLinear {
			return nil, malformed("model: kernel linear has no gamma")
		}
		k.Gamma = *w.Kernel.Gamma
	}
	if w.Kernel.Degree != nil {
		if k.Name != learners.KernelPoly {
			return nil, malformed("model: kernel %q has no degree", k.Name)
		}
		k.Degree = *w.Kernel.Degree
	}
	if w.Kernel.Coef0 != nil {
		if k.Name != learners.KernelPoly && k.Name != learners.KernelSigmoid {
			return nil, malformed("model: kernel %q has no coef0", k.Name)
		}
		k.Coef0 = *w.Kernel.Coef0
	}
	m := &learners.Model{
		Format: w.Format, Learner: w.Learner, Kernel: k,
		Points: w.Points, Coefficients: w.Coefficients, Offsets: w.Offsets, Eigenvalues: w.Eigenvalues, Seen: w.Seen,
	}
	if c := w.Classifier; c != nil {
		m.Classifier = &learners.ModelClassifier{Classes: c.Classes, Alpha: c.Alpha, Bias: c.Bias}
	}
	if p := w.Preprocess; p != nil {
		if p.Standardize == nil {
			return nil, malformed("model: preprocess has no standardize section")
		}
		m.Preprocess = &learners.ModelPreprocess{Mean: p.Standardize.Mean, Scale: p.Standardize.Scale}
	}
	if mo := w.Monitor; mo != nil {
		m.Monitor = &learners.ModelMonitor{Level: mo.Level, Learn: mo.Learn, SPELimit: mo.SPELimit, T2Limit: mo.T2Limit}
		if l := mo.Linear; l != nil {
			m.Monitor.Linear = &learners.ModelLinear{Mean: l.Mean, Components: l.Components, LSPELimit: l.LSPELimit}
		}
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: model: %w", ErrMalformed, err)
	}
	return m, nil
}
