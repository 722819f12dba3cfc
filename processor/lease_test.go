package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// async is a processor whose Run was started without waiting for it to be
// ready.
type async struct {
	p      *Processor
	done   chan error
	cancel context.CancelFunc
}

func (e *env) startAsync(t *testing.T, name string, cfg Config) *async {
	t.Helper()
	cfg.Workers = max(cfg.Workers, 1)
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = 50 * time.Millisecond
	}
	p, err := New(cfg, Deps{Conn: e.nc, JS: e.js, Snapshots: e.store, Logger: zaptest.NewLogger(t).Named(name),
		Registry: prometheus.NewRegistry(), NewLearner: newPCA})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &async{p: p, done: make(chan error, 1), cancel: cancel}
	go func() { a.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-a.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: Run did not return 30s after cancel", name)
		}
	})
	return a
}

// stop cancels Run and returns its error.
func (a *async) stop(t *testing.T) error {
	t.Helper()
	a.cancel()
	select {
	case err := <-a.done:
		a.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after cancel")
		return nil
	}
}

func (a *async) in(name string) int64 {
	for _, s := range a.p.Stats() {
		if s.Pipeline == name {
			return s.In
		}
	}
	return 0
}

// TestLeaseStandby runs two processes with the same pipeline: the second
// waits as a standby while the first holds the consumer's lease, takes no
// message, and takes over at once when the first stops.
func TestLeaseStandby(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("lease")
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 200 * time.Millisecond}
	a := e.startAsync(t, "a", cfg)
	waitFor(t, 5*time.Second, "a ready", a.p.Ready)
	b := e.startAsync(t, "b", cfg)
	time.Sleep(3 * cfg.LeaseTTL) // b sees a renew the lease: it stays a standby
	if b.p.Ready() {
		t.Fatal("b is ready while a holds the consumer")
	}
	xs := vectors(21, 15)
	for i := range 10 {
		e.publish(t, "in.lease.k", encodeObs(t, "json", xs[i], fmt.Sprint(i)), "")
	}
	waitFor(t, 5*time.Second, "drained by a", func() bool { return e.drained(t, pc) })
	if got := a.in(pc.Name); got != 10 {
		t.Errorf("a handled %d messages, want 10", got)
	}
	if got := b.in(pc.Name); got != 0 {
		t.Errorf("standby b handled %d messages, want 0", got)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitFor(t, 5*time.Second, "b ready", b.p.Ready)
	// a released its lease: b did not wait for it to expire.
	if d := time.Since(stopped); d > cfg.LeaseTTL {
		t.Errorf("b took over %v after a stopped, want < lease_ttl %v (a released its lease)", d, cfg.LeaseTTL)
	}
	for i := 10; i < 15; i++ {
		e.publish(t, "in.lease.k", encodeObs(t, "json", xs[i], fmt.Sprint(i)), "")
	}
	waitFor(t, 5*time.Second, "drained by b", func() bool { return e.drained(t, pc) })
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	st, last := e.loadState(t, pc.Name, "k")
	if st.Seen != 15 || last != 15 {
		t.Errorf("state: seen %d, last seq %d; want 15 and 15", st.Seen, last)
	}
}

