package ops

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestBackfillNewest: a watched key's backfill is the newest watchSamples
// outputs of the window, also when they came in a burst after most of the
// window's (issue 33 row 1: the page showed the oldest 2,048 of the last
// 10 minutes, and missed the alarms of the last minute). Real JetStream.
func TestBackfillNewest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server and stores 3·watchSamples outputs")
	}
	_, url := natstest.RunServer(t)
	_, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out.>"}}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, n int, alarm string) {
		t.Helper()
		var futs []jetstream.PubAckFuture
		for i := from; i < from+n; i++ {
			b, err := codec.EncodeOutput(nil, codec.Msgpack, &codec.Output{Key: "k1", Seq: uint64(i), Z: []float64{float64(i), 0}, SPE: 0.4, SPELimit: 0.5, Alarm: alarm})
			if err != nil {
				t.Fatal(err)
			}
			f, err := js.PublishAsync("out.p.k1", b)
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatal("publish not acknowledged")
			}
		}
	}
	// Most of the window's outputs first, then a later burst of alarms: a
	// window narrowed at the mean rate still holds them all.
	n1, n2 := 2*watchSamples, watchSamples+500
	publish(1, n1, "")
	time.Sleep(1500 * time.Millisecond)
	publish(n1+1, n2, "spe")

	fb := &fakeBackend{}
	s := New(Config{JS: js}, fb, fb, nil)
	obs := s.backfill(ctx, Pipeline{Name: "p", OutputStream: "OUT"}, "k1")
	if len(obs) != watchSamples {
		t.Fatalf("backfill: %d outputs, want %d", len(obs), watchSamples)
	}
	last := n1 + n2
	if obs[len(obs)-1].Seq != uint64(last) || obs[0].Seq != uint64(last-watchSamples+1) {
		t.Errorf("backfill: seq %d…%d, want the newest %d…%d", obs[0].Seq, obs[len(obs)-1].Seq, last-watchSamples+1, last)
	}
	for i, o := range obs {
		if o.Alarm != "spe" || !o.Backfill || (i > 0 && o.Seq != obs[i-1].Seq+1) {
			t.Fatalf("backfill[%d]: seq %d alarm %q backfill %v: want consecutive alarms of the last burst", i, o.Seq, o.Alarm, o.Backfill)
		}
	}
	// A key with fewer outputs than watchSamples: all of them.
	publish2 := func() {
		b, _ := codec.EncodeOutput(nil, codec.Msgpack, &codec.Output{Key: "k2", Seq: 7, Z: []float64{1, 2}})
		if _, err := js.Publish(ctx, "out.p.k2", b); err != nil {
			t.Fatal(err)
		}
	}
	publish2()
	if got := s.backfill(ctx, Pipeline{Name: "p", OutputStream: "OUT"}, "k2"); len(got) != 1 || got[0].Seq != 7 {
		t.Errorf("backfill of a key with one output: %+v", got)
	}
}
