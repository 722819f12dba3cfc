package processor

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
)

// pubWait is a JetStream output publish in flight, for the acker.
type pubWait struct {
	key string
	f   jetstream.PubAckFuture
}

// pubDone is how a publish in flight ended (err nil: acknowledged).
type pubDone struct {
	key string
	err error
}

// asyncPublisher is the processor's asynchronous JetStream publisher of
// outputs (tests wrap it to inject faults).
type asyncPublisher = publish.Async

// publish publishes key's next output through the pipeline's output port:
// with JetStream when a stream captures the output subject — through the
// lane, or asynchronously with the acker waiting for the PubAck — else on
// core NATS (done when written to the connection). It is the last moment
// before the output goes out: the fence is read here (lastMoment).
func (w *worker) publish(key string, ord uint64, m *nats.Msg) {
	if err := w.lastMoment(); err != nil {
		// Nothing more is published: the partition stops and its new
		// owner replays what is not acknowledged.
		w.step(machine.Published{Key: key, Err: err, Refused: true})
		return
	}
	if w.out.JetStream && w.lane != nil {
		// Answered now when the lane refuses it: before anything else
		// reaches the lane (lane.go).
		w.lane.publish(key, ord, m, time.Now())
		w.laneResults()
		return
	}
	f, err := w.out.Send(m)
	switch {
	case err != nil:
		w.step(machine.Published{Key: key, Err: err, Refused: !transientJS(err)})
	case f == nil: // core NATS: done
		w.sent(w.keys[key], 1)
		w.step(machine.Published{Key: key})
	default:
		w.pubq <- pubWait{key: key, f: f} // at most Window in flight: never blocks
	}
}

// lastMoment is the worker's one reading of the fence's clock: the last
// check before a message goes out (an output in publish, a dead letter's
// attempts in reject). It is errFenced once the partition may no longer
// write — its lease expired (the reading revokes it) or was revoked —
// and then tells the machine, which decides everything else about the
// fence (internal/machine: a fenced machine emits no effect). Saves and
// claims need no reading: their compare-and-set on the key's revision,
// which the next owner moves by claiming the key before it applies
// anything, is their fence (see doc.go, Fenced ownership).
func (w *worker) lastMoment() error {
	if w.fence.OK() {
		return nil
	}
	w.fenceLost()
	return errFenced
}

// laneResults steps the machine with the lane's answers, in order, one at
// a time (a step may publish, and the lane answers a refused send after
// the answers before it).
func (w *worker) laneResults() {
	for {
		r, ok := w.lane.pop()
		if !ok {
			return
		}
		if r.err == nil {
			if e, ok := w.keys[r.key]; ok {
				w.sent(e, 1)
			}
		}
		w.step(machine.Published{Key: r.key, Ord: r.ord, Err: r.err, Refused: r.refused})
	}
}

// laneTick lets the lane end a batch that waited too long.
func (w *worker) laneTick() {
	if w.lane != nil {
		w.lane.tick(time.Now())
		w.laneResults()
	}
}

// acked handles the end of a JetStream publish in flight.
func (w *worker) acked(d pubDone) {
	if d.err == nil {
		if e, ok := w.keys[d.key]; ok {
			w.sent(e, 1)
		}
	}
	w.step(machine.Published{Key: d.key, Err: d.err, Refused: d.err != nil && !transientJS(d.err)})
}

// sent counts n published outputs of e.
func (w *worker) sent(e *entry, n int) {
	e.pipe.stats.Out.Add(int64(n))
	e.pipe.met.outputs.Add(float64(n))
}

// acker waits for the acknowledgement of each JetStream publish in flight,
// in publish order, and reports it to the worker, until the worker stops
// (what is still in flight then no longer matters: its inputs are not
// acknowledged, and the partition's next owner replays them). The
// JetStream context times an attempt out (publishAttempt); the timer here
// only guards against a future that is never resolved.
func (w *worker) acker(ctx context.Context) error {
	guard := 2*w.publishAttempt + time.Second
	t := time.NewTimer(guard) // one per acker, reset per publish (Go ≥ 1.23 timers need no draining)
	t.Stop()
	for {
		var pw pubWait
		select {
		case pw = <-w.pubq:
		case <-w.stopped:
			return nil
		}
		d := pubDone{key: pw.key}
		t.Reset(guard)
		select {
		case <-pw.f.Ok():
		case err := <-pw.f.Err():
			d.err = err
		case <-t.C:
			d.err = jetstream.ErrAsyncPublishTimeout
		case <-ctx.Done():
			d.err = ctx.Err()
		case <-w.stopped:
			t.Stop()
			return nil
		}
		t.Stop()
		w.acks <- d
	}
}

// ack acknowledges a handled message.
func (w *worker) ack(m *inMsg, result string) {
	if m.js != nil {
		if err := m.js.Ack(); err != nil {
			w.log.Warn("ack", zap.String("pipeline", m.pipe.cfg.Name), zap.Uint64("seq", m.seq), zap.Error(err))
		}
	}
	if result == resultSkipped {
		m.pipe.stats.Skipped.Add(1)
	}
	m.pipe.met.result(w.met, m.pipe.cfg.Name, result).Inc()
}

// nak refuses m for now: it is redelivered after input.nak_delay.
func (w *worker) nak(m *inMsg, err error) {
	_, reason := classify(err)
	name := m.pipe.cfg.Name
	level := w.log.Warn
	switch reason {
	case "corrupt_snapshot", "no_stream":
		level = w.log.Error
	case "waiting", "fenced":
		// Fenced: the partition logs its fence loss once; each message it
		// naks meanwhile goes to the new owner.
		level = w.log.Debug
	}
	level("message refused, will be redelivered", zap.String("pipeline", name), zap.String("key", m.key),
		zap.Uint64("seq", m.seq), zap.String("reason", reason), zap.Error(err))
	m.pipe.stats.Naks.Add(1)
	w.met.messages.WithLabelValues(name, resultNak).Inc()
	if m.js != nil {
		if nerr := m.js.NakWithDelay(m.pipe.cfg.Input.NakDelay); nerr != nil {
			w.log.Warn("nak", zap.Error(nerr))
		}
	}
}
