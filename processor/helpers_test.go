package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/kpcastream/kpcastream/snapshot"
)

// env is a real embedded nats-server with JetStream and a client.
type env struct {
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	store *snapshot.Store
	// wrapKV, when set, wraps the coordination bucket of the processors
	// started next.
	wrapKV func(jetstream.KeyValue) jetstream.KeyValue
	// observe, when set, also receives the log of the processors started next.
	observe zapcore.Core
	// wrapPub, when set, wraps the output publisher of the processors
	// started on this env (fault injection).
	wrapPub func(asyncPublisher) asyncPublisher
	// wrapKeys, when set, wraps the workers' snapshot store the same way.
	wrapKeys func(keyStore) keyStore
	// wrapLane, when set, wraps the workers' lane publishers the same way.
	wrapLane func(lanePublisher) lanePublisher
}

func newEnv(t *testing.T) *env { return newEnvB(t) }

func newEnvB(t testing.TB) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test against an embedded nats-server (skipped under -short)")
	}
	_, url := natstest.RunServer(t)
	nc, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := snapshot.Open(ctx, js, snapshot.Config{})
	if err != nil {
		t.Fatalf("open snapshot store: %v", err)
	}
	return &env{url: url, nc: nc, js: js, store: st}
}

// pipelineConfig returns a JetStream pipeline on stream <NAME>_IN, subject
// in.<name>.*, output kpca.out.<name>.<key> captured by stream <NAME>_OUT.
func pipelineConfig(name string) PipelineConfig {
	return PipelineConfig{
		Name:       name,
		Input:      InputConfig{Stream: name + "_IN", Subject: "in." + name + ".*", CreateStream: true, NakDelay: 50 * time.Millisecond},
		Learner:    testLearnerConfig(),
		Output:     OutputConfig{Subject: "kpca.out.{pipeline}.{key}", Stream: name + "_OUT", CreateStream: true},
		DeadLetter: "kpca.dlq.{pipeline}",
	}
}

type running struct {
	p    *Processor
	reg  *prometheus.Registry
	stop func() error
}

// start runs a processor with the test learner; stop cancels it and
// returns Run's error.
func (e *env) start(t *testing.T, cfg Config) *running {
	t.Helper()
	return e.startWith(t, cfg, newPCA)
}

func (e *env) startB(t testing.TB, cfg Config) *running {
	t.Helper()
	return e.startWith(t, cfg, nil)
}

// startWith is start with the given learner constructor (nil: learners.New).
func (e *env) startWith(t testing.TB, cfg Config, newLearner func(learners.Config) (learners.Learner, error)) *running {
	t.Helper()
	return e.startOn(t, cfg, newLearner, e.nc, e.js, nil)
}

// startOn is startWith on the connection nc, with an apply hook.
func (e *env) startOn(t testing.TB, cfg Config, newLearner func(learners.Config) (learners.Learner, error), nc *nats.Conn, js jetstream.JetStream,
	onApply func(pipeline string, partition int, epoch uint64, key string, seq uint64)) *running {
	t.Helper()
	reg := prometheus.NewRegistry()
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = 50 * time.Millisecond
	}
	log := zap.NewNop()
	if tt, ok := t.(*testing.T); ok {
		log = zaptest.NewLogger(tt)
	}
	if e.observe != nil {
		log = zap.New(zapcore.NewTee(log.Core(), e.observe))
	}
	store := e.store
	if nc != e.nc {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if store, err = snapshot.Open(ctx, js, snapshot.Config{}); err != nil {
			t.Fatalf("open snapshot store: %v", err)
		}
	}
	p, err := New(cfg, Deps{Conn: nc, JS: js, Snapshots: store, Logger: log, Registry: reg, NewLearner: newLearner})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p.onApply = onApply
	p.wrapKV = e.wrapKV
	p.wrapKeys = e.wrapKeys
	p.wrapLane = e.wrapLane
	if e.wrapPub != nil {
		p.pubJS = e.wrapPub(p.pubJS)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !p.Ready() {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("Run returned before ready: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("processor not ready after 10s")
		}
	}
	stopped := false
	r := &running{p: p, reg: reg}
	r.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("Run did not return 30s after cancel")
		}
	}
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// vectors returns n deterministic 3-vectors from seed.
func vectors(seed uint64, n int) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][]float64, n)
	for i := range out {
		a := r.NormFloat64()
		out[i] = []float64{a + 0.1*r.NormFloat64(), 2*a + 0.1*r.NormFloat64(), r.NormFloat64()}
	}
	return out
}

type obsWire struct {
	X  []float64 `json:"x" msgpack:"x"`
	ID string    `json:"id" msgpack:"id"`
}

func encodeObs(t *testing.T, enc string, x []float64, id string) []byte {
	t.Helper()
	var b []byte
	var err error
	if enc == "json" {
		b, err = json.Marshal(obsWire{X: x, ID: id})
	} else {
		b, err = msgpack.Marshal(obsWire{X: x, ID: id})
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publish publishes data to subject on the input stream and waits for the ack.
func (e *env) publish(t *testing.T, subject string, data []byte, contentType string) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	if contentType != "" {
		m.Header.Set("Content-Type", contentType)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
}

// waitFor polls cond every 10ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drained reports whether every partition of pc has an owner whose
// consumer (<durable>-p<n>-e<epoch>, the epoch of the partition's record)
// has nothing pending or unacknowledged and has acknowledged the last
// message of its filter.
func (e *env) drained(t *testing.T, pc PipelineConfig) bool {
	t.Helper()
	pc = pc.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		return false
	}
	for n := range pc.Partitions {
		s, err := e.js.Stream(ctx, pc.inputStream(n))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		en, err := kv.Get(ctx, recordKey(pc, n))
		if err != nil {
			return false
		}
		rec, err := ownership.DecodeRecord(en.Value())
		if err != nil || rec.Owner == "" {
			return false
		}
		c, err := s.Consumer(ctx, consumerName(pc, n, rec.Epoch))
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		if err != nil || info.NumAckPending != 0 || info.NumPending != 0 {
			return false
		}
		last, err := s.GetLastMsgForSubject(ctx, info.Config.FilterSubject)
		if err == nil && info.AckFloor.Stream < last.Sequence {
			return false
		}
	}
	return true
}

func (e *env) streamMsgs(t *testing.T, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func (r *running) stats(name string) PipelineStats {
	for _, s := range r.p.Stats() {
		if s.Pipeline == name {
			return s
		}
	}
	return PipelineStats{}
}

// modelOf returns a model of pl's keys around learner l.
func modelOf(tb testing.TB, pl *pipeline, l learners.Learner) *keymodel.Model {
	tb.Helper()
	m, err := keymodel.With(pl.modelSpec(nil), l)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
