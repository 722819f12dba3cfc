package processor

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/learners"
)

// TestLocalTierIKPCAIdentical runs ikpca keys through a worker whose
// memory holds three of them while the others cycle through the local
// tier (their learners sharing the worker's Scratch, spilled by
// StateInto into one reused State, read back by one reused decoder into
// models a spill set free): every key's final state equals, bit for bit,
// that of a learner fed the key's messages directly.
func TestLocalTierIKPCAIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("NATS test")
	}
	e := newEnv(t)
	pc := pipelineConfig("tierik")
	pc.Learner = learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 6,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 7}
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1}
	c := Config{Workers: 2, Pipelines: []PipelineConfig{pc}, LocalDir: t.TempDir()}
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Scratch == 0 {
		t.Fatalf("plan %+v: no shared scratch for ikpca", plan)
	}
	const nkeys, rounds = 24, 12
	pc.MemoryBudget = 2 * (int64(plan.Scratch) + 3*int64(plan.KeyBytes) + 15*localKeyBytes)
	c.Pipelines[0] = pc
	r := e.startWith(t, c, learners.New)
	for round := range rounds {
		for k := range nkeys {
			e.publish(t, fmt.Sprintf("in.tierik.key%02d", k), encodeObs(t, "msgpack", vectors(uint64(k), rounds)[round], ""), "")
		}
		waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	}
	spills, loads := metricValue(t, r.p.met.localSpills.WithLabelValues(pc.Name)), metricValue(t, r.p.met.localLoads.WithLabelValues(pc.Name))
	if spills < nkeys*(rounds-1) || loads < nkeys*(rounds-1) {
		t.Errorf("local tier: %v spills, %v loads; want every key through disk every round (%d)", spills, loads, nkeys*(rounds-1))
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for k := range nkeys {
		want, err := learners.NewIKPCA(pc.Learner)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range vectors(uint64(k), rounds) {
			if err := want.Learn(x); err != nil {
				t.Fatal(err)
			}
		}
		st, _ := e.loadState(t, pc.Name, fmt.Sprintf("key%02d", k))
		got, err := learners.Restore(st)
		if err != nil {
			t.Fatalf("key%02d: %v", k, err)
		}
		if !reflect.DeepEqual(got.State(), want.State()) {
			t.Errorf("key%02d: state after %d messages through the local tier differs from a learner fed directly", k, st.Seen)
		}
	}
}
