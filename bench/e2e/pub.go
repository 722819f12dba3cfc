package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// ackPublisher publishes into a JetStream stream the way
// jetstream.PublishMsgAsync does on the wire (a core publish whose reply
// subject receives the stream's PubAck), with at most max messages
// unacknowledged, but without its per-message bookkeeping: every message
// shares one reply subject, acknowledgements are only counted, and a
// PubAck is decoded only when it reports an error. PublishMsgAsync keeps
// each message (to retry it, or hand it to an error callback), so a
// message could not be reused after it; a core publish copies the message
// into the connection's buffer before it returns, so the generator can
// reuse one message, header and payload buffer for the whole stream.
//
// It is the bench's generator, not a general publisher: an error fails the
// whole run, so which message it belonged to does not matter.
type ackPublisher struct {
	nc    *nats.Conn
	sub   *nats.Subscription
	inbox string
	slots chan struct{} // one token per unacknowledged message
	err   atomic.Pointer[error]
}

// newAckPublisher subscribes to a fresh inbox for the acknowledgements.
func newAckPublisher(nc *nats.Conn, maxPending int) (*ackPublisher, error) {
	// "_INBOX.<6>.<6>": as long as PublishMsgAsync's reply subjects
	// (prefix, 6-character publisher token, 6-character message token), so
	// that every PUB and every PubAck is the same size on the wire.
	tok := strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix)
	p := &ackPublisher{nc: nc, inbox: nats.InboxPrefix + tok[:6] + "." + tok[6:12], slots: make(chan struct{}, maxPending)}
	sub, err := nc.Subscribe(p.inbox, p.ack)
	if err != nil {
		return nil, fmt.Errorf("subscribe to publish acks: %w", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	p.sub = sub
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return p, nil
}

// ack handles one PubAck: {"stream":…,"seq":…} or {"error":{…}}, or a
// status message (503: no stream captured the subject).
func (p *ackPublisher) ack(m *nats.Msg) {
	if st := m.Header.Get("Status"); st != "" {
		p.fail(fmt.Errorf("publish: status %s %s", st, m.Header.Get("Description")))
	} else if bytes.Contains(m.Data, []byte(`"error"`)) {
		var r struct {
			Error struct {
				Code        int    `json:"code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		_ = json.Unmarshal(m.Data, &r)
		p.fail(fmt.Errorf("publish: stream error %d: %s", r.Error.Code, r.Error.Description))
	}
	select {
	case <-p.slots:
	default: // an ack we did not wait for (cannot happen with one inbox per publisher)
	}
}

func (p *ackPublisher) fail(err error) {
	p.err.CompareAndSwap(nil, &err)
}

// Err returns the first error an acknowledgement reported.
func (p *ackPublisher) Err() error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

// publish sends m with the ack inbox as its reply, after waiting for a
// free slot; m may be reused once it returns.
func (p *ackPublisher) publish(ctx context.Context, m *nats.Msg) error {
	select {
	case p.slots <- struct{}{}:
	default:
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.Reply = p.inbox
	if err := p.nc.PublishMsg(m); err != nil {
		<-p.slots
		return fmt.Errorf("publish: %w", err)
	}
	return p.Err()
}

// wait returns when every published message is acknowledged (all slots
// are free), ctx ends, or timeout passes.
func (p *ackPublisher) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	n := 0
	defer func() {
		for range n {
			<-p.slots
		}
	}()
	for n < cap(p.slots) {
		select {
		case p.slots <- struct{}{}:
			n++
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("publish: %d acks outstanding after %v", len(p.slots)-n, timeout)
		}
	}
	return p.Err()
}

func (p *ackPublisher) close() {
	if p != nil && p.sub != nil {
		_ = p.sub.Unsubscribe()
	}
}

// pacer spaces the generator's publishes at a fixed rate: message i is due
// at start + i/rate and is never sent before. When the next message is not
// yet due the generator sleeps, at most once per quantum: until the
// message's due time, or quantum after its previous wake-up if that is
// later, and then sends every message due by then back to back. A steady
// producer (quantum 0) wakes up for each message, which costs the whole
// process several µs of CPU per message (a goroutine wake-up and a socket
// write in the client, a read in the server); a burst makes each of its
// messages wait behind the earlier ones in every stage, ≈ the burst's
// length × the per-message service time. A quantum of 0.1 ms keeps that
// below ≈ 0.1 ms at any rate (≈ 4 messages per wake-up at 40k msgs/s) and
// takes most of the wake-up cost away. (The generator used to sleep before
// every 16th message: bursts of 16, 0.4 ms apart at 40k msgs/s, which put
// ≈ 0.5 ms on the median latency of both pipelines.) Go timers fire within
// a few µs while the process is busy (≈ 1.2 messages per wake-up at 40k
// msgs/s with quantum 0) but only ≈ 1 ms late when it is idle (the
// runtime's poller sleeps in whole milliseconds), so below ≈ 10k msgs/s
// the bursts are what arrived in that millisecond. A message sent late
// goes out at once, and how late it was is recorded; its TS is the time it
// is sent, so lateness is not counted as latency.
type pacer struct {
	start    time.Time
	interval float64 // ns between messages
	quantum  time.Duration
	lastWake time.Time
	behind   latencyHist
	wakeups  int
	burst    int // messages since the last wake-up
	maxBurst int
}

func newPacer(rate float64, quantum time.Duration) (*pacer, error) {
	if !(rate > 0) || math.IsInf(rate, 0) || quantum < 0 {
		return nil, fmt.Errorf("pacer: want rate > 0 and quantum ≥ 0, got %v and %v", rate, quantum)
	}
	now := time.Now()
	return &pacer{start: now, lastWake: now, interval: 1e9 / rate, quantum: quantum}, nil
}

// due returns when message i is due.
func (p *pacer) due(i int) time.Time {
	return p.start.Add(time.Duration(float64(i) * p.interval))
}

// wait returns when message i may be sent.
func (p *pacer) wait(i int) {
	due := p.due(i)
	now := time.Now()
	if now.Before(due) {
		until := due
		if next := p.lastWake.Add(p.quantum); next.After(until) {
			until = next
		}
		time.Sleep(until.Sub(now))
		now = time.Now()
		p.lastWake = now
		p.wakeups++
		p.maxBurst = max(p.maxBurst, p.burst)
		p.burst = 0
	}
	p.burst++
	p.behind.add(now.Sub(due))
}

// summary describes the pacing of n messages for the bench's output.
func (p *pacer) summary(n int) string {
	p.maxBurst = max(p.maxBurst, p.burst)
	per := float64(n)
	if p.wakeups > 0 {
		per /= float64(p.wakeups)
	}
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	return fmt.Sprintf("generator: %.1f messages per wake-up (max %d, quantum %v); sent behind schedule by p50 %s ms, p99 %s ms, max %s ms",
		per, p.maxBurst, p.quantum, ms(p.behind.quantile(0.5)), ms(p.behind.quantile(0.99)), ms(p.behind.max))
}
