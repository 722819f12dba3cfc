package clustertest_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDrainCheckUnanswered is the failure TestClusterElastic showed under
// CPU stress (issue 28): one JetStream request of the test's drain check
// that no server answered (a consumer info sent while the restarted
// cluster settled) held the check until the test's four-minute context
// ended, so the test reported partitions "not drained" — every later read
// failing at once with the expired context — although nothing said they
// had not drained. Here the check's requests reach the server through a
// relay that can stop answering: answered, the check reads the record and
// the consumer; unanswered, it returns within requestTimeout, so that the
// drain wait asks again instead of hanging.
func TestDrainCheckUnanswered(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, js := connect(t, s.ClientURL(), "setup", 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // as long as TestClusterElastic's
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ckpt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "partitions.p.0", []byte(`{"owner":"m1","epoch":3,"checkpoint":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}}); err != nil {
		t.Fatal(err)
	}

	// The relay: JetStream API requests under $RELAY.API are passed on
	// to the server's $JS.API and their answers back, until mute.
	var mute atomic.Bool
	relay, _ := connect(t, s.ClientURL(), "relay", 100*time.Millisecond)
	if _, err := relay.Subscribe("$RELAY.API.>", func(m *nats.Msg) {
		if mute.Load() {
			return // lost: never answered
		}
		resp, err := relay.Request("$JS.API."+strings.TrimPrefix(m.Subject, "$RELAY.API."), m.Data, 5*time.Second)
		if err == nil {
			_ = m.RespondMsg(&nats.Msg{Data: resp.Data, Header: resp.Header})
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := relay.Flush(); err != nil {
		t.Fatal(err)
	}
	rjs, err := jetstream.NewWithAPIPrefix(nc, "$RELAY.API")
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := rjs.KeyValue(ctx, "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	in, err := rjs.Stream(ctx, "IN")
	if err != nil {
		t.Fatal(err)
	}

	check := func() (string, time.Duration) {
		t.Helper()
		start := time.Now()
		done := make(chan string, 1)
		go func() { done <- partitionDrained(ctx, ckpt, in, "p", "d", 0) }()
		select {
		case r := <-done:
			return r, time.Since(start)
		case <-time.After(requestTimeout + 10*time.Second):
			t.Fatalf("the drain check has not returned %v after a request went unanswered (requestTimeout %v)", time.Since(start), requestTimeout)
			return "", 0
		}
	}
	// Answered: the record is read (owner m1 at epoch 3) and the
	// consumer of that epoch looked up (there is none).
	if r, _ := check(); !strings.Contains(r, "owner m1 epoch 3") || !strings.Contains(r, "consumer d-p0-e3") {
		t.Fatalf("answered check: %q, want the record's owner and epoch and the missing consumer d-p0-e3", r)
	}
	mute.Store(true)
	r, took := check()
	if !strings.Contains(r, context.DeadlineExceeded.Error()) {
		t.Errorf("unanswered check: %q, want the request's deadline", r)
	}
	t.Logf("unanswered check returned after %v: %s", took.Round(time.Millisecond), r)
}
