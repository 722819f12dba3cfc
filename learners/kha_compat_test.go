package learners_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// TestKHASMDStateBeforeGuards restores a gain smd state written by the
// learner before its guard components and Rayleigh–Ritz step
// (testdata/kha_smd_before_guards.json: main at d74e921, 150 observations,
// its Transform of three probes): it loads into a learner of today's
// config, publishes the same projections, keeps its k directions (no
// guards), goes on learning, and a state taken after that round-trips
// with the row moment the learner has gathered since.
func TestKHASMDStateBeforeGuards(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "kha_smd_before_guards.json"))
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Config    learners.Config
		State     *learners.State
		Probe     [][]float64
		Transform [][]float64
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if _, ok := old.State.Matrices["row_moment"]; ok || old.State.Matrices["coef"].Cols != old.Config.Components {
		t.Fatal("the fixture is not a state from before the guards")
	}
	l, err := learners.NewKHA(old.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Restore(old.State); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for i, x := range old.Probe {
		z, err := l.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		for p := range z {
			if math.Abs(z[p]-old.Transform[i][p]) > 1e-12 {
				t.Fatalf("probe %d: Transform %v, the old learner's %v", i, z, old.Transform[i])
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for range 200 {
		if err := l.Learn([]float64{rng.NormFloat64() * 1.5, rng.NormFloat64() * 0.5}); err != nil {
			t.Fatalf("Learn after the old state: %v", err)
		}
	}
	s := l.State()
	if c := s.Matrices["coef"].Cols; c != old.Config.Components {
		t.Errorf("coef has %d columns after more learning, want %d (no guards for an old state)", c, old.Config.Components)
	}
	if n := s.Scalars["moment_count"]; n != 200 {
		t.Errorf("moment_count %v, want the 200 observations since the restore", n)
	}
	r, err := learners.NewKHA(old.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(s); err != nil {
		t.Fatalf("Restore of the state taken after: %v", err)
	}
	for _, x := range old.Probe {
		a, _ := l.Transform(nil, x)
		b, _ := r.Transform(nil, x)
		for p := range a {
			if a[p] != b[p] {
				t.Fatalf("round trip: Transform %v, restored %v", a, b)
			}
		}
	}
}
