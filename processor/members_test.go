package processor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// applyLog records, per partition, the epochs of the applies in the order
// they happened.
type applyLog struct {
	mu     sync.Mutex
	epochs map[string][]uint64 // "<pipeline>/<partition>" → epoch of each apply
}

func (l *applyLog) hook(pipeline string, part int, epoch uint64, _ string, _ uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fmt.Sprintf("%s/%d", pipeline, part)
	l.epochs[k] = append(l.epochs[k], epoch)
}

// check fails when a partition applied a message under an epoch older than
// one that already applied (two owners interleaved), and returns the
// number of distinct epochs seen.
func (l *applyLog) check(t *testing.T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, es := range l.epochs {
		if !slices.IsSorted(es) {
			t.Errorf("partition %s: applies of epochs interleave: %v", k, slices.Compact(slices.Clone(es)))
		}
		n += len(slices.Compact(slices.Clone(es)))
	}
	return n
}

// TestElasticMembers runs one pipeline of 6 partitions on members that
// come and go, each with its own connection: two members, a third joins
// mid-stream, one leaves gracefully, one crashes (its connection closed:
// no final snapshots, no release; the survivor takes its partitions over
// after lease_ttl). Every key's final state must equal an uninterrupted
// run's, every input has exactly one output in the deduplicating output
// stream, and the epochs of a partition never interleave.
func TestElasticMembers(t *testing.T) {
	e := newEnv(t)
	const ttl = 600 * time.Millisecond
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}
	rng := rand.New(rand.NewPCG(9, 9))
	var order []int
	counts := make([]int, len(keys))
	for range 600 {
		j := rng.IntN(len(keys))
		order = append(order, j)
		counts[j]++
	}
	data := make([][][]float64, len(keys))
	for j := range keys {
		data[j] = vectors(uint64(300+j), counts[j])
	}
	publish := func(pc PipelineConfig, from, to int) {
		next := make([]int, len(keys))
		for _, j := range order[:from] {
			next[j]++
		}
		for _, j := range order[from:to] {
			e.publish(t, "in."+pc.Name+"."+keys[j], encodeObs(t, "json", data[j][next[j]], fmt.Sprint(next[j])), "")
			next[j]++
		}
	}
	// Reference: one member, one partition, uninterrupted.
	ref := pipelineConfig("elref")
	r := e.start(t, Config{Pipelines: []PipelineConfig{ref}})
	publish(ref, 0, len(order))
	waitFor(t, 20*time.Second, "reference drained", func() bool { return e.drained(t, ref) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	pc := pipelineConfig("elastic")
	pc.Partitions = 6
	pc.Snapshot = SnapshotPolicy{EveryMessages: 5, Every: -1}
	cfg := Config{Pipelines: []PipelineConfig{pc}, Workers: 2, LeaseTTL: ttl, CheckpointEvery: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second}
	log := &applyLog{epochs: map[string][]uint64{}}
	member := func() (*running, func()) {
		nc, js := natstest.Connect(t, e.url)
		return e.startOn(t, cfg, newPCA, nc, js, log.hook), nc.Close
	}
	owned := func(rs ...*running) int {
		n := 0
		for _, r := range rs {
			for _, s := range r.p.Stats() {
				n += len(s.Partitions)
			}
		}
		return n
	}
	a, crashA := member()
	b, _ := member()
	waitFor(t, 10*time.Second, "6 partitions owned by a and b", func() bool { return owned(a, b) == 6 && owned(a) > 0 && owned(b) > 0 })
	publish(pc, 0, 150)
	c, _ := member()
	waitFor(t, 10*time.Second, "c joined and took its share", func() bool { return owned(c) == 2 && owned(a, b, c) == 6 })
	publish(pc, 150, 300)
	// Each key is live on the one member that owns its partition: a and b
	// gave a partition each to c, and their workers' keys left the counts
	// with them (they used to stay counted on the old owner too).
	waitFor(t, 20*time.Second, "drained after c joined", func() bool { return e.drained(t, pc) })
	if n := a.stats(pc.Name).Learners + b.stats(pc.Name).Learners + c.stats(pc.Name).Learners; n > int64(len(keys)) {
		t.Errorf("%d learners live over the three members, for %d keys", n, len(keys))
	}
	if err := b.stop(); err != nil {
		t.Fatalf("graceful stop of b: %v", err)
	}
	waitFor(t, 10*time.Second, "b's partitions moved to a and c", func() bool { return owned(a) == 3 && owned(c) == 3 })
	publish(pc, 300, 450)
	crashA() // no final snapshots, no release, its acks and writes fail
	crashed := time.Now()
	waitFor(t, 10*time.Second, "c took a's partitions over", func() bool { return owned(c) == 6 })
	t.Logf("takeover of a crashed member's partitions: %v (lease_ttl %v)", time.Since(crashed).Round(time.Millisecond), ttl)
	_ = a.stop()
	publish(pc, 450, len(order))
	waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	// The crashed member's heartbeat is removed by the survivor once it has
	// stood still for memberGC·lease_ttl; the leavers removed their own.
	kv, err := e.js.KeyValue(context.Background(), DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	has := func(r *running) bool {
		_, err := kv.Get(context.Background(), memberKey(r.p.ID()))
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
			t.Fatalf("heartbeat of %s: %v", r.p.ID(), err)
		}
		return err == nil
	}
	if has(b) {
		t.Error("b left gracefully but its heartbeat is still there")
	}
	waitFor(t, 3*memberGC*ttl, "the crashed member's heartbeat removed by c", func() bool { return !has(a) && has(c) })
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if has(c) {
		t.Error("c's heartbeat left after it stopped")
	}
	for j, k := range keys {
		want, _ := e.loadState(t, ref.Name, k)
		got, last := e.loadState(t, pc.Name, k)
		if got.Seen != int64(counts[j]) {
			t.Errorf("key %s: seen %d, want %d", k, got.Seen, counts[j])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("key %s: state differs from the uninterrupted run (last seq %d)", k, last)
		}
	}
	if got, want := e.streamMsgs(t, pc.Name+"_OUT"), e.streamMsgs(t, ref.Name+"_OUT"); got != want || want == 0 {
		t.Errorf("output stream: %d messages, reference %d", got, want)
	}
	if n := log.check(t); n < 6+2+3 {
		t.Errorf("only %d partition epochs applied anything: the partitions did not move as the test meant", n)
	}
}
