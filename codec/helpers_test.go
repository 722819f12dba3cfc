package codec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites the file under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: encoding changed:\n got %q\nwant %q\n(if intended, bump the format version or run go test -update and review the diff)", name, got, want)
	}
}

// readTestdata returns the bytes of testdata/name.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testState builds a State by hand with every field and map type filled,
// including values that stress the encoding (negative, tiny, huge, −0).
func testState() *learners.State {
	return &learners.State{
		Version: learners.StateVersion,
		Kind:    learners.KindIKPCA,
		Config: learners.Config{
			Learner: "ikpca", Dim: 3, Components: 2, Budget: 4,
			Kernel: learners.Kernel{Name: "poly", Gamma: 0.25, Coef0: -1.5, Degree: 3},
			Forget: 0.999, Admission: "ald", Eviction: "lli", Tolerance: 1e-3, Coherence: 0.95,
			Jitter: 1e-10, LearningRate: 0.05, Decay: 1000, Refresh: 1, Seed: 1<<63 + 5,
		},
		Seen: 123456789,
		Ints: map[string]int64{"basis_version": 7, "fill": 4, "neg": -9, "big": 1 << 62},
		Scalars: map[string]float64{
			"total_weight": 1234.5678, "tiny": 5e-324, "huge": 1.7976931348623157e308, "negzero": 0,
		},
		Matrices: map[string]learners.Matrix{
			"points": {Rows: 4, Cols: 3, Data: []float64{1, 2, 3, -4, 5.5, 6, 7e-9, 8, 9, 10, 11, 0.1}},
			"eig":    {Rows: 1, Cols: 2, Data: []float64{3.25, 0.125}},
			"empty":  {Rows: 0, Cols: 5, Data: []float64{}},
		},
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
