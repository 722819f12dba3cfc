package processor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// laggingRecordsKV answers a Get of a frozen key with the entry it froze,
// as a replica of the coordination bucket that stopped applying the
// leader's writes there would (a direct get: nats-server issue 4710);
// writes go to the leader.
type laggingRecordsKV struct {
	jetstream.KeyValue
	mu     *sync.Mutex
	frozen map[string]jetstream.KeyValueEntry
	// noRenewals: updates of a record that name an owner fail (the
	// renewals; releases pass).
	noRenewals *atomic.Bool
}

func (kv laggingRecordsKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if r, err := ownership.DecodeRecord(value); err == nil && r.Owner != "" && kv.noRenewals != nil && kv.noRenewals.Load() {
		return 0, context.DeadlineExceeded
	}
	return kv.KeyValue.Update(ctx, key, value, last)
}

func (kv laggingRecordsKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	kv.mu.Lock()
	e, ok := kv.frozen[key]
	kv.mu.Unlock()
	if ok {
		return e, nil
	}
	return kv.KeyValue.Get(ctx, key)
}

// TestStillOwnedReadsTheLeader: a worker that loads a snapshot written
// by a newer epoch claims it only if the partition's record still names
// its own epoch (stillOwned: the snapshot then comes from another
// partition layout). Read from a replica behind, the record named this
// member at its epoch after a newer owner had taken the partition (and
// written the snapshot): a zombie's claim, of its ended epoch, landed over
// the newer owner's snapshot, and the newer owner fenced itself at its
// next save of the key (issue 28's audit, sim/STALE.md). The record is
// read from the bucket stream's leader.
func TestStillOwnedReadsTheLeader(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("stillowned")
	pc.Partitions = 1
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 3 * time.Second, ShutdownTimeout: 5 * time.Second}
	kv := laggingRecordsKV{mu: &sync.Mutex{}, frozen: map[string]jetstream.KeyValueEntry{}}
	e.wrapKV = func(inner jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = inner; return kv }
	a := e.start(t, cfg)
	e.wrapKV = nil
	waitFor(t, 10*time.Second, "a runs the partition", func() bool { return ownedBy(pc.Name, a) == 1 })
	pt := a.p.pipes[0].parts[0].Load()
	ctx := t.Context()
	if !pt.stillOwned(ctx) {
		t.Fatal("stillOwned says no while a runs the partition at its epoch")
	}
	bucket, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	// The replica a reads from stops at the record as it stands; then a
	// newer owner takes the partition (as after a pause of a past its
	// lease). a's renewals may move the record meanwhile: try again.
	key := recordKey(pc, 0)
	var took ownership.Record
	for attempt := 0; ; attempt++ {
		cur, err := bucket.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		kv.mu.Lock()
		kv.frozen[key] = cur
		kv.mu.Unlock()
		if took, err = ownership.DecodeRecord(cur.Value()); err != nil {
			t.Fatal(err)
		}
		took.Owner, took.Epoch = "newer-owner", took.Epoch+1
		if _, err = bucket.Update(ctx, key, took.Encode(), cur.Revision()); err == nil {
			break
		}
		if attempt == 10 {
			t.Fatalf("take the record from a: %v", err)
		}
	}
	if pt.stillOwned(ctx) {
		t.Errorf("stillOwned says a still owns the partition at epoch %d after %s took it at epoch %d (the record read from a replica behind)",
			pt.epoch, took.Owner, took.Epoch)
	}
}

// TestReleaseOwnedReadsTheLeader: a member leaving releases the records
// that still name it, read from the bucket. Read by a KV Get from a
// replica behind, a record the member had written since (a renewal, a
// take whose answer was lost) came back at an older revision: the
// release's compare-and-set on it conflicted, and the record was left
// naming a member that left (its next owner waits lease_ttl, as after a
// crash). The records are read from the bucket stream's leader.
func TestReleaseOwnedReadsTheLeader(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("releaseowned")
	pc.Partitions = 1
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 3 * time.Second, ShutdownTimeout: 5 * time.Second}
	kv := laggingRecordsKV{mu: &sync.Mutex{}, frozen: map[string]jetstream.KeyValueEntry{}, noRenewals: &atomic.Bool{}}
	e.wrapKV = func(inner jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = inner; return kv }
	a := e.start(t, cfg)
	e.wrapKV = nil
	waitFor(t, 10*time.Second, "a runs the partition", func() bool { return ownedBy(pc.Name, a) == 1 })
	ctx := t.Context()
	bucket, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	// The replica a reads from stops at the record as it stands; a renews
	// it once more, then its renewals fail (its partition stops fenced,
	// leaving the record naming it, at a revision the replica lacks).
	key := recordKey(pc, 0)
	cur, err := bucket.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	kv.frozen[key] = cur
	kv.mu.Unlock()
	waitFor(t, 10*time.Second, "a renews past the replica", func() bool {
		e, err := bucket.Get(ctx, key)
		return err == nil && e.Revision() > cur.Revision()
	})
	kv.noRenewals.Store(true)
	a.p.coord.releaseOwned(ctx)
	got, err := bucket.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ownership.DecodeRecord(got.Value())
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner != "" {
		t.Errorf("after releaseOwned the record still names %s at epoch %d (rev %d; the replica read had rev %d)", r.Owner, r.Epoch, got.Revision(), cur.Revision())
	}
}

// TestRefreshKeepsTheNewerView: after a compare-and-set on a record
// failed, the coordinator reads it (refresh). Answered by a replica
// behind, the read set the member's view back to an older record; when no
// write to the record followed, nothing corrected it: in sim seed 10955 a
// member saw the partition owned by a member that had left it, while the
// others saw it owned by this member (whose partition had stopped fenced),
// and nobody took it again. A read older than the view is dropped.
func TestRefreshKeepsTheNewerView(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("refreshview")
	pc.Partitions = 1
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 3 * time.Second, ShutdownTimeout: 5 * time.Second}
	kv := laggingRecordsKV{mu: &sync.Mutex{}, frozen: map[string]jetstream.KeyValueEntry{}, noRenewals: &atomic.Bool{}}
	e.wrapKV = func(inner jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = inner; return kv }
	a := e.start(t, cfg)
	e.wrapKV = nil
	waitFor(t, 10*time.Second, "a runs the partition", func() bool { return ownedBy(pc.Name, a) == 1 })
	ctx := t.Context()
	bucket, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	key := recordKey(pc, 0)
	old, err := bucket.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	kv.mu.Lock()
	kv.frozen[key] = old
	kv.mu.Unlock()
	// a renews past the replica, and its watcher brings the view there;
	// then nothing writes the record any more.
	waitFor(t, 10*time.Second, "a's view past the replica's revision", func() bool { return a.p.coord.view(key).Rev > old.Revision() })
	kv.noRenewals.Store(true)
	before := a.p.coord.view(key).Rev
	a.p.coord.refresh(ctx, key)
	if got := a.p.coord.view(key).Rev; got < before {
		t.Errorf("after a refresh answered by a replica behind, the view went back from revision %d to %d", before, got)
	}
}
