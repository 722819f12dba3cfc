package processor

import (
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// TestPCALearnerConformance runs the learner conformance suite on the
// tests' own learner, so the processor tests exercise a learner that keeps
// every promise of the interface (purity, restore, bounded memory, model).
func TestPCALearnerConformance(t *testing.T) {
	cfg := testLearnerConfig() // the configuration the processor tests give newPCA
	learnertest.Check(t, func() learners.Learner {
		l, err := newPCA(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}, learnertest.Options{Dim: cfg.Dim, Budget: cfg.Budget, Warmup: pcaWarm, Seed: 5, Restore: restorePCA})
}
