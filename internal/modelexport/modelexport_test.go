package modelexport

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProject reads a two-point linear-kernel export and projects a row
// by hand: z = Σⱼ c[j]·⟨p[j], x⟩ − offset.
func TestProject(t *testing.T) {
	m, err := Read(write(t, `{"format":"kpcastream.model/v1","kernel":{"name":"linear"},
		"points":[[1,0],[0,2]],"coefficients":[[0.5],[0.25]],"offsets":[0.1]}`))
	if err != nil {
		t.Fatal(err)
	}
	z := make([]float64, 1)
	m.Project(z, m.Prepare(nil, []float64{3, 4}))
	if want := 0.5*3 + 0.25*8 - 0.1; math.Abs(z[0]-want) > 1e-12 {
		t.Errorf("z = %v, want %v", z[0], want)
	}
}

// TestReadErrors: each malformed export is refused with what is wrong.
func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`not json`, "not a model export"},
		{`{"format":"other"}`, "format"},
		{`{"format":"kpcastream.model/v1","kernel":{"name":"linear"},"points":[],"coefficients":[],"offsets":[]}`, "points"},
		{`{"format":"kpcastream.model/v1","kernel":{"name":"rbf"},"points":[[1]],"coefficients":[[1]],"offsets":[0]}`, "gamma"},
		{`{"format":"kpcastream.model/v1","kernel":{"name":"nope"},"points":[[1]],"coefficients":[[1]],"offsets":[0]}`, "unknown kernel"},
	} {
		_, err := Read(write(t, c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.body, err, c.want)
		}
	}
}
