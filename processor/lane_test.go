package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/snapshot"
)

// newLaneServer is a restartable embedded nats-server with the given
// JetStream limits.
func newLaneServer(t *testing.T, limits server.JSLimitOpts) *natstest.Restartable {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test against an embedded nats-server (skipped under -short)")
	}
	return natstest.RunRestartable(t, limits)
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
	nc, err := nats.Connect(srv.URL())
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
	// Once the stream allows batches, the lane finds out after laneRecheck.
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "NOLANE", Subjects: []string{"nolane.>"}, AllowBatchPublish: true}); err != nil {
		t.Fatal(err)
	}
	r2.l.tick(time.Now().Add(laneRecheck))
	r2.send(2, outMsg("nolane.k", "n2", 10))
	r2.until(3, 5*time.Second)
	if a := r2.got[2]; a.err != nil {
		t.Errorf("after allow_batched was set: %+v (%v), want persisted", a, a.err)
	}
}

// TestLaneServerRestart restarts the nats-server under a pipeline whose
// outputs go through lanes (output.key_in_flight 8) while inputs keep
// coming (each retried with its message id through the outage), three
// times: the connection drops and reconnects, the batches in flight are
// lost with the server's memory, answers and publishes are lost with the
// connection. See laneDisrupted for what is checked.
func TestLaneServerRestart(t *testing.T) {
	srv := newLaneServer(t, server.JSLimitOpts{})
	laneDisrupted(t, srv.URL(), func() {
		srv.Stop()
		time.Sleep(300 * time.Millisecond)
		srv.Start()
	})
}

// TestLaneConnectionLoss cuts the client's connection (a TCP proxy drops
// it and whatever bytes it held) three times while the server keeps its
// batches: the reconnect buffer then delivers later messages of a batch
// after earlier ones were lost, which the stream must see as a gap. See
// laneDisrupted for what is checked.
func TestLaneConnectionLoss(t *testing.T) {
	srv := newLaneServer(t, server.JSLimitOpts{})
	px := newCutProxy(t, srv.Addr())
	laneDisrupted(t, "nats://"+px.addr, func() {
		px.cut()
		time.Sleep(100 * time.Millisecond)
	})
}

