package processor

import (
	"fmt"
	"testing"
	"time"
)

// TestLocalTierCycle runs keys in a cycle twice as long as memory holds
// through a worker with a local tier: under LRU every message would read
// its key back from disk; the tier's insertion policy (local_policy.go)
// keeps part of the cycle in memory, so fewer than three quarters do.
func TestLocalTierCycle(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("cycle")
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1}
	c := Config{Workers: 1, Pipelines: []PipelineConfig{pc}, LocalDir: t.TempDir()}
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		t.Fatal(err)
	}
	const nkeys, inMemory, settle, measured = 200, 100, 12, 12
	pc.MemoryBudget = inMemory*int64(plan.KeyBytes) + nkeys*localKeyBytes
	c.Pipelines[0] = pc
	r := e.start(t, c)
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	xs := vectors(7, settle+measured)
	publish := func(from, to int) {
		for round := from; round < to; round++ {
			for k := range nkeys {
				e.publish(t, fmt.Sprintf("in.cycle.key%03d", k), encodeObs(t, "msgpack", xs[round], ""), "")
			}
		}
		waitFor(t, 60*time.Second, "drained", func() bool { return e.drained(t, pc) })
	}
	publish(0, settle)
	loads := func() float64 { return metricValue(t, r.p.met.localLoads.WithLabelValues(pc.Name)) }
	before := loads()
	publish(settle, settle+measured)
	reads := (loads() - before) / (measured * nkeys)
	if reads > 0.75 {
		t.Fatalf("%.2f local reads per message over a cycle of %d keys with room for %d in memory, want ≤ 0.75 (LRU: 1)", reads, nkeys, inMemory)
	}
	t.Logf("%.2f local reads per message over a cycle of %d keys with room for %d in memory (LRU: 1)", reads, nkeys, inMemory)
}
