package e2e

import (
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func TestPassLearnerConformance(t *testing.T) {
	cfg := learners.Config{Learner: learners.KindIKPCA, Dim: 4, Components: 2, Budget: 8}
	learnertest.Check(t, func() learners.Learner {
		l, err := newPassLearner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, learnertest.Options{Dim: cfg.Dim, Budget: cfg.Budget, Warmup: 1, Seed: 3,
		// As the processor restores a key: a learner of the pipeline's
		// config, then Restore (the pass learner's state holds no shapes
		// that would contradict a changed config by themselves).
		Restore: func(s *learners.State) (learners.Learner, error) {
			l, err := newPassLearner(cfg)
			if err != nil {
				return nil, err
			}
			if err := l.Restore(s); err != nil {
				return nil, err
			}
			return l, nil
		}})
}
