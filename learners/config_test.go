package learners_test

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/learners"
)

// yamlNames returns the yaml tag names of the fields of struct type t.
func yamlNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		names[name] = true
	}
	return names
}

// TestConfigValidatePaths: every problem of Config.Validate is a
// *fielderr.Error naming its field by the yaml name a configuration file
// uses (so config and processor put it in place without reading the
// message), matches ErrConfig, and reads "learners: invalid config: <path>:
// <problem>".
func TestConfigValidatePaths(t *testing.T) {
	bad := learners.Config{
		Learner: "x", Dim: 0, Components: 0, Budget: -1, Kernel: learners.Kernel{Name: learners.KernelPoly, Gamma: 1, Degree: 40},
		Forget: 2, Admission: "a", Eviction: "e", SwapRatio: 0.5, Tolerance: 1, Coherence: 1, Jitter: 1,
		LearningRate: -1, Decay: math.Inf(1), Refresh: -1,
	}
	configNames, kernelNames := yamlNames(reflect.TypeFor[learners.Config]()), yamlNames(reflect.TypeFor[learners.Kernel]())
	var paths []string
	for _, e := range fielderr.Split(bad.Validate()) {
		var fe *fielderr.Error
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is not a *fielderr.Error", e, e)
		}
		if !errors.Is(e, learners.ErrConfig) {
			t.Errorf("problem %v does not match ErrConfig", e)
		}
		if want := "learners: invalid config: " + fe.Path + ": " + fe.Err.Error(); e.Error() != want {
			t.Errorf("text %q, want %q", e.Error(), want)
		}
		field, sub, nested := strings.Cut(fe.Path, ".")
		if !configNames[field] || nested && (field != "kernel" || !kernelNames[sub]) {
			t.Errorf("path %q of %q is no yaml field of Config", fe.Path, e)
		}
		paths = append(paths, fe.Path)
	}
	want := []string{"kind", "dim", "budget", "components", "kernel.degree", "forget", "admission", "eviction", "swap_ratio",
		"tolerance", "coherence", "jitter", "learning_rate", "decay", "refresh"}
	if !slices.Equal(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	for _, tt := range []struct {
		k    learners.Kernel
		path string
	}{
		{learners.Kernel{}, "name"},
		{learners.Kernel{Name: "cosine"}, "name"},
		{learners.Kernel{Name: learners.KernelRBF, Gamma: -1}, "gamma"},
		{learners.Kernel{Name: learners.KernelSigmoid, Gamma: 1, Coef0: math.NaN()}, "coef0"},
	} {
		var fe *fielderr.Error
		if err := tt.k.Validate(); !errors.As(err, &fe) || fe.Path != tt.path || !errors.Is(err, learners.ErrConfig) {
			t.Errorf("Kernel%+v.Validate() = %v, want an ErrConfig naming %s", tt.k, err, tt.path)
		}
	}
}
