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

// The window learner's own limits are part of Validate, so that lint and
// run --dry-run refuse a configuration NewWindow would refuse at run time.
func TestConfigValidateWindowLimits(t *testing.T) {
	base := learners.Config{Learner: learners.KindWindow, Dim: 2, Components: 3, Budget: 64, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}}
	if err := base.Validate(); err != nil {
		t.Fatalf("valid window config: %v", err)
	}
	for _, tt := range []struct {
		budget, components int
		path               string
	}{
		{learners.WindowMaxBudget + 1, 3, "budget"},
		{64, 64, "components"},
	} {
		c := base
		c.Budget, c.Components = tt.budget, tt.components
		err := c.Validate()
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Path != tt.path || !errors.Is(err, learners.ErrConfig) {
			t.Errorf("budget %d, components %d: %v, want an ErrConfig naming %s", tt.budget, tt.components, err, tt.path)
		}
		if _, nerr := learners.NewWindow(c); nerr == nil || nerr.Error() != err.Error() {
			t.Errorf("NewWindow: %v, want Validate's %v", nerr, err)
		}
		// Other learners have no such limits.
		c.Learner = learners.KindIKPCA
		if err := c.Validate(); err != nil && tt.path == "budget" {
			t.Errorf("ikpca with budget %d: %v", tt.budget, err)
		}
	}
}
