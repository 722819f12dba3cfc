package processor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// lossyKV loses every third write of each partition record: the write
// does not land and its answer never comes (a request lost with a server,
// or a server too starved to answer in time); the others pass at once.
type lossyKV struct {
	jetstream.KeyValue
	mu     *sync.Mutex
	writes map[string]int
}

func (kv lossyKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if strings.HasPrefix(key, "partitions.") {
		kv.mu.Lock()
		kv.writes[key]++
		lost := kv.writes[key]%3 == 0
		kv.mu.Unlock()
		if lost {
			<-ctx.Done()
			return 0, ctx.Err()
		}
	}
	return kv.KeyValue.Update(ctx, key, value, last)
}

// TestRenewalSurvivesOneLostAnswer loses every third renewal of each
// partition for 3·lease_ttl, with checkpoint_every at its default (so
// renewals follow lease_ttl, as in production): the attempt that follows
// each lost one is answered at once, so the owner must keep its
// partitions, at their first epoch. Before (issue 28), a renewal was due
// lease_ttl/3 after the previous one's answer and an attempt could take
// lease_ttl/4, while the fence counts lease_ttl/2 from the previous
// renewal's send: one lost attempt alone expired the fence before the
// retry the code meant to fit, and the owner stopped and took its own
// partitions again (4 stops in 9 s here).
func TestRenewalSurvivesOneLostAnswer(t *testing.T) {
	e := newEnv(t)
	const ttl = 3 * time.Second
	pc := pipelineConfig("lostrenew")
	pc.Partitions = 2
	// checkpoint_every at its default (the test environment's 50 ms would
	// renew far more often than lease_ttl/3).
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: ttl, CheckpointEvery: DefaultCheckpointEvery, ShutdownTimeout: 5 * time.Second}
	core, logs := observer.New(zap.InfoLevel)
	e.observe = core
	kv := lossyKV{mu: &sync.Mutex{}, writes: map[string]int{}}
	e.wrapKV = func(inner jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = inner; return kv }
	nc, js := natstest.Connect(t, e.url)
	a := e.startOn(t, cfg, newPCA, nc, js, nil)
	e.wrapKV, e.observe = nil, nil
	waitFor(t, 10*time.Second, "a runs the 2 partitions", func() bool { return ownedBy(pc.Name, a) == 2 })
	time.Sleep(3 * ttl)
	kv.mu.Lock()
	writes := len(kv.writes) // keys written
	lost := 0
	for _, n := range kv.writes {
		lost += n / 3
	}
	kv.mu.Unlock()
	if writes != 2 || lost < 4 {
		t.Fatalf("%d records written, %d renewals lost; want both records and at least 4 lost", writes, lost)
	}
	if n := len(logs.FilterMessage("ownership not renewed within lease_ttl/2; stopping the partition").All()); n > 0 {
		t.Errorf("%d partitions stopped with every third renewal lost (%d lost; lease_ttl %v)", n, lost, ttl)
	}
	for n, r := range e.records(t, pc) {
		if r.Epoch != 1 || r.Owner != a.p.id {
			t.Errorf("partition %d: epoch %d owner %q, want epoch 1 owned by %s all along", n, r.Epoch, r.Owner, a.p.id)
		}
	}
	if !t.Failed() {
		t.Logf("%d renewals lost, none stopped a partition", lost)
	}
}