// TestLeaseFail: with on_lease_held fail, a second process refuses to start
// while a live one holds the consumer.
func TestLeaseFail(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("leasefail")
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 200 * time.Millisecond}
	a := e.startAsync(t, "a", cfg)
	waitFor(t, 5*time.Second, "a ready", a.p.Ready)
	cfg.OnLeaseHeld = LeaseFail
	b := e.startAsync(t, "b", cfg)
	select {
	case err := <-b.done:
		b.done <- err
		if err == nil || !strings.Contains(err.Error(), "held by a live instance") || !strings.Contains(err.Error(), pc.WithDefaults().Input.Durable) {
			t.Errorf("second instance: got %v, want an error saying the consumer is held", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second instance with on_lease_held fail still running after 5s")
	}
	if !a.p.Ready() {
		t.Error("the first instance stopped being ready")
	}
}

// TestLeaseTakeover plants the lease of an instance that died without
// releasing it: a new instance takes it over once it has not been renewed
// for lease_ttl, and not before.
func TestLeaseTakeover(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("leasedead")
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: DefaultCheckpointBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, leaseKey(pc.WithDefaults()), []byte(`{"owner":"dead/1/x"}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a := e.startAsync(t, "a", cfg)
	waitFor(t, 5*time.Second, "ready", a.p.Ready)
	if d := time.Since(start); d < cfg.LeaseTTL {
		t.Errorf("took the lease over after %v, want ≥ lease_ttl %v", d, cfg.LeaseTTL)
	}
	e.publish(t, "in.leasedead.k", encodeObs(t, "json", []float64{1, 2, 3}, ""), "")
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })
	ent, err := kv.Get(ctx, leaseKey(pc.WithDefaults()))
	if err != nil || leaseOwner(ent.Value()) != a.p.id {
		t.Errorf("lease: %v %v, want owner %s", ent, err, a.p.id)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, leaseKey(pc.WithDefaults())); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("lease after stop: got %v, want %v (released)", err, jetstream.ErrKeyNotFound)
	}
}

// TestLeaseLost: when another instance takes the lease over (here the test
// overwrites it), the holder stops with an error saying so.
func TestLeaseLost(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("leaselost")
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 150 * time.Millisecond}
	a := e.startAsync(t, "a", cfg)
	waitFor(t, 5*time.Second, "ready", a.p.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, leaseKey(pc.WithDefaults()), []byte(`{"owner":"usurper/2/y"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		a.done <- err
		if err == nil || !strings.Contains(err.Error(), "lost to usurper/2/y") {
			t.Errorf("Run: got %v, want an error saying the lease was lost to usurper/2/y", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still going 5s after its lease was taken")
	}
	// The usurper's lease is left alone.
	ent, err := kv.Get(ctx, leaseKey(pc.WithDefaults()))
	if err != nil || leaseOwner(ent.Value()) != "usurper/2/y" {
		t.Errorf("lease after the loss: %v %v, want owner usurper/2/y", ent, err)
	}
}

// TestCheckpointPerDurable runs two partitions of one pipeline name, each
// with its own subject filter and durable consumer, one after the other.
// Each must replay from its own checkpoint: the second partition's messages
// precede the first's in the stream, and a shared checkpoint would make
// the second skip them.
func TestCheckpointPerDurable(t *testing.T) {
	e := newEnv(t)
	part := func(i int) PipelineConfig {
		pc := pipelineConfig("part")
		pc.Input.Subject = fmt.Sprintf("in.part.%d.*", i)
		pc.Input.Durable = fmt.Sprint("part-", i)
		return pc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ensureStream(ctx, e.js, jetstream.StreamConfig{Name: "part_IN", Subjects: []string{"in.part.>"}}); err != nil {
		t.Fatal(err)
	}
	xs := vectors(31, 15)
	for i := range 5 { // sequences 1..5: partition 1, key b
		e.publish(t, "in.part.1.b", encodeObs(t, "json", xs[i], ""), "")
	}
	for i := 5; i < 15; i++ { // sequences 6..15: partition 0, key a
		e.publish(t, "in.part.0.a", encodeObs(t, "json", xs[i], ""), "")
	}
	p0 := part(0)
	a := e.startAsync(t, "p0", Config{Pipelines: []PipelineConfig{p0}})
	waitFor(t, 5*time.Second, "partition 0 drained", func() bool { return a.in(p0.Name) == 10 })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := a.p.pipes[0].stats.Checkpoint.Load(); got != 16 {
		t.Fatalf("partition 0 checkpoint after stop: got %d, want 16", got)
	}
	p1 := part(1)
	b := e.startAsync(t, "p1", Config{Pipelines: []PipelineConfig{p1}})
	waitFor(t, 5*time.Second, "partition 1 drained", func() bool { return b.in(p1.Name) == 5 })
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		seen int64
		last uint64
	}{{"a", 10, 15}, {"b", 5, 5}} {
		st, last := e.loadState(t, "part", c.key)
		if st.Seen != c.seen || last != c.last {
			t.Errorf("key %s: seen %d, last seq %d; want %d and %d", c.key, st.Seen, last, c.seen, c.last)
		}
	}
}
