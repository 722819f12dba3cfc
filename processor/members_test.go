package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
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

// records returns every ownership record of pc in the coordination bucket
// (a missing one as the zero record).
func (e *env) records(t *testing.T, pc PipelineConfig) []ownership.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatalf("coordination bucket: %v", err)
	}
	out := make([]ownership.Record, pc.Partitions)
	for n := range out {
		en, err := kv.Get(ctx, recordKey(pc, n))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("record %d of %s: %v", n, pc.Name, err)
		}
		if out[n], err = ownership.DecodeRecord(en.Value()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// ownedBy counts the partitions of pipeline running on rs.
func ownedBy(pipeline string, rs ...*running) int {
	n := 0
	for _, r := range rs {
		n += len(r.stats(pipeline).Partitions)
	}
	return n
}

// TestTwoDeployments runs two deployments with different pipelines on one
// server with the default bucket and service names: each pipeline's
// partitions are shared only among the members that run it, all of them
// are taken, and none moves afterwards (no take/release loop: every
// record stays at its first epoch). lease_ttl is 2 s: at 600 ms the
// owners' own fences (lease_ttl/2 without a renewal) expired under CPU
// stress (load 13–33 on 2 cores: renewals of a member, and its heartbeat,
// unanswered for 300 ms while two more members started), and each
// owner, as it must, stopped and took its partition again at a new epoch
// — a move of the owner's own, which the test counted as a loop.
func TestTwoDeployments(t *testing.T) {
	e := newEnv(t)
	const ttl = 2 * time.Second
	x, y := pipelineConfig("depx"), pipelineConfig("depy")
	x.Partitions, y.Partitions = 4, 4
	cfg := func(pc PipelineConfig) Config {
		return Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: ttl, ShutdownTimeout: 5 * time.Second}
	}
	member := func(pc PipelineConfig) *running {
		nc, js := natstest.Connect(t, e.url)
		return e.startOn(t, cfg(pc), newPCA, nc, js, nil)
	}
	a1, b1 := member(x), member(y)
	a2, b2 := member(x), member(y)
	// Balanced first (the second member of a deployment may join after
	// the first took every partition): only moves after that are loops.
	waitFor(t, 10*time.Second, "every partition of both pipelines running, shared by both members", func() bool {
		return ownedBy(x.Name, a1, a2) == 4 && ownedBy(y.Name, b1, b2) == 4 &&
			ownedBy(x.Name, a1) > 0 && ownedBy(x.Name, a2) > 0 && ownedBy(y.Name, b1) > 0 && ownedBy(y.Name, b2) > 0
	})
	before := map[string][]ownership.Record{x.Name: e.records(t, x), y.Name: e.records(t, y)}
	time.Sleep(2 * ttl) // 20 evaluations (every lease_ttl/10): long enough for any loop of takes and releases to show
	if n := ownedBy(x.Name, a1, a2); n != 4 || ownedBy(x.Name, a1) == 0 || ownedBy(x.Name, a2) == 0 {
		t.Errorf("pipeline x: %d partitions running on its members (a1 %d, a2 %d), want 4 shared by both", n, ownedBy(x.Name, a1), ownedBy(x.Name, a2))
	}
	if n := ownedBy(y.Name, b1, b2); n != 4 || ownedBy(y.Name, b1) == 0 || ownedBy(y.Name, b2) == 0 {
		t.Errorf("pipeline y: %d partitions running on its members (b1 %d, b2 %d), want 4 shared by both", n, ownedBy(y.Name, b1), ownedBy(y.Name, b2))
	}
	for _, pc := range []PipelineConfig{x, y} {
		for n, r := range e.records(t, pc) {
			// A partition moves at most once: from the first member of its
			// deployment to the second.
			if was := before[pc.Name][n]; r.Epoch != was.Epoch || r.Owner != was.Owner || r.Epoch > 2 {
				t.Errorf("pipeline %s partition %d: epoch %d owner %q, was epoch %d owner %q (it moved between deployments)",
					pc.Name, n, r.Epoch, r.Owner, was.Epoch, was.Owner)
			}
		}
	}
	// Data flows through both.
	for i, k := range []string{"k0", "k1", "k2", "k3"} {
		e.publish(t, "in.depx."+k, encodeObs(t, "json", vectors(uint64(i), 1)[0], "0"), "")
		e.publish(t, "in.depy."+k, encodeObs(t, "json", vectors(uint64(i), 1)[0], "0"), "")
	}
	waitFor(t, 10*time.Second, "both pipelines drained", func() bool { return e.drained(t, x) && e.drained(t, y) })

	// The control plane: whichever member of either deployment takes a
	// request (one queue group for both), it answers for the pipeline
	// asked about.
	ask := func(subject string, body string, v any) string {
		t.Helper()
		msg, err := e.nc.Request(subject, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s %s: %v", subject, body, err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			return code
		}
		if err := json.Unmarshal(msg.Data, v); err != nil {
			t.Fatalf("%s %s: %v in %q", subject, body, err, msg.Data)
		}
		return ""
	}
	for i := range 12 { // 12 requests reach members of both deployments
		for _, pc := range []PipelineConfig{x, y} {
			var st []PipelineStats
			if code := ask("kpcastream.stats", `{"pipeline":"`+pc.Name+`"}`, &st); code != "" {
				t.Fatalf("request %d: stats of %s: error %s", i, pc.Name, code)
			}
			if len(st) != 1 || st[0].Pipeline != pc.Name || st[0].Instances != 2 || len(st[0].Partitions) != 4 || st[0].In != 4 || st[0].Learners != 4 {
				t.Errorf("request %d: stats of %s: %+v, want that pipeline alone over its 2 members: 4 partitions, 4 in, 4 learners", i, pc.Name, st)
			}
			var infos []PipelineInfo
			if code := ask("kpcastream.pipelines", `{"pipeline":"`+pc.Name+`"}`, &infos); code != "" || len(infos) != 1 || infos[0].Stream != pc.Input.Stream {
				t.Errorf("request %d: pipelines of %s: %v (error %q)", i, pc.Name, infos, code)
			}
			// A key request reaches the key's owner, in the other
			// deployment when need be.
			var snap map[string]int
			if code := ask("kpcastream.snapshot", `{"pipeline":"`+pc.Name+`","key":"k1"}`, &snap); code != "" {
				t.Errorf("request %d: snapshot of %s/k1: error %s", i, pc.Name, code)
			}
			if code := ask("kpcastream.reset", `{"pipeline":"`+pc.Name+`","key":"never"}`, &snap); code != "404" {
				t.Errorf("request %d: reset of %s/never: error %q, want 404 from its owner", i, pc.Name, code)
			}
		}
		var all []PipelineStats
		if code := ask("kpcastream.stats", "", &all); code != "" {
			t.Fatalf("request %d: stats: error %s", i, code)
		}
		names := map[string]int{}
		for _, s := range all {
			names[s.Pipeline] = s.Instances
		}
		if len(all) != 2 || names[x.Name] != 2 || names[y.Name] != 2 {
			t.Errorf("request %d: stats of every pipeline: %v, want both, each over its 2 members", i, names)
		}
		var none []PipelineStats
		if code := ask("kpcastream.stats", `{"pipeline":"nope"}`, &none); code != "404" {
			t.Errorf("request %d: stats of an unknown pipeline: error %q, want 404", i, code)
		}
	}
}

