package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestResumeAfterConnectionLoss cuts a member's connection (a proxy resets
// it, dropping the deliveries and acks it carried) three times while
// messages flow, with ack_wait 20 s and a lease that outlasts the cuts (no
// fencing): the deliveries lost must come back at once, not after ack_wait
// — every partition drained within 2 s of the last cut's reconnection
// (issue 28: a drain took ack_wait after a server restart).
func TestResumeAfterConnectionLoss(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("reconn")
	pc.Partitions = 2
	pc.Input.AckWait = 20 * time.Second
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: 10 * time.Second, ShutdownTimeout: 5 * time.Second}
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
	defer func() { _ = r.stop() }()
	waitFor(t, 10*time.Second, "the partitions run", func() bool { return ownedBy(pc.Name, r) == 2 })
	keys := []string{"a", "b", "c", "d", "e", "f"}
	xs := vectors(7, 6000)
	// Cut while the pulls carry deliveries: publish until the member is
	// still working through the stream when the last chunk is in.
	// Each chunk of 500 goes out asynchronously, so that the member has
	// work queued even on a quiet machine (published one by one, each
	// waiting for its PubAck, a quiet machine kept up with every chunk).
	for i, x := range xs {
		if _, err := e.js.PublishAsync(fmt.Sprintf("in.%s.%s", pc.Name, keys[i%len(keys)]), encodeObs(t, "json", x, fmt.Sprint(i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%500 != 499 {
			continue
		}
		select {
		case <-e.js.PublishAsyncComplete():
		case <-time.After(10 * time.Second):
			t.Fatal("publishes not acknowledged within 10s")
		}
		if i >= 1999 && !e.drained(t, pc) {
			break
		}
		if i == len(xs)-1 {
			t.Fatal("the member drained every chunk as fast as it was published: nothing in flight to lose")
		}
	}
	px.cut()
	cut := time.Now()
	waitFor(t, 5*time.Second, "reconnected", func() bool { return nc.Stats().Reconnects >= 1 && nc.IsConnected() })
	back := time.Now()
	waitFor(t, 30*time.Second, "drained", func() bool { return e.drained(t, pc) })
	took := time.Since(back)
	t.Logf("reconnected %v after the last cut; drained %v after that (ack_wait %v)", back.Sub(cut).Round(time.Millisecond),
		took.Round(time.Millisecond), pc.Input.AckWait)
	// The drain includes working off the queued chunk (about 2 s under
	// the race detector); what must not happen is waiting for ack_wait.
	if took > pc.Input.AckWait/4 {
		t.Errorf("drained %v after the connection came back, want well within ack_wait %v (a quarter)", took.Round(time.Millisecond), pc.Input.AckWait)
	}
	seqs := e.outputSeqs(t, pc.Output.Stream)
	if len(seqs) == 0 {
		t.Error("no outputs")
	}
}
