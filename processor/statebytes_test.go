package processor

import (
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	lclassify "github.com/kpcastream/kpcastream/learners/classify"
)

// kpcastream_snapshot_state_bytes counts the classifier stage's share of a
// snapshot too (its weights and covariance are most of a small learner's).
func TestStateBytesCountsClassifier(t *testing.T) {
	snap := &codec.Snapshot{State: &learners.State{Matrices: map[string]learners.Matrix{
		"a": {Rows: 2, Cols: 3, Data: make([]float64, 6)},
		"b": {Rows: 1, Cols: 4, Data: make([]float64, 4)},
	}}}
	if got := stateBytes(snap); got != 80 {
		t.Fatalf("learner only: %d bytes, want 80", got)
	}
	snap.Classifier = &lclassify.State{W: make([]float64, 12), P: make([]float64, 25)}
	if got := stateBytes(snap); got != 80+8*37 {
		t.Fatalf("with a classifier: %d bytes, want %d", got, 80+8*37)
	}
}