// TestFleetStopLeavesNothingOwned stops every member of a fleet at once,
// while partitions move between them: no record may be left naming a
// member that has exited (a take landing after the stop began, a
// partition that could not start), so the next fleet takes every
// partition at once instead of after lease_ttl.
func TestFleetStopLeavesNothingOwned(t *testing.T) {
	e := newEnv(t)
	const ttl = 3 * time.Second // long, so that a record left owned is not taken over by the next fleet in time
	pc := pipelineConfig("fleet")
	pc.Partitions = 6
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: ttl, ShutdownTimeout: 5 * time.Second}
	member := func() *running {
		nc, js := natstest.Connect(t, e.url)
		return e.startOn(t, cfg, newPCA, nc, js, nil)
	}
	for round := range 3 {
		rs := []*running{member(), member()}
		started := time.Now()
		waitFor(t, 10*time.Second, "the fleet runs every partition", func() bool { return ownedBy(pc.Name, rs...) == 6 })
		if round > 0 {
			// The previous fleet left nothing owned: nothing waits for lease_ttl.
			if d := time.Since(started); d > ttl {
				t.Errorf("round %d: the fleet took %v to run every partition, want < lease_ttl %v", round, d, ttl)
			}
		}
		for i := range 4 {
			e.publish(t, fmt.Sprintf("in.fleet.k%d", i), encodeObs(t, "json", vectors(uint64(i), 1)[0], fmt.Sprint(round)), "")
		}
		// A third member joins and the fleet stops while partitions move to it.
		rs = append(rs, member())
		errs := make(chan error, len(rs))
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- r.stop() }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: stop: %v", round, err)
			}
		}
		for n, r := range e.records(t, pc) {
			if r.Owner != "" {
				t.Errorf("round %d: partition %d still owned by %s (epoch %d) after the whole fleet stopped", round, n, r.Owner, r.Epoch)
			}
		}
	}
}

