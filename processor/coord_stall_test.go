package processor

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestTakesResumeAfterBucketStall stalls a member's record writes (the
// coordination bucket without a leader: calls hang until their deadline)
// for 2·lease_ttl, so its fence expires and it stops its partitions, and
// then lets them land again: every partition must run again within
// lease_ttl + 1 s (issue 28's target). Before, evaluate took the
// partitions one at a time, each take waiting snapshot_timeout on the
// stalled bucket, so the last one resumed only after several of them.
func TestTakesResumeAfterBucketStall(t *testing.T) {
	e := newEnv(t)
	const ttl = time.Second
	pc := pipelineConfig("stalltake")
	pc.Partitions = 4
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: ttl, ShutdownTimeout: 5 * time.Second, SnapshotTimeout: 8 * time.Second}
	var stall atomic.Bool
	e.wrapKV = func(kv jetstream.KeyValue) jetstream.KeyValue { return stallingKV{KeyValue: kv, stall: &stall} }
	nc, js := natstest.Connect(t, e.url)
	a := e.startOn(t, cfg, newPCA, nc, js, nil)
	e.wrapKV = nil
	waitFor(t, 10*time.Second, "a runs the 4 partitions", func() bool { return ownedBy(pc.Name, a) == 4 })
	stall.Store(true)
	waitFor(t, 5*ttl, "a's partitions fenced", func() bool { return ownedBy(pc.Name, a) == 0 })
	time.Sleep(ttl) // takes are in flight on the stalled bucket
	stall.Store(false)
	resumed := time.Now()
	waitFor(t, 3*cfg.SnapshotTimeout, "a runs its partitions again", func() bool { return ownedBy(pc.Name, a) == 4 })
	took := time.Since(resumed)
	t.Logf("every partition ran again %v after the bucket took writes again (lease_ttl %v)", took.Round(time.Millisecond), ttl)
	if took > ttl+time.Second {
		t.Errorf("partitions ran again %v after the bucket took writes again, want within lease_ttl + 1s = %v", took.Round(time.Millisecond), ttl+time.Second)
	}
}

// TestReleaseLoggedOnce: a handover logs "partition assigned to another
// member; releasing it" once per partition (issue 33 row 11: it was
// logged on every evaluation until the partition stopped, 5–6 times).
func TestReleaseLoggedOnce(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("relonce")
	pc.Partitions = 4
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: time.Second, ShutdownTimeout: 5 * time.Second}
	core, logs := observer.New(zap.InfoLevel)
	e.observe = core
	nc, js := natstest.Connect(t, e.url)
	a := e.startOn(t, cfg, newPCA, nc, js, nil)
	e.observe = nil
	waitFor(t, 10*time.Second, "a runs the 4 partitions", func() bool { return ownedBy(pc.Name, a) == 4 })
	for i := range 40 {
		e.publish(t, fmt.Sprintf("in.%s.k%d", pc.Name, i%8), encodeObs(t, "json", []float64{1, 2, 3, 4}, fmt.Sprint(i)), "")
	}
	nc2, js2 := natstest.Connect(t, e.url)
	b := e.startOn(t, cfg, newPCA, nc2, js2, nil)
	waitFor(t, 10*time.Second, "a and b share the partitions", func() bool {
		return ownedBy(pc.Name, a) == 2 && ownedBy(pc.Name, b) == 2
	})
	time.Sleep(500 * time.Millisecond) // evaluations after the handover
	per := map[int64]int{}
	for _, l := range logs.FilterMessage("partition assigned to another member; releasing it").All() {
		per[l.ContextMap()["partition"].(int64)]++
	}
	if len(per) != 2 {
		t.Errorf("releases logged for partitions %v, want 2 partitions", per)
	}
	for n, c := range per {
		if c != 1 {
			t.Errorf("partition %d: its release logged %d times, want once", n, c)
		}
	}
}
