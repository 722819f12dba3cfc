package publish

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestFindAndOut runs Find and Out against a real server: a subject a
// stream captures goes out with JetStream (Publish acknowledged, Send a
// future that resolves, Retry deduplicated by the message id), one that no
// stream captures — or one a stream only overlaps — on core NATS.
func TestFindAndOut(t *testing.T) {
	_, url := natstest.RunServer(t)
	nc, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"out.>", "part.a.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ subj, want string }{
		{"out.p.k", "OUT"}, {"out.p.*", "OUT"}, {"part.a.x", "OUT"}, {"part.*.x", ""}, {"core.k", ""},
	} {
		got, err := Find(ctx, js, tc.subj)
		if err != nil || got != tc.want {
			t.Errorf("Find(%q) = %q, %v; want %q", tc.subj, got, err, tc.want)
		}
	}
	stream, err := Find(ctx, js, "out.p.k")
	if err != nil {
		t.Fatal(err)
	}
	out := &Out{Core: nc, Sync: js, Async: js, JetStream: stream != "", Attempt: time.Second}
	m := nats.NewMsg("out.p.k")
	m.Data = []byte("1")
	m.Header.Set(jetstream.MsgIDHeader, "id-1")
	if err := out.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := out.Retry(ctx, m, time.Now().Add(time.Second), nil); err != nil { // a duplicate: acknowledged, not stored
		t.Fatal(err)
	}
	m2 := nats.NewMsg("out.p.k")
	m2.Data = []byte("2")
	f, err := out.Send(m2)
	if err != nil || f == nil {
		t.Fatalf("Send with JetStream: future %v, %v", f, err)
	}
	select {
	case <-f.Ok():
	case err := <-f.Err():
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("no PubAck")
	}
	st, err := js.Stream(ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %v messages (%v), want 2", info.State.Msgs, err)
	}
	core := &Out{Core: nc}
	sub, err := nc.SubscribeSync("core.k")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := core.Send(nats.NewMsg("core.k")); err != nil || f != nil {
		t.Fatalf("core Send: future %v, %v; want none", f, err)
	}
	if err := core.Retry(ctx, nats.NewMsg("core.k"), time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("core message: %v", err)
		}
	}
}

// failing is a Sync publisher that fails every attempt with err.
type failing struct {
	err   error
	calls int
	last  time.Time // when the last attempt failed
}

func (f *failing) PublishMsg(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	f.calls++
	f.last = time.Now()
	return nil, f.err
}

// TestRetry: a transient failure is retried until the deadline, or until
// goOn refuses; a permanent one is returned at once.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	tr := &failing{err: nats.ErrTimeout}
	o := &Out{Sync: tr, JetStream: true, Attempt: time.Millisecond}
	if err := o.Retry(ctx, nats.NewMsg("x"), time.Now().Add(100*time.Millisecond), nil); !errors.Is(err, nats.ErrTimeout) || tr.calls < 2 {
		t.Errorf("transient: %v after %d attempts, want the timeout after several", err, tr.calls)
	}
	stop := errors.New("fenced")
	tr.calls = 0
	if err := o.Retry(ctx, nats.NewMsg("x"), time.Now().Add(time.Minute), func() error { return stop }); err != stop || tr.calls != 1 {
		t.Errorf("goOn refusing: %v after %d attempts, want its error after 1", err, tr.calls)
	}
	// go is read after the pause between attempts, not before it: one
	// that refuses from 10 ms after the first attempt failed stops the
	// retry taken 20 ms after it.
	tr.calls = 0
	tr.last = time.Time{}
	if err := o.Retry(ctx, nats.NewMsg("x"), time.Now().Add(2*time.Second), func() error {
		if time.Since(tr.last) >= 10*time.Millisecond {
			return stop
		}
		return nil
	}); err != stop || tr.calls != 1 {
		t.Errorf("go refusing during the pause: %v after %d attempts, want its error after 1", err, tr.calls)
	}
	perm := &failing{err: errors.New("permanent")}
	o.Sync = perm
	if err := o.Retry(ctx, nats.NewMsg("x"), time.Now().Add(time.Minute), nil); err == nil || perm.calls != 1 {
		t.Errorf("permanent: %v after %d attempts, want it after 1", err, perm.calls)
	}
}

// TestCall: a transient failure (an attempt left unanswered, a cluster
// without its leader) is tried again, each attempt with its own bounded
// context, until one succeeds; a permanent one is returned at once; a
// caller's context that ends stops the retries with both errors.
func TestCall(t *testing.T) {
	ctx := context.Background()
	var deadlines []time.Duration
	calls, retried := 0, 0
	err := Call(ctx, 50*time.Millisecond, func(c context.Context) error {
		calls++
		d, ok := c.Deadline()
		if !ok {
			t.Fatal("attempt without a deadline")
		}
		deadlines = append(deadlines, time.Until(d))
		if calls < 3 {
			<-c.Done() // unanswered: the attempt's own deadline ends it
			return c.Err()
		}
		return nil
	}, func(int, error) { retried++ })
	if err != nil || calls != 3 || retried != 2 {
		t.Errorf("unanswered twice: %v after %d attempts (%d retried), want success after 3 (2)", err, calls, retried)
	}
	for i, d := range deadlines {
		if d > 50*time.Millisecond {
			t.Errorf("attempt %d had %v, want at most the attempt's 50ms", i+1, d)
		}
	}
	calls = 0
	perm := errors.New("bucket exists with other settings")
	if err := Call(ctx, time.Second, func(context.Context) error { calls++; return perm }, nil); err != perm || calls != 1 {
		t.Errorf("permanent: %v after %d attempts, want it after 1", err, calls)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = Call(cctx, time.Second, func(context.Context) error { return nats.ErrNoResponders }, nil)
	if !errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("caller's context ended: %v, want no responders and the deadline", err)
	}
}