// TestJoinAfterKill kills a member (connection closed: no release, its
// heartbeat stays in the bucket) and has two members join after it, one
// within lease_ttl and one later: the newcomers must judge the dead
// member dead from the bucket's timestamps, so its partitions run again
// within lease_ttl + 1 s of the kill whatever the joins, and the
// partitions released to a newcomer are taken within 1 s.
func TestJoinAfterKill(t *testing.T) {
	e := newEnv(t)
	const ttl = 2 * time.Second
	pc := pipelineConfig("jak")
	pc.Partitions = 6
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: ttl, ShutdownTimeout: 5 * time.Second}
	member := func() (*running, func()) {
		nc, js := natstest.Connect(t, e.url)
		return e.startOn(t, cfg, newPCA, nc, js, nil), nc.Close
	}
	a, kill := member()
	b, _ := member()
	waitFor(t, 10*time.Second, "a and b run every partition", func() bool {
		return ownedBy(pc.Name, a, b) == 6 && ownedBy(pc.Name, a) > 0 && ownedBy(pc.Name, b) > 0
	})
	kill()
	killed := time.Now()
	time.Sleep(ttl * 6 / 10)
	c, _ := member()
	time.Sleep(time.Until(killed.Add(ttl * 12 / 10)))
	d, _ := member()
	waitFor(t, 3*ttl+5*time.Second, "b, c and d run every partition", func() bool {
		return ownedBy(pc.Name, b, c, d) == 6 && ownedBy(pc.Name, c) > 0 && ownedBy(pc.Name, d) > 0
	})
	took := time.Since(killed)
	t.Logf("the killed member's partitions all running again %v after the kill (lease_ttl %v, joins at %v and %v)",
		took.Round(time.Millisecond), ttl, ttl*6/10, ttl*12/10)
	if took > ttl+time.Second {
		t.Errorf("partitions of a killed member ran again %v after the kill, want ≤ lease_ttl + 1s = %v", took, ttl+time.Second)
	}
	// The records follow: the dead member's are taken; one released to a
	// newcomer that joined a moment ago is taken within 1 s.
	waitFor(t, time.Second, "every record names a live member", func() bool {
		for _, r := range e.records(t, pc) {
			if r.Owner == a.p.ID() || r.Owner == "" {
				return false
			}
		}
		return true
	})
	// A graceful leave: its partitions are released and taken within 1 s.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	waitFor(t, 10*time.Second, "b and c run every partition", func() bool { return ownedBy(pc.Name, b, c) == 6 })
	if took := time.Since(left); took > time.Second {
		t.Errorf("partitions of a member that left ran again %v after it stopped, want ≤ 1s", took)
	}
}

// stallingKV is a coordination bucket whose partition record writes
// (renewals, takes, releases) hang until their context ends while stall
// is set, as while the bucket has no leader; heartbeats still land.
type stallingKV struct {
	jetstream.KeyValue
	stall *atomic.Bool
}

func (kv stallingKV) hang(ctx context.Context, key string) error {
	if !kv.stall.Load() || !strings.HasPrefix(key, "partitions.") {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (kv stallingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if err := kv.hang(ctx, key); err != nil {
		return 0, err
	}
	return kv.KeyValue.Update(ctx, key, value, last)
}

func (kv stallingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if err := kv.hang(ctx, key); err != nil {
		return 0, err
	}
	return kv.KeyValue.Create(ctx, key, value, opts...)
}

// TestHeartbeatNotBlockedByTakes stalls one member's record writes for
// 3·lease_ttl (its fence expires and its takes hang for snapshot_timeout):
// its heartbeat must keep landing, so the other member never judges it
// dead and never takes its partitions over; once writes land again it
// runs its partitions again.
func TestHeartbeatNotBlockedByTakes(t *testing.T) {
	e := newEnv(t)
	const ttl = time.Second
	pc := pipelineConfig("hbtake")
	pc.Partitions = 4
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: ttl, ShutdownTimeout: 5 * time.Second, SnapshotTimeout: 5 * time.Second}
	var stall atomic.Bool
	e.wrapKV = func(kv jetstream.KeyValue) jetstream.KeyValue { return stallingKV{KeyValue: kv, stall: &stall} }
	nc, js := natstest.Connect(t, e.url)
	a := e.startOn(t, cfg, newPCA, nc, js, nil)
	e.wrapKV = nil
	nc2, js2 := natstest.Connect(t, e.url)
	b := e.startOn(t, cfg, newPCA, nc2, js2, nil)
	waitFor(t, 10*time.Second, "a and b share the partitions", func() bool {
		return ownedBy(pc.Name, a) == 2 && ownedBy(pc.Name, b) == 2
	})
	stall.Store(true)
	stalled := time.Now()
	for time.Since(stalled) < 3*ttl {
		b.p.coord.mu.Lock()
		alive := b.p.coord.alive(time.Now())
		b.p.coord.mu.Unlock()
		if !slices.ContainsFunc(alive, func(m ownership.Member) bool { return m.ID == a.p.ID() }) {
			t.Fatalf("%v into the stall of a's record writes, b judges a dead: its heartbeat was held back", time.Since(stalled).Round(time.Millisecond))
		}
		if n := ownedBy(pc.Name, b); n > 2 {
			t.Fatalf("%v into the stall, b runs %d partitions: it took a's over", time.Since(stalled).Round(time.Millisecond), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := ownedBy(pc.Name, a); n != 0 {
		t.Errorf("a runs %d partitions after its renewals failed for 3·lease_ttl, want 0 (fenced)", n)
	}
	stall.Store(false)
	waitFor(t, cfg.SnapshotTimeout+5*time.Second, "a runs its partitions again", func() bool {
		return ownedBy(pc.Name, a) == 2 && ownedBy(pc.Name, b) == 2
	})
}
