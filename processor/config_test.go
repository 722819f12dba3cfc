package processor

import (
	"errors"
	"slices"
	"testing"

	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/learners"
)

// TestValidateFieldErrors: Validate's problems are *fielderr.Errors named
// by their YAML paths from the processor's config, its learners' ones put
// in place by path (no message rewritten) and still matching
// learners.ErrConfig.
func TestValidateFieldErrors(t *testing.T) {
	pc := pipelineConfig("p")
	pc.MaxKeys = -1
	pc.Learner = learners.Config{Learner: "nope", Dim: 2, Components: 1, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: -1}}
	err := Config{QueueSize: -1, Pipelines: []PipelineConfig{pc}}.Validate()
	var texts []string
	for _, e := range fielderr.Split(err) {
		var fe *fielderr.Error
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is not a *fielderr.Error", e, e)
		}
		texts = append(texts, e.Error())
		if learnerProblem := errors.Is(e, learners.ErrConfig); learnerProblem != (fe.Path == "pipelines[0].learner.kind" || fe.Path == "pipelines[0].learner.kernel.gamma") {
			t.Errorf("%q: errors.Is(learners.ErrConfig) = %v", e, learnerProblem)
		}
	}
	want := []string{
		"processor: queue_size: must be ≥ 1, got -1",
		`processor: pipelines[0].learner.kind: unknown learner "nope" (want ikpca, kha, window or batch)`,
		"processor: pipelines[0].learner.kernel.gamma: rbf needs gamma > 0, got -1",
		"processor: pipelines[0].max_keys: must be ≥ 0 (0: no cap beyond memory_budget), got -1",
	}
	if !slices.Equal(texts, want) {
		t.Errorf("problems\n%q\nwant\n%q", texts, want)
	}
}
