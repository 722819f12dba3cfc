package e2e

import (
	"math"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/processor"
)

// TestScheduleBound: the KV writes the snapshot schedule allows, by time
// (each key once per every, no more than the messages) and by count.
func TestScheduleBound(t *testing.T) {
	for _, c := range []struct {
		name       string
		every      time.Duration
		everyMsgs  int
		keys       int64
		rate, want float64
	}{
		{"defaults, keys bound", 0, 0, 20000, 5000, 20000.0/30 + 5},
		{"defaults, messages bound", 0, 0, 1000000, 3000, 3000 + 3},
		{"count only", -1, 100, 64, 10000, 100},
		{"neither", -1, -1, 64, 10000, 0},
	} {
		pc := processor.PipelineConfig{Name: "b", Snapshot: processor.SnapshotPolicy{Every: c.every, EveryMessages: c.everyMsgs}}
		if got := scheduleBound(pc, c.keys, c.rate); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v writes/s, want %v", c.name, got, c.want)
		}
	}
}
