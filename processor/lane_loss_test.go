package processor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestLaneLostWithConnection: the stream persisted two messages of a
// lane's batch and its answers were lost with the connection; told of the
// loss (lane.lost), the lane ends the batch at once, and the end-of-batch's
// answer, on the new connection, says both were persisted. Before, the lane
// waited for the lost answers until its publish attempt timeout (10 s here),
// then ended the batch.
func TestLaneLostWithConnection(t *testing.T) {
	srv := newLaneServer(t, server.JSLimitOpts{})
	px := newCutProxy(t, srv.Addr())
	nc, err := nats.Connect("nats://"+px.addr, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	direct, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	js, _ := jetstream.New(direct)
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LOST", Subjects: []string{"lost.>"}, AllowBatchPublish: true, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := newLaneRig(t, nc)
	r.l.timeout, r.l.idle = 10*time.Second, time.Hour
	r.send(0, outMsg("lost.k", "m0", 10))
	r.until(1, 5*time.Second)
	px.deaf.Store(true)
	r.send(1, outMsg("lost.k", "m1", 10))
	r.send(2, outMsg("lost.k", "m2", 10))
	waitFor(t, 5*time.Second, "the stream persisted both", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 3
	})
	px.cut()
	px.deaf.Store(false)
	waitFor(t, 5*time.Second, "reconnected", func() bool { return nc.Stats().Reconnects >= 1 && nc.IsConnected() })
	r.l.lost(time.Now()) // as the worker does when its partition's link reports the loss
	r.until(3, 5*time.Second)
	for i, a := range r.got[1:] {
		if a.err != nil || a.ord != uint64(i+1) {
			t.Errorf("answer %d: %+v (%v), want ord %d persisted", i+1, a, a.err, i+1)
		}
	}
}

// TestLaneOutputsAfterConnectionLoss cuts a worker's connection while one
// key's outputs go through its lane, the answers of those in flight lost
// with it: the worker tells its lane of the loss, and the stream drains
// well before the lane's publish attempt timeout (10 s here; under half of
// it) after the reconnection. Before, the outputs in flight waited for it — the key's
// later outputs, and the graceful stop that lost deliveries ask for, with
// them (issue 28: graceful stops after a server restart ended 1.4–1.9 s
// after it, at the 2 s timeout of TestClusterNodeLoss's workers).
func TestLaneOutputsAfterConnectionLoss(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("llost")
	pc.Output.KeyInFlight = 8
	pc.Input.AckWait = time.Minute
	cfg := Config{Pipelines: []PipelineConfig{pc}, Workers: 1, LeaseTTL: 20 * time.Second, SnapshotTimeout: 50 * time.Second, ShutdownTimeout: 30 * time.Second}
	px := newCutProxy(t, strings.TrimPrefix(e.url, "nats://"))
	nc, err := nats.Connect("nats://"+px.addr, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := e.startOn(t, cfg, newPCA, nc, js, nil)
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	if !r.p.pipes[0].io[0].lane {
		t.Fatal("the pipeline has no output lane")
	}
	if got := r.p.publishAttempt(); got != 10*time.Second {
		t.Fatalf("publish attempt %v, want 10s", got)
	}
	waitFor(t, 10*time.Second, "the partition runs", func() bool { return ownedBy(pc.Name, r) == 1 })
	// At the 30th send, what the server sends is dropped from then on
	// (lost with the connection), and the connection is cut 100 ms later.
	var once sync.Once
	cut := make(chan time.Time, 1)
	sends := 0
	laneTrace = func(_ *lane, format string, _ ...any) {
		if !strings.HasPrefix(format, "send") {
			return
		}
		if sends++; sends == 30 {
			once.Do(func() {
				px.deaf.Store(true)
				go func() {
					time.Sleep(100 * time.Millisecond)
					px.cut()
					px.deaf.Store(false)
					cut <- time.Now()
				}()
			})
		}
	}
	t.Cleanup(func() { laneTrace = nil })
	xs := vectors(17, 200)
	for i, x := range xs {
		if _, err := e.js.PublishAsync("in."+pc.Name+".a", encodeObs(t, "json", x, fmt.Sprint(i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publishes not acknowledged within 10s")
	}
	select {
	case <-cut:
	case <-time.After(20 * time.Second):
		t.Fatal("no lane sent 30 outputs within 20s")
	}
	waitFor(t, 5*time.Second, "reconnected", func() bool { return nc.Stats().Reconnects >= 1 && nc.IsConnected() })
	back := time.Now()
	waitFor(t, 30*time.Second, "drained", func() bool { return e.drained(t, pc) })
	// (The lane's timeout runs from the send, 100 ms and a reconnection
	// before back: half of it, to tell waiting for it from not.)
	if took := time.Since(back); took >= r.p.publishAttempt()/2 {
		t.Errorf("drained %v after the reconnection, want well before the lane's publish attempt timeout %v (half): the answers lost with the connection are not waited for",
			took.Round(time.Millisecond), r.p.publishAttempt())
	}
	// Each output once, in input order.
	seqs := e.outputSeqs(t, pc.Output.Stream)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("output %d: input sequence %d after %d, want each once and in order", i, seqs[i], seqs[i-1])
		}
	}
	if len(seqs) < len(xs)/2 {
		t.Errorf("%d outputs of %d inputs", len(seqs), len(xs))
	}
}
