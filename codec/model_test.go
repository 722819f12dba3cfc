package codec

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

func testModel(k learners.Kernel) *learners.Model {
	return &learners.Model{
		Format: learners.ModelFormat, Learner: learners.KindIKPCA, Kernel: k,
		Points:       [][]float64{{1, 2, 3}, {-0.5, 0, 1e-7}},
		Coefficients: [][]float64{{0.25, -1}, {3, 0.125}},
		Offsets:      []float64{0.1, -0.2},
		Eigenvalues:  []float64{2.5, 0.75},
		Seen:         1000,
	}
}

func TestModelExactFormat(t *testing.T) {
	data, err := EncodeModel(testModel(learners.Kernel{Name: "rbf", Gamma: 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"format":"kpcastream.model/v1","learner":"ikpca","kernel":{"name":"rbf","gamma":0.5},` +
		`"points":[[1,2,3],[-0.5,0,1e-7]],"coefficients":[[0.25,-1],[3,0.125]],"offsets":[0.1,-0.2],"eigenvalues":[2.5,0.75],"seen":1000}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
}

func TestModelKernels(t *testing.T) {
	tests := []struct {
		kernel learners.Kernel
		json   string
	}{
		{learners.Kernel{Name: "rbf", Gamma: 0.5}, `"kernel":{"name":"rbf","gamma":0.5}`},
		{learners.Kernel{Name: "laplacian", Gamma: 2}, `"kernel":{"name":"laplacian","gamma":2}`},
		{learners.Kernel{Name: "linear"}, `"kernel":{"name":"linear"}`},
		{learners.Kernel{Name: "poly", Gamma: 1, Degree: 2, Coef0: 0}, `"kernel":{"name":"poly","gamma":1,"degree":2,"coef0":0}`},
		{learners.Kernel{Name: "sigmoid", Gamma: 0.1, Coef0: -1}, `"kernel":{"name":"sigmoid","gamma":0.1,"coef0":-1}`},
	}
	for _, tt := range tests {
		t.Run(tt.kernel.Name, func(t *testing.T) {
			want := testModel(tt.kernel)
			data, err := EncodeModel(want)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.json) {
				t.Errorf("got %s, want it to contain %s", data, tt.json)
			}
			golden(t, "model_v1_"+tt.kernel.Name+".json", data)
			got, err := DecodeModel(readTestdata(t, "model_v1_"+tt.kernel.Name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestModelErrors(t *testing.T) {
	good, _ := EncodeModel(testModel(learners.Kernel{Name: "rbf", Gamma: 0.5}))
	replace := func(old, new string) []byte { return []byte(strings.Replace(string(good), old, new, 1)) }
	tests := []struct {
		name string
		data []byte
		msg  string
	}{
		{"not json", []byte("xx"), "invalid character"},
		{"truncated", good[:len(good)-3], "unexpected EOF"},
		{"trailing", append(append([]byte(nil), good...), []byte(" {}")...), "trailing data"},
		{"trailing brace", append(append([]byte(nil), good...), '}'), "trailing data"}, // found by FuzzDecodeModel
		{"null", []byte(" null"), "not a JSON object"},
		{"unknown field", replace(`"seen"`, `"bogus":1,"seen"`), "unknown field"},
		{"wrong format", replace("kpcastream.model/v1", "kpcastream.model/v2"), `model format "kpcastream.model/v2"`},
		{"gamma on linear", replace(`"name":"rbf"`, `"name":"linear"`), "linear has no gamma"},
		{"degree on rbf", replace(`"gamma":0.5`, `"gamma":0.5,"degree":3`), `"rbf" has no degree`},
		{"coef0 on rbf", replace(`"gamma":0.5`, `"gamma":0.5,"coef0":3`), `"rbf" has no coef0`},
		{"bad gamma", replace(`"gamma":0.5`, `"gamma":-1`), "gamma > 0"},
		{"ragged points", replace(`[-0.5,0,1e-7]`, `[-0.5,0]`), "model point has length 2"},
		{"short offsets", replace(`"offsets":[0.1,-0.2]`, `"offsets":[0.1]`), "want"},
		{"string number", replace(`"seen":1000`, `"seen":"1000"`), "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeModel(tt.data)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
			if m != nil {
				t.Errorf("got a model with the error")
			}
		})
	}
	bad := testModel(learners.Kernel{Name: "rbf", Gamma: 0.5})
	bad.Offsets = bad.Offsets[:1]
	if _, err := EncodeModel(bad); !errors.Is(err, learners.ErrState) {
		t.Errorf("EncodeModel(invalid) error %v, want learners.ErrState", err)
	}
	if _, err := EncodeModel(nil); err == nil {
		t.Errorf("EncodeModel(nil) succeeded")
	}
}

// The classifier section: exact format, round trip, and what Validate refuses.
func TestModelClassifier(t *testing.T) {
	m := testModel(learners.Kernel{Name: "rbf", Gamma: 0.5})
	m.Classifier = &learners.ModelClassifier{Classes: []string{"a", "7"}, Alpha: [][]float64{{1, -1}, {0.5, 2}}, Bias: []float64{0.25, 0}}
	data, err := EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"format":"kpcastream.model/v1","learner":"ikpca","kernel":{"name":"rbf","gamma":0.5},` +
		`"points":[[1,2,3],[-0.5,0,1e-7]],"coefficients":[[0.25,-1],[3,0.125]],"offsets":[0.1,-0.2],"eigenvalues":[2.5,0.75],"seen":1000,` +
		`"classifier":{"classes":["a","7"],"alpha":[[1,-1],[0.5,2]],"bias":[0.25,0]}}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
	got, err := DecodeModel(data)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, bad := range map[string]*learners.ModelClassifier{
		"one class":      {Classes: []string{"a"}, Alpha: [][]float64{{1}, {1}}, Bias: []float64{0}},
		"short alpha":    {Classes: []string{"a", "b"}, Alpha: [][]float64{{1, 1}}, Bias: []float64{0, 0}},
		"ragged alpha":   {Classes: []string{"a", "b"}, Alpha: [][]float64{{1, 1}, {1}}, Bias: []float64{0, 0}},
		"repeated class": {Classes: []string{"a", "a"}, Alpha: [][]float64{{1, 1}, {1, 1}}, Bias: []float64{0, 0}},
		"bias":           {Classes: []string{"a", "b"}, Alpha: [][]float64{{1, 1}, {1, 1}}, Bias: []float64{0}},
	} {
		b := testModel(learners.Kernel{Name: "rbf", Gamma: 0.5})
		b.Classifier = bad
		if _, err := EncodeModel(b); !errors.Is(err, learners.ErrState) {
			t.Errorf("%s: got %v, want ErrState", name, err)
		}
	}
}