// laneDisrupted runs inputs through a pipeline with lanes
// (output.key_in_flight 8), disrupted by disrupt at each quarter of the
// inputs, then the same inputs — in the order its input stream stored
// them — through one with one output in flight per key, undisturbed: each
// key's outputs must land once and in input order, each key's state must
// equal that of the undisturbed run, and the disruptions must have failed
// some outputs in flight. (The inputs are published on the disrupted
// connection: one lost in a cut, sent again, is stored after later ones
// that went out from the client's reconnect buffer — so the reference is
// fed the order stored, not the order published.)
func laneDisrupted(t *testing.T, url string, disrupt func()) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	store, err := snapshot.Open(ctx, js, snapshot.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{url: url, nc: nc, js: js, store: store}
	keys := []string{"a", "b", "c", "d"}
	const n = 600
	lanes := 0
	var mu sync.Mutex
	var failed, sends int
	answers := map[string]int{}
	laneSent := make(chan struct{}, 1) // a lane sent an output
	// hits counts what shows a disruption hit a lane (checked at the end).
	hits := func() int {
		mu.Lock()
		defer mu.Unlock()
		return failed + answers[`"type":"gap"`] + answers[`"err_code":10208`]
	}
	run := func(name string, keyInFlight int, disturb bool, order []int) PipelineConfig {
		pc := pipelineConfig(name)
		pc.Output.Window = 64
		pc.Output.KeyInFlight = keyInFlight
		pc.Snapshot = SnapshotPolicy{EveryMessages: 20, Every: -1}
		// Deliveries lost with a connection come back after ack_wait.
		pc.Input.AckWait = time.Second
		r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 2, SnapshotTimeout: 2500 * time.Millisecond, LeaseTTL: 2 * time.Second})
		lanes += b2i(r.p.pipes[0].io[0].lane)
		rng := rand.New(rand.NewPCG(11, 12))
		xs := vectors(13, n)
		subj := make([]string, n)
		for i := range n {
			subj[i] = "in." + name + "." + keys[rng.IntN(len(keys))]
		}
		// Each quarter is published asynchronously; the quarters after the
		// first are disrupted while the pipeline works through them, at
		// the first output a lane sends once the quarter is under way
		// (published one by one with pauses, a quiet machine kept up and
		// the disruptions hit no lane: CI, once).
		for q := range 4 {
			var struck chan struct{}
			if disturb && q > 0 {
				struck = make(chan struct{})
				drain(laneSent)
				go func() {
					defer close(struck)
					// A disruption between a lane's send and its answer hits
					// the lane; one after the answer came back hits nothing
					// (1 run in 4 under load missed in all three quarters).
					// While no disruption of the run has hit, disrupt again
					// at a later send, at most three times a quarter.
					for try := range 3 {
						before := hits()
						select {
						case <-laneSent:
						case <-time.After(10 * time.Second):
						}
						disrupt()
						for end := time.Now().Add(3 * time.Second); hits() == before && time.Now().Before(end); {
							time.Sleep(20 * time.Millisecond)
						}
						t.Logf("quarter %d: disruption %d: %d hits before, %d after", q, try+1, before, hits())
						if hits() > 0 {
							return
						}
						drain(laneSent)
					}
				}()
			}
			e.publishAll(t, js, name, subj, xs, order[q*n/4:(q+1)*n/4])
			if struck != nil {
				<-struck
			}
		}
		waitFor(t, 60*time.Second, name+" drained", func() bool { return e.drained(t, pc) })
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		return pc
	}
	laneTrace = func(_ *lane, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasPrefix(format, "send"):
			sends++
			select {
			case laneSent <- struct{}{}:
			default:
			}
		case strings.HasPrefix(format, "answer %s") && args[len(args)-1] != nil:
			failed++
		case strings.HasPrefix(format, "answer from the stream"):
			if d, ok := args[3].([]byte); ok {
				for _, k := range []string{`"type":"gap"`, `"err_code":10208`, `"count":`} {
					if strings.Contains(string(d), k) {
						answers[k]++
					}
				}
			}
		}
	}
	published := make([]int, n)
	for i := range published {
		published[i] = i
	}
	pc := run("rlane", 8, true, published)
	laneTrace = nil
	ref := run("rref", 1, false, e.storedOrder(t, pc.Input.Stream, pc.Name, n))
	t.Logf("lanes: %d sends, %d answered failed; the stream answered %d gaps, %d unknown batches, %d ends with a count",
		sends, failed, answers[`"type":"gap"`], answers[`"err_code":10208`], answers[`"count":`])
	if lanes != 1 {
		t.Fatalf("%d of the two runs used lanes, want 1", lanes)
	}
	// The restarts must have hit a lane: an output answered failed, or the
	// stream ending a batch it lost (an unknown batch) or saw a gap in.
	// (A run whose lost batches were all learned from the stream and sent
	// again answers no output failed: 6 unknown batches, 0 failed, once in
	// CI.)
	if failed+answers[`"type":"gap"`]+answers[`"err_code":10208`] == 0 {
		t.Error("the disruptions hit no lane: no output answered failed, no batch lost or gapped")
	}
	want := e.sameAsReference(t, ref, pc, keys, "the undisturbed run")
	for _, k := range keys {
		if len(want[k]) < n/len(keys)/2 {
			t.Errorf("key %s: %d outputs in the reference run", k, len(want[k]))
		}
	}
}

// publishAll publishes the inputs idx of a run asynchronously, in that
// order, each deduplicated by its index (message id name<index>), and
// returns when the stream has acknowledged every one (a failed one is
// published again, as a connection cut or a server restart may fail them).
func (e *env) publishAll(t *testing.T, js jetstream.JetStream, name string, subj []string, xs [][]float64, idx []int) {
	t.Helper()
	pending := append([]int(nil), idx...)
	deadline := time.Now().Add(60 * time.Second)
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d inputs of %s: %d not acknowledged within 60 s", len(idx), name, len(pending))
		}
		futs := make([]jetstream.PubAckFuture, len(pending))
		for j, i := range pending {
			f, err := js.PublishAsync(subj[i], encodeObs(t, "json", xs[i], fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint(name, i)))
			if err != nil {
				f = nil
			}
			futs[j] = f
		}
		var again []int
		for j, i := range pending {
			if futs[j] == nil {
				again = append(again, i)
				continue
			}
			select {
			case <-futs[j].Ok():
			case <-futs[j].Err():
				again = append(again, i)
			case <-time.After(2 * time.Second):
				again = append(again, i)
			}
		}
		if len(again) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		pending = again
	}
}

// storedOrder returns the input indexes of run name in the order its
// input stream stored them (from their message ids, name<index>); the
// stream must hold each of the n once.
func (e *env) storedOrder(t *testing.T, stream, name string, n int) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	seen := map[int]bool{}
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("input %d of %s: %v", seq, stream, err)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(m.Header.Get(jetstream.MsgIDHeader), name))
		if err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("input %d of %s: message id %q, want %s<index> once per index < %d", seq, stream, m.Header.Get(jetstream.MsgIDHeader), name, n)
		}
		seen[i] = true
		order = append(order, i)
	}
	if len(order) != n {
		t.Fatalf("%s holds %d inputs, want %d", stream, len(order), n)
	}
	return order
}

