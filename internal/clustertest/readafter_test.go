package clustertest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestLeaderRevisionAfterPut checks what TestClusterElastic's final check
// relies on: right after a write to an R3 KV bucket is acknowledged, the
// stream leader's message get (leaderRevision) answers its revision, every
// time; and it measures how often a KV Get (a direct get, answered by
// whichever replica the reader's server holds) answers an older revision
// when the reader is connected to a follower that was just restarted (as
// after the test's outages). Issue 28, run 27 of the stress loop: a key's
// final snapshot read right after the last worker stopped was two saves
// behind, while the partition's checkpoint had passed those messages
// (saved) and no save had failed.
func TestLeaderRevisionAfterPut(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster test (skipped under -short)")
	}
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, adminJS := connect(t, c.urls(0), "admin", 100*time.Millisecond)
	var kv jetstream.KeyValue
	waitFor(t, 20*time.Second, "R3 bucket created", func() bool {
		ctx, cancel := request(ctx)
		defer cancel()
		var err error
		kv, err = adminJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "rw", Replicas: 3, Storage: jetstream.FileStorage})
		return err == nil
	})
	leader := streamLeader(ctx, t, c, adminJS, "KV_rw")
	follower := (leader + 1) % 3
	put := func(key string, i int) uint64 {
		var rev uint64
		call(ctx, t, "put "+key, func(ctx context.Context) (err error) {
			rev, err = kv.Put(ctx, key, fmt.Appendf(nil, "%d", i))
			return err
		})
		return rev
	}
	for i := range 20 {
		put(fmt.Sprint("k", i%4), i)
	}
	// The follower goes down and comes back; it catches up, then answers
	// direct gets again.
	c.stop(follower)
	for i := range 50 {
		put(fmt.Sprint("k", i%4), i)
	}
	c.start(follower)
	readerNC, readerJS := connect(t, c.urls(follower), "reader", 100*time.Millisecond)
	var rkv jetstream.KeyValue
	call(ctx, t, "bucket rw from the follower", func(ctx context.Context) (err error) {
		rkv, err = readerJS.KeyValue(ctx, "rw")
		return err
	})
	const n = 300
	stale, worst := 0, uint64(0)
	for i := range n {
		key := fmt.Sprint("k", i%4)
		rev := put(key, i)
		gctx, cancel := request(ctx)
		e, err := rkv.Get(gctx, key)
		cancel()
		if err == nil && e.Revision() < rev {
			stale++
			worst = max(worst, rev-e.Revision())
		}
		var got uint64
		call(ctx, t, "leader's revision of "+key, func(ctx context.Context) (err error) {
			got, err = leaderRevision(ctx, readerNC, "rw", key)
			return err
		})
		if got != rev {
			t.Fatalf("put %d of %s: acknowledged at revision %d, the leader's message get answered %d", i, key, rev, got)
		}
	}
	t.Logf("reader on %s (a follower, restarted), leader %s: %d of %d direct gets right after an acknowledged put answered an older revision (at most %d behind); the leader's message get answered the put's revision %d of %d times",
		c.nodes[follower].name, c.nodes[leader].name, stale, n, worst, n, n)
}
