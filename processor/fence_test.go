package processor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/codec"
)

// countPub counts the output publishes it passes on until the channel
// set in until is closed: the partition's end, after which publishes are
// its next epoch's (the member takes it again at once).
type countPub struct {
	inner asyncPublisher
	n     atomic.Int64
	until atomic.Pointer[chan struct{}]
}

func (c *countPub) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if !closed(c.until.Load()) {
		c.n.Add(1)
	}
	return c.inner.PublishMsgAsync(m, opts...)
}

// closed reports whether *ch is set and closed.
func closed(ch *chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-*ch:
		return true
	default:
		return false
	}
}

// TestLastMomentFence pins the worker's one reading of the fence, on its
// publish path (worker.lastMoment): a lease that expired, with nothing
// revoked yet — the workers' machines not told — lets no output and no
// dead letter out; the reading revokes the fence and the partition stops
// without further writes. The renewals (the only other reader while the
// partition runs) are 20 s apart here, so within the test nothing else
// reads the fence.
func TestLastMomentFence(t *testing.T) {
	for _, tc := range []struct {
		name string
		data func(t *testing.T) []byte // the message sent after the expiry
	}{
		{"output", func(t *testing.T) []byte { return encodeObs(t, "json", vectors(9, 1)[0], "after") }},
		{"dead letter", func(*testing.T) []byte { return []byte("{not json") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			name := fmt.Sprintf("lm%d", len(tc.name))
			pc := pipelineConfig(name)
			pc.Output.KeyInFlight = 1 // outputs go through the async publisher counted here, not a lane
			var pub *countPub
			e.wrapPub = func(p asyncPublisher) asyncPublisher { pub = &countPub{inner: p}; return pub }
			core, logs := observer.New(zap.WarnLevel)
			e.observe = core
			r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1, LeaseTTL: time.Minute, CheckpointEvery: 20 * time.Second})
			e.wrapPub, e.observe = nil, nil
			subj := "in." + name + ".k"
			for i, x := range vectors(3, pcaWarm+2) {
				e.publish(t, subj, encodeObs(t, "json", x, fmt.Sprint(i)), "")
			}
			waitFor(t, 10*time.Second, "warm-up outputs acknowledged", func() bool { return e.drained(t, pc) })
			sent := pub.n.Load()
			if sent < 2 {
				t.Fatalf("%d outputs before the expiry, want ≥ 2", sent)
			}
			pt := r.p.pipes[0].parts[0].Load()
			if pt == nil {
				t.Fatal("partition 0 not running")
			}
			pub.until.Store(&pt.done)
			// The lease expires: as fence.OK would find it after a pause,
			// but nothing has read it yet — Lost is still open.
			pt.fence.mu.Lock()
			pt.fence.lease.Revoked = true
			pt.fence.mu.Unlock()
			select {
			case <-pt.fence.Lost():
				t.Fatal("Lost closed before anyone read the fence")
			default:
			}
			e.publish(t, subj, tc.data(t), "")
			waitFor(t, 10*time.Second, "the partition stopped by the worker's reading", func() bool { return closed(&pt.done) })
			// Only this epoch's writes count: the member takes the
			// partition again at once, and its next epoch replays.
			if got := pub.n.Load(); got != sent {
				t.Errorf("%d outputs published after the lease expired (%d before, %d after), want none", got-sent, sent, got)
			}
			if n := deadLettered(logs, pt.epoch); n != 0 {
				t.Errorf("%d dead letters sent by epoch %d after the lease expired, want none", n, pt.epoch)
			}
			if got := metricValue(t, r.p.met.fenced.WithLabelValues(name)); got != 1 {
				t.Errorf("fenced stops %v, want 1", got)
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// deadLettered counts the dead letters the log says epoch sent.
func deadLettered(logs *observer.ObservedLogs, epoch uint64) int {
	n := 0
	for _, e := range logs.FilterMessage("dead-lettered").All() {
		if v, ok := e.ContextMap()["epoch"].(uint64); ok && v == epoch {
			n++
		}
	}
	return n
}

// countStore counts the snapshot saves (claims included) of one epoch it
// passes on (every epoch's until one is set).
type countStore struct {
	keyStore
	saves atomic.Int64
	epoch atomic.Uint64
}

func (c *countStore) Save(ctx context.Context, key string, s *codec.Snapshot, rev uint64) (uint64, error) {
	if e := c.epoch.Load(); e == 0 || s.Epoch == e {
		c.saves.Add(1)
	}
	return c.keyStore.Save(ctx, key, s, rev)
}

// TestFencedStopSavesNothing: a partition whose fence is revoked while
// its keys are dirty stops without a final snapshot, though
// snapshot.on_shutdown is on: the workers step FenceLost before the
// closing of their input (worker.step), so the machine never hands a
// final save over. Its next owner replays from the checkpoint.
func TestFencedStopSavesNothing(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("fstop")
	pc.Output.KeyInFlight = 1
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1} // dirty until the end (on_shutdown: default on)
	var st *countStore
	e.wrapKeys = func(k keyStore) keyStore { st = &countStore{keyStore: k}; return st }
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 2})
	e.wrapKeys = nil
	for i, x := range vectors(5, 3*(pcaWarm+2)) {
		e.publish(t, fmt.Sprintf("in.fstop.k%d", i%3), encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	waitFor(t, 10*time.Second, "outputs acknowledged", func() bool { return e.drained(t, pc) })
	pt := r.p.pipes[0].parts[0].Load()
	if pt == nil {
		t.Fatal("partition 0 not running")
	}
	st.epoch.Store(pt.epoch) // the member's next epoch claims the keys again
	claims := st.saves.Load()
	if claims != 3 {
		t.Fatalf("%d saves before the revocation, want the 3 claims (snapshots are off until shutdown)", claims)
	}
	pt.fence.Revoke()
	waitFor(t, 5*time.Second, "the fenced partition stopped", func() bool {
		select {
		case <-pt.done:
			return true
		default:
			return false
		}
	})
	if got := st.saves.Load(); got != claims {
		t.Errorf("%d snapshot saves after the revocation, want none", got-claims)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