// drain empties ch.
func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// cutProxy relays TCP connections to a server; cut drops every relayed
// connection at once, with whatever bytes they held.
type cutProxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
	held  atomic.Bool // connections are refused (closed at once) while held
	deaf  atomic.Bool // what the server sends is dropped while deaf (lost with the connection: cut it next)
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &cutProxy{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close(); px.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if px.held.Load() {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			px.mu.Lock()
			px.conns = append(px.conns, c, s)
			px.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && !px.deaf.Load() {
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return px
}

func (px *cutProxy) cut() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for _, c := range px.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // reset: drop what is unsent
		}
		c.Close()
	}
	px.conns = nil
}

// TestLaneFallback: with output.key_in_flight > 1 and an output stream
// that does not allow batch publishing (created before, without
// allow_batched), the pipeline runs with one output in flight per key and
// says why; one the processor creates allows batches and gets lanes.
func TestLaneFallback(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "lfall_OUT", Subjects: []string{"kpca.out.lfall.*"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	fall := pipelineConfig("lfall")
	fall.Output.CreateStream = false
	fall.Output.KeyInFlight = 4
	made := pipelineConfig("lmade")
	made.Output.KeyInFlight = 4
	r := e.start(t, Config{Pipelines: []PipelineConfig{fall, made}, Workers: 1})
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	pf, pm := r.p.pipes[0], r.p.pipes[1]
	if pf.io[0].lane || !pm.io[0].lane {
		t.Fatalf("lanes: %v for the stream without allow_batched, %v for the created one; want false, true", pf.io[0].lane, pm.io[0].lane)
	}
	why, err := r.p.laneRefusal(ctx, pf.io[0])
	if err != nil || !strings.Contains(why, "allow_batched") {
		t.Errorf("why: %q, %v; want it to name allow_batched", why, err)
	}
	xs := vectors(3, pcaWarm+20)
	for i, x := range xs {
		e.publish(t, "in.lfall.k", encodeObs(t, "json", x, fmt.Sprint(i)), "")
		e.publish(t, "in.lmade.k", encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	for _, pc := range []PipelineConfig{fall, made} {
		waitFor(t, 10*time.Second, pc.Name+" drained", func() bool { return e.drained(t, pc) })
		seqs := e.outputSeqs(t, pc.Output.Stream)
		if len(seqs) < 20 || !slices.IsSorted(seqs) {
			t.Errorf("%s: outputs of inputs %v, want at least 20, in order", pc.Name, seqs)
		}
	}
}

// TestLaneByDefault: with output.key_in_flight left out, a stream the
// processor creates allows batches and the outputs go through lanes with
// DefaultKeyInFlight in flight; an older stream without allow_batched
// falls back to one in flight per key with one info line, no warning.
func TestLaneByDefault(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zap.InfoLevel)
	e.observe = core
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "dold_OUT", Subjects: []string{"kpca.out.dold.*"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	old := pipelineConfig("dold")
	old.Output.CreateStream = false
	made := pipelineConfig("dnew")
	r := e.start(t, Config{Pipelines: []PipelineConfig{old, made}, Workers: 1})
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	po, pm := r.p.pipes[0], r.p.pipes[1]
	if po.io[0].lane || !pm.io[0].lane {
		t.Fatalf("lanes: %v for the older stream, %v for the created one; want false, true", po.io[0].lane, pm.io[0].lane)
	}
	if got := pm.cfg.Output.KeyInFlight; got != DefaultKeyInFlight {
		t.Errorf("key_in_flight %d, want the default %d", got, DefaultKeyInFlight)
	}
	info, err := e.js.Stream(ctx, "dnew_OUT")
	if err != nil || !info.CachedInfo().Config.AllowBatchPublish {
		t.Errorf("created output stream: allow_batched false (%v)", err)
	}
	fell := logs.FilterMessageSnippet("one output in flight per key")
	if n := fell.Len(); n != 1 {
		t.Fatalf("%d fallback lines, want 1: %v", n, fell.All())
	}
	if e := fell.All()[0]; e.Level != zap.InfoLevel || e.ContextMap()["pipeline"] != "dold" {
		t.Errorf("fallback line at %v for %v, want info for dold", e.Level, e.ContextMap()["pipeline"])
	}
	if w := logs.FilterLevelExact(zap.WarnLevel).FilterMessageSnippet("lane"); w.Len() > 0 {
		t.Errorf("warnings about lanes with the default key_in_flight: %v", w.All())
	}
}
