package processor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// laneServer is an embedded nats-server on a fixed port and store, which a
// test can restart.
type laneServer struct {
	t    *testing.T
	opts server.Options
	s    *server.Server
}

func newLaneServer(t *testing.T, limits server.JSLimitOpts) *laneServer {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test against an embedded nats-server (skipped under -short)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &laneServer{t: t, opts: server.Options{ServerName: "lane", Host: "127.0.0.1", Port: port, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true, JetStreamLimits: limits}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *laneServer) start() {
	opts := r.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		r.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		r.t.Fatal("server not ready")
	}
	r.s = s
}

func (r *laneServer) stop() {
	if r.s != nil {
		r.s.Shutdown()
		r.s.WaitForShutdown()
		r.s = nil
	}
}

// laneRig drives a lane by hand against a real stream: what a worker does,
// without a machine.
type laneRig struct {
	t   *testing.T
	l   *lane
	in  chan *nats.Msg
	got []laneResult
}

func newLaneRig(t *testing.T, nc *nats.Conn) *laneRig {
	r := &laneRig{t: t, l: newLane(nc, nats.NewInbox(), 500*time.Millisecond), in: make(chan *nats.Msg, 256)}
	sub, err := nc.ChanSubscribe(r.l.prefix+".>", r.in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

func (r *laneRig) take() {
	for {
		a, ok := r.l.pop()
		if !ok {
			r.l.settled()
			return
		}
		r.got = append(r.got, a)
	}
}

func (r *laneRig) send(ord uint64, m *nats.Msg) {
	r.l.publish("k", ord, m, time.Now())
	r.take()
}

// until runs the lane (answers, ticks) until n answers came or d passed.
func (r *laneRig) until(n int, d time.Duration) {
	r.t.Helper()
	deadline := time.After(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(r.got) < n {
		select {
		case a := <-r.in:
			r.l.onAnswer(a.Subject, a.Header, a.Data, time.Now())
		case <-tick.C:
			r.l.tick(time.Now())
		case <-deadline:
			r.t.Fatalf("%d answers after %v, want %d: %+v", len(r.got), d, n, r.got)
		}
		r.take()
	}
}

func outMsg(subject, id string, size int) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Data = []byte(strings.Repeat("x", size))
	return m
}

// TestLaneAnswers runs a lane against a real nats-server and reads each of
// the stream's answers: acknowledgements in order; a message the stream
// refuses (larger than max_msg_size) ends the batch — the message is
// answered refused, the later ones failed, and nothing after it is
// persisted; a batch the server dropped for inactivity answers
// "unknown"; a stream without allow_batched answers refused.
func TestLaneAnswers(t *testing.T) {
	srv := newLaneServer(t, server.JSLimitOpts{MaxBatchTimeout: 200 * time.Millisecond})
	nc, err := nats.Connect(srv.s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LANE", Subjects: []string{"lane.>"}, AllowBatchPublish: true,
		Duplicates: time.Minute, MaxMsgSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r := newLaneRig(t, nc)
	for i := range 4 {
		r.send(uint64(i), outMsg("lane.k", fmt.Sprint("m", i), 10))
	}
	r.until(4, 5*time.Second)
	for i, a := range r.got {
		if a.err != nil || a.ord != uint64(i) {
			t.Fatalf("answer %d: %+v, want ord %d persisted", i, a, i)
		}
	}
	// m4 too large: the batch ends there; m5 is not persisted.
	r.got = nil
	r.send(4, outMsg("lane.k", "m4", 2000))
	r.send(5, outMsg("lane.k", "m5", 10))
	r.until(2, 5*time.Second)
	if a := r.got[0]; a.err == nil || !a.refused || !strings.Contains(a.err.Error(), "refused") {
		t.Errorf("too large: %+v, want refused by the stream", a)
	}
	if a := r.got[1]; a.err == nil || a.refused {
		t.Errorf("after the refused one: %+v, want failed", a)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != 4 {
		t.Errorf("stream holds %d messages, want 4", info.State.Msgs)
	}
	// A duplicate is skipped and acknowledged; then the batch sits idle
	// past the server's batch timeout (the lane's own idle close is off):
	// the next message is refused as unknown and not persisted.
	r.got = nil
	r.l.idle = time.Hour
	r.send(5, outMsg("lane.k", "m3", 10)) // a duplicate of m3
	r.until(1, 5*time.Second)
	time.Sleep(500 * time.Millisecond)
	r.send(6, outMsg("lane.k", "m6", 10))
	r.until(2, 5*time.Second)
	if r.got[0].err != nil || !errors.Is(r.got[1].err, errLaneUnknown) {
		t.Errorf("duplicate, then after the server's batch timeout: %+v, want persisted, then unknown", r.got)
	}
	info, _ = st.Info(ctx)
	if info.State.Msgs != 4 {
		t.Errorf("stream holds %d messages, want 4 (the duplicate skipped, the late one refused)", info.State.Msgs)
	}
	// A new batch carries it.
	r.got = nil
	r.send(6, outMsg("lane.k", "m6", 10))
	r.until(1, 5*time.Second)
	if r.got[0].err != nil {
		t.Errorf("in a new batch: %+v", r.got[0])
	}
	if r.l.batches != 3 || r.l.ends != 1 {
		t.Errorf("%d batches opened, %d ended by trouble; want 3 and 1", r.l.batches, r.l.ends)
	}

	// A stream without allow_batched.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NOLANE", Subjects: []string{"nolane.>"}}); err != nil {
		t.Fatal(err)
	}
	r2 := newLaneRig(t, nc)
	r2.send(0, outMsg("nolane.k", "n0", 10))
	r2.until(1, 5*time.Second)
	if a := r2.got[0]; a.err == nil || !a.refused || !strings.Contains(a.err.Error(), "allow_batched") {
		t.Errorf("stream without batches: %+v (%v), want refused naming allow_batched", a, a.err)
	}
	r2.send(1, outMsg("nolane.k", "n1", 10))
	if a := r2.got[1]; !a.refused {
		t.Errorf("the next send: %+v, want refused at once", a)
	}
}
