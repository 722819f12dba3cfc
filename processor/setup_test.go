package processor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestCreatedStreamsAndBuckets checks the replicas and limits of the
// streams created by create_stream and of the checkpoint bucket.
func TestCreatedStreamsAndBuckets(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("lim")
	pc.Input.MaxAge, pc.Input.MaxBytes = time.Hour, 1<<20
	pc.Output.MaxAge, pc.Output.MaxBytes = 2*time.Hour, 2<<20
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range []struct {
		stream   string
		maxAge   time.Duration
		maxBytes int64
	}{{pc.Input.Stream, time.Hour, 1 << 20}, {pc.Output.Stream, 2 * time.Hour, 2 << 20}} {
		s, err := e.js.Stream(ctx, c.stream)
		if err != nil {
			t.Fatal(err)
		}
		got := s.CachedInfo().Config
		if got.Replicas != 1 || got.MaxAge != c.maxAge || got.MaxBytes != c.maxBytes {
			t.Errorf("stream %s: got replicas %d, max_age %v, max_bytes %d; want 1, %v, %d",
				c.stream, got.Replicas, got.MaxAge, got.MaxBytes, c.maxAge, c.maxBytes)
		}
	}
	// A single server cannot hold 3 replicas: Run says which bucket and why.
	pc2 := pipelineConfig("lim3")
	p, err := New(Config{Pipelines: []PipelineConfig{pc2}, CheckpointBucket: "ckpt-r3", CheckpointReplicas: 3},
		Deps{Conn: e.nc, JS: e.js, Snapshots: e.store, Logger: zaptest.NewLogger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `checkpoint bucket "ckpt-r3" (3 replicas)`) {
		t.Errorf("Run with checkpoint_replicas 3 on one server: got %v, want an error naming the bucket and its replicas", err)
	}
	if _, err := e.js.KeyValue(ctx, "ckpt-r3"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("bucket ckpt-r3 after the failed Run: got %v, want %v", err, jetstream.ErrBucketNotFound)
	}
}

// TestSetupWaitsForJetStream starts Run against a server whose JetStream is
// not available yet: setup retries (with warnings) instead of failing or
// hanging, and the processor becomes ready once JetStream is there.
func TestSetupWaitsForJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test against an embedded nats-server (skipped under -short)")
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, js := natstest.Connect(t, s.ClientURL())
	p, err := New(Config{Pipelines: []PipelineConfig{pipelineConfig("late")}, Workers: 1},
		Deps{Conn: nc, JS: js, Logger: zaptest.NewLogger(t), Registry: prometheus.NewRegistry(), NewLearner: newPCA})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Run returned while JetStream was unavailable: %v", err)
	case <-time.After(time.Second):
	}
	if err := s.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for !p.Ready() {
		select {
		case err := <-done:
			t.Fatalf("Run returned: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready 15s after JetStream was enabled")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
