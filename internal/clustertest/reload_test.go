package clustertest_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

// TestClusterReloadAfterEvict runs one worker of the compose deployment
// with one live learner a partition (max_keys 8, no local tier) and two
// or more keys in several partitions, connected to a follower of the
// snapshot bucket: each message of such a key unloads the other one
// (saved first) and loads its own again from KV within the same epoch, by
// a direct get that the worker's server answers from its replica, which
// may not have applied the save that just landed (TestLeaderRevisionAfterPut).
// Every message must still be applied exactly once: each key's final
// snapshot (read at the stream leader's revision) has Seen and LastSeq of
// what was published, and the outputs are the key's sequences, each once.
func TestClusterReloadAfterEvict(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster test (skipped under -short)")
	}
	c := newCluster(t)
	adminNC, adminJS := connect(t, c.urls(0), "admin", 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitFor(t, 15*time.Second, "JetStream account info", func() bool {
		ctx, cancel := request(ctx)
		defer cancel()
		_, err := adminJS.AccountInfo(ctx)
		return err == nil
	})
	in := createStream(ctx, t, adminJS, "SENSORS")
	createStream(ctx, t, adminJS, "KPCA_OUT")
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.Load(filepath.Join(root, "deploy/compose/kpcastream.yaml"), noEnv, config.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	var store *snapshot.Store
	call(ctx, t, "the snapshot store", func(ctx context.Context) (err error) {
		store, err = snapshot.Open(ctx, adminJS, cfg.Snapshots)
		return err
	})
	leader := streamLeader(ctx, t, c, adminJS, "KV_"+cfg.Snapshots.Bucket)
	follower := (leader + 1) % len(c.nodes)
	w := startWorker(t, "kpcastream.yaml", c.urls(follower), 1, func(cfg *config.Config) {
		cfg.Processor.LocalDir = processor.LocalNone
		for i := range cfg.Pipelines {
			cfg.Pipelines[i].MaxKeys = cfg.Pipelines[i].Partitions
		}
	})
	pc := w.cfg.ProcessorConfig().WithDefaults().Pipelines[0]
	waitFor(t, 20*time.Second, "the worker owns every partition", func() bool { return owned(w)[0] == pc.Partitions })

	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}
	_, prodJS := connect(t, c.urls(leader), "producer", 100*time.Millisecond)
	pb := &publisher{js: prodJS, rng: rand.New(rand.NewPCG(2, 8)), keyOf: map[uint64]string{}, per: map[string][]uint64{}}
	pb.publish(t, keys, 600)

	var ckpt jetstream.KeyValue
	call(ctx, t, "the checkpoint bucket", func(ctx context.Context) (err error) {
		ckpt, err = adminJS.KeyValue(ctx, processor.DefaultCheckpointBucket)
		return err
	})
	waitFor(t, 60*time.Second, "every partition drained", func() bool {
		for n := range pc.Partitions {
			if r := partitionDrained(ctx, ckpt, in, pc.Name, pc.Input.Durable, n); r != "" {
				return false
			}
		}
		return true
	})
	if err := w.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := w.p.Stats()[0]
	t.Logf("worker on %s (a follower of the snapshot bucket, leader %s): stats %+v", c.nodes[follower].name, c.nodes[leader].name, st)
	if st.Evictions == 0 {
		t.Fatalf("no key was unloaded: the test loads no key again")
	}
	restored := len(w.logs.FilterMessage("restored").All())
	t.Logf("%d loads restored a snapshot from KV", restored)

	for _, key := range keys {
		snap, err := loadLatest(ctx, t, adminNC, store, pc.Name, key)
		if err != nil {
			t.Errorf("load snapshot %s/%s: %v", pc.Name, key, err)
			continue
		}
		seqs := pb.per[key]
		if snap.State.Seen != int64(len(seqs)) || snap.LastSeq != seqs[len(seqs)-1] {
			t.Errorf("key %s: Seen %d, LastSeq %d; want %d and %d", key, snap.State.Seen, snap.LastSeq, len(seqs), seqs[len(seqs)-1])
			explainLag(ctx, t, ckpt, []*worker{w}, pc.Name, key, seqs, snap)
		}
	}
	outs := readOutputs(ctx, t, adminJS)
	for _, key := range keys {
		seqs := pb.per[key]
		got := outs[key]
		if len(got) == 0 || len(got) > len(seqs) {
			t.Errorf("key %s: %d projections for %d messages", key, len(got), len(seqs))
			continue
		}
		if want := seqs[len(seqs)-len(got):]; !slices.Equal(got, want) {
			t.Errorf("key %s: projected sequences\n got %v\nwant %v", key, got, want)
		}
	}
}
