package processor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
)

// outputSeqs reads every message of an output stream and returns the input
// sequences of its projections, in stream order.
func (e *env) outputSeqs(t *testing.T, stream string) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, o := range e.outputs(t, stream) {
		seqs = append(seqs, o.Seq)
	}
	return seqs
}

// outputs reads every message of an output stream (JSON) in stream order.
func (e *env) outputs(t *testing.T, stream string) []*codec.Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var outs []*codec.Output
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get %s/%d: %v", stream, seq, err)
		}
		o, err := codec.DecodeOutput(m.Data, codec.JSON)
		if err != nil {
			t.Fatalf("decode output %d: %v", seq, err)
		}
		outs = append(outs, o)
	}
	return outs
}

// TestUnsentOutputsGoFirst makes the output publish of one message fail
// (its projection is larger than the output stream's max_msg_size) while
// the next message of the same key is already delivered. The failed
// projection must be published before any later message of the key is
// applied, and exactly once, even though the later message was delivered
// before the failed one came back.
func TestUnsentOutputsGoFirst(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("unsent")
	pc.Input.NakDelay = 200 * time.Millisecond
	pc.Output.CreateStream = false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: pc.Output.Stream, Subjects: []string{"kpca.out.unsent.*"}, MaxMsgSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, e.js, jetstream.StreamConfig{Name: pc.Input.Stream, Subjects: []string{pc.Input.Subject}}); err != nil {
		t.Fatal(err)
	}
	// Messages 1..pcaWarm+2 of one key, all in the stream before the
	// processor starts, so the consumer delivers them in one batch. The
	// projection of message pcaWarm+1 carries a 2,000-byte id: too large.
	const n = pcaWarm + 2
	big := pcaWarm + 1
	for i, x := range vectors(11, n) {
		id := fmt.Sprint(i + 1)
		if i+1 == big {
			id = strings.Repeat("x", 2000)
		}
		e.publish(t, "in.unsent.k", encodeObs(t, "json", x, id), "")
	}
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1})
	// Wait until the later message was handled at least once while the
	// projection of the big one could not be published.
	waitFor(t, 5*time.Second, "the later message handled", func() bool { return r.stats(pc.Name).In >= n })
	// The publish fails asynchronously, after the message was handled.
	waitFor(t, 5*time.Second, "a failed publish (the test makes the big projection fail)", func() bool {
		return metricValue(t, r.p.met.publishErrors.WithLabelValues(pc.Name)) >= 1
	})
	// The failure goes away.
	if _, err := e.js.UpdateStream(ctx, jetstream.StreamConfig{Name: pc.Output.Stream, Subjects: []string{"kpca.out.unsent.*"}, MaxMsgSize: -1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for s := uint64(pcaWarm); s <= n; s++ {
		want = append(want, s)
	}
	if got := e.outputSeqs(t, pc.Output.Stream); !slices.Equal(got, want) {
		t.Errorf("projected sequences: got %v, want %v (each once, in order)", got, want)
	}
	st, last := e.loadState(t, pc.Name, "k")
	if st.Seen != n || last != n {
		t.Errorf("state: seen %d, last seq %d; want %d and %d", st.Seen, last, n, n)
	}
}

// TestUnsentOutputsNotSnapshotted makes the output publish of a key's last
// message fail, lets the snapshot timer run, stops the processor without
// final snapshots and restarts it once the failure is gone: the projection
// must come out, so no snapshot may hold a message whose outputs are unsent.
func TestUnsentOutputsNotSnapshotted(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("unsnap")
	pc.Input.NakDelay = 100 * time.Millisecond
	pc.Output.CreateStream = false
	no := false
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: 20 * time.Millisecond, OnShutdown: &no}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outCfg := jetstream.StreamConfig{Name: pc.Output.Stream, Subjects: []string{"kpca.out.unsnap.*"}, MaxMsgSize: 1024}
	if _, err := e.js.CreateStream(ctx, outCfg); err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, e.js, jetstream.StreamConfig{Name: pc.Input.Stream, Subjects: []string{pc.Input.Subject}}); err != nil {
		t.Fatal(err)
	}
	const n = pcaWarm + 1 // the last one's projection is too large
	for i, x := range vectors(12, n) {
		id := fmt.Sprint(i + 1)
		if i+1 == n {
			id = strings.Repeat("x", 2000)
		}
		e.publish(t, "in.unsnap.k", encodeObs(t, "json", x, id), "")
	}
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1})
	waitFor(t, 5*time.Second, "two failed publishes", func() bool {
		return metricValue(t, r.p.met.publishErrors.WithLabelValues(pc.Name)) >= 2
	})
	time.Sleep(100 * time.Millisecond) // several snapshot ticks
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	outCfg.MaxMsgSize = -1
	if _, err := e.js.UpdateStream(ctx, outCfg); err != nil {
		t.Fatal(err)
	}
	pc.Snapshot.OnShutdown = nil
	r = e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1})
	waitFor(t, 10*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := e.outputSeqs(t, pc.Output.Stream), []uint64{pcaWarm, n}; !slices.Equal(got, want) {
		t.Errorf("projected sequences: got %v, want %v", got, want)
	}
	st, last := e.loadState(t, pc.Name, "k")
	if st.Seen != n || last != n {
		t.Errorf("state: seen %d, last seq %d; want %d and %d", st.Seen, last, n, n)
	}
}

// TestKeyOrderAfterNak fails the first message of a key before it is
// applied (its learner cannot be built, a transient error), while the
// key's next messages are already queued. They must wait for it: the key's
// learner sees the messages in stream order, none skipped.
func TestKeyOrderAfterNak(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("order")
	pc.Input.NakDelay = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ensureStream(ctx, e.js, jetstream.StreamConfig{Name: pc.Input.Stream, Subjects: []string{pc.Input.Subject}}); err != nil {
		t.Fatal(err)
	}
	xs := vectors(13, 6)
	for i, x := range xs {
		e.publish(t, "in.order.k", encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	var calls atomic.Int32
	flaky := func(c learners.Config) (learners.Learner, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("test: learner store unavailable")
		}
		return newPCA(c)
	}
	r := e.startWith(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1}, flaky)
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if calls.Load() < 2 {
		t.Fatalf("the learner constructor was called %d times: the test did not fail the first message", calls.Load())
	}
	want, _ := newPCA(pc.Learner)
	for _, x := range xs {
		if err := want.Learn(x); err != nil {
			t.Fatal(err)
		}
	}
	got, last := e.loadState(t, pc.Name, "k")
	if got.Seen != int64(len(xs)) || last != uint64(len(xs)) {
		t.Fatalf("state: seen %d, last seq %d; want %d and %d", got.Seen, last, len(xs), len(xs))
	}
	if !reflect.DeepEqual(got, want.State()) {
		t.Errorf("state differs from learning the messages in stream order")
	}
	if got := e.outputSeqs(t, pc.Output.Stream); !slices.Equal(got, []uint64{4, 5, 6}) {
		t.Errorf("projected sequences: got %v, want [4 5 6]", got)
	}
}
