package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/processor"
)

// TestRawRelay runs the raw baseline on a real server: 500 inputs over 3
// keys, through a 1 ms round-trip proxy, with a window of 8 (16 acks
// pending, pulls of 8). Every input
// must come out once, in input order per key, with Nats-Msg-Id
// raw/<key>/<seq> and the first k values of its x, and every input must
// be acked. A second relay that starts over from the first message (its
// consumer deleted) republishes everything: the output stream must still
// hold each output once.
func TestRawRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	const (
		n = 500
		d = 4
		k = 2
	)
	_, url := natstest.RunServer(t)
	_, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.*"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	out, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out.*"}, Storage: jetstream.MemoryStorage, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([][]float64, n+1) // by input sequence
	for i := range n {
		x := []float64{float64(i), -float64(i), 0.5, 2}
		data, err := codec.EncodeObservations(nil, codec.Msgpack, []codec.Observation{{ID: "o" + strconv.Itoa(i), X: x, TS: 1}})
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: fmt.Sprintf("in.k%d", i%3), Data: data, Header: nats.Header{processor.HeaderContentType: {codec.Msgpack.ContentType()}}}
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		xs[ack.Sequence] = x
	}
	px, err := newDelayProxy(url[len("nats://"):], 500*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	nc, err := nats.Connect("nats://" + px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	relay := func() {
		t.Helper()
		r, err := startRaw(ctx, nc, rawConfig{stream: "IN", subject: "out", k: k, window: 8, maxAck: 16, pull: pullBatch(16, 4)})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "every input acked", func() bool {
			ci, err := in.Consumer(ctx, rawConsumer)
			if err != nil {
				return false
			}
			info, err := ci.Info(ctx)
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == n
		})
		if err := r.stop(10 * time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	relay()
	if err := in.DeleteConsumer(ctx, rawConsumer); err != nil {
		t.Fatal(err)
	}
	relay() // every output again: dropped as duplicates

	info, err := out.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("output stream holds %d messages, want %d (each output once)", info.State.Msgs, n)
	}
	last := map[string]uint64{}
	for seq := uint64(1); seq <= n; seq++ {
		m, err := out.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		o, err := codec.DecodeOutput(m.Data, codec.Msgpack)
		if err != nil {
			t.Fatalf("output %d: %v", seq, err)
		}
		if m.Subject != "out."+o.Key {
			t.Errorf("output %d: subject %s for key %s", seq, m.Subject, o.Key)
		}
		if want := "raw/" + o.Key + "/" + strconv.FormatUint(o.Seq, 10); m.Header.Get(jetstream.MsgIDHeader) != want {
			t.Errorf("output %d: Nats-Msg-Id %q, want %q", seq, m.Header.Get(jetstream.MsgIDHeader), want)
		}
		if o.Seq <= last[o.Key] {
			t.Errorf("output %d: key %s input %d after %d: want input order", seq, o.Key, o.Seq, last[o.Key])
		}
		last[o.Key] = o.Seq
		if o.Seq < 1 || o.Seq > n {
			t.Fatalf("output %d: input seq %d", seq, o.Seq)
		}
		x := xs[o.Seq]
		if !slices.Equal(o.Z, x[:k]) || o.SPE != x[2]*x[2]+x[3]*x[3] || o.ID != "o"+strconv.Itoa(int(o.Seq-1)) {
			t.Errorf("output %d: id %q z %v spe %v for x %v (input %d)", seq, o.ID, o.Z, o.SPE, x, o.Seq)
		}
	}
}

// waitUntil polls cond every 10 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
