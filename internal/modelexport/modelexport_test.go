package modelexport

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
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

// TestLinearIndex exports a key model with the linear residual
// (monitor.linear), reads the export back as any program would and checks
// that the linear residual it computes for a raw row is the lspe the
// monitor computed for it, with the same limit; and that an export
// without the section, as written before it existed, still reads.
func TestLinearIndex(t *testing.T) {
	const d = 6
	lc := learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: 2, Budget: 40,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1.0 / d}, Seed: 1}
	mc := monitor.Config{Learn: monitor.LearnNormal, Standardize: true, Freeze: true, Dim: d, Linear: true, LinearComponents: 2}.WithDefaults(lc.Budget)
	km, err := keymodel.New(&keymodel.Spec{Learner: lc, Monitor: &mc})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	row := func() []float64 {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		x := make([]float64, d)
		for j := range x {
			x[j] = float64(j+1)*a - float64(j%3)*b + 0.1*rng.NormFloat64()
		}
		return x
	}
	l, mon := km.Learner(), km.Monitor()
	in, z := make([]float64, d), make([]float64, lc.Components)
	for range 400 {
		if _, err := mon.Step(l, nil, in, z, row()); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for i := range 20 {
		x, err := km.Export()
		if err != nil {
			t.Fatal(err)
		}
		b, err := codec.EncodeModel(x)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := codec.DecodeModel(b); err != nil || !reflect.DeepEqual(back.Monitor, x.Monitor) {
			t.Fatalf("codec round trip of the monitor section: %+v, %v; want %+v", back, err, x.Monitor)
		}
		m, err := Read(write(t, string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if !m.HasLinear() {
			t.Fatalf("export %s: no monitor.linear section", b)
		}
		raw := row()
		if i%4 == 0 {
			raw[3] += 2 // a sensor fault now and then
		}
		want := m.LinearIndex(m.Prepare(make([]float64, d), raw))
		r, err := mon.Step(l, nil, in, z, raw)
		if err != nil {
			t.Fatal(err)
		}
		if v := r.Verdict; math.Abs(v.LSPE-want) > 1e-9*max(1, want) || v.LSPELimit != m.Monitor.Linear.LSPELimit || v.LSPELimit <= 0 {
			t.Fatalf("row %d: the export's linear residual %v (limit %v), the monitor's %v (limit %v)", i, want, m.Monitor.Linear.LSPELimit, v.LSPE, v.LSPELimit)
		}
		checked++
	}
	old, err := Read(write(t, `{"format":"kpcastream.model/v1","kernel":{"name":"linear"},"points":[[1,0],[0,2]],"coefficients":[[0.5],[0.25]],"offsets":[0.1],
		"monitor":{"level":0.99,"learn":"normal","spe_limit":0.5,"t2_limit":3}}`))
	if err != nil || old.HasLinear() || old.Monitor.SPELimit != 0.5 {
		t.Errorf("an export without monitor.linear: %+v, %v", old, err)
	}
	if _, err := Read(write(t, `{"format":"kpcastream.model/v1","kernel":{"name":"linear"},"points":[[1,0],[0,2]],"coefficients":[[0.5],[0.25]],"offsets":[0.1],
		"monitor":{"level":0.99,"learn":"normal","spe_limit":0.5,"t2_limit":3,"linear":{"mean":[0,0],"components":[[1]],"lspe_limit":1}}}`)); err == nil || !strings.Contains(err.Error(), "monitor.linear component 0") {
		t.Errorf("a component of the wrong length: error %v, want one naming it", err)
	}
}
