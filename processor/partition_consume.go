package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kpcastream/kpcastream/internal/jsack"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The partition's input: its own consumer of the input stream, what the
// consume callback hands over, and when the partition is taken again to
// have lost deliveries at once.

// consume removes the consumers of earlier epochs of the partition and
// starts consuming from pt.start with a consumer of its own.
func (pt *partition) consume(ctx, gctx context.Context) error {
	pc := pt.pipe.cfg
	p := pt.p
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stream jetstream.Stream
	if err := p.retry(sctx, "look up input stream", func(ctx context.Context) (err error) {
		stream, err = p.js.Stream(ctx, pc.inputStream(pt.num))
		return err
	}); err != nil {
		return fmt.Errorf("processor: pipeline %s: stream: %w", pc.Name, err)
	}
	if err := pt.deletePredecessors(sctx, stream); err != nil {
		return fmt.Errorf("processor: pipeline %s partition %d: delete earlier consumers: %w", pc.Name, pt.num, err)
	}
	if !pt.fence.OK() {
		return errFenced
	}
	cons, err := pt.createConsumer(sctx, stream)
	if err != nil {
		return fmt.Errorf("processor: pipeline %s partition %d: consumer: %w", pc.Name, pt.num, err)
	}
	hb, expiry := pullTiming(p.cfg.LeaseTTL)
	in := &intake{pt: pt, gctx: gctx, ix: machine.NewIntake(), health: &pullHealth{window: p.cfg.LeaseTTL, lost: p.cfg.LeaseTTL / 2, gap: 3 * hb}}
	pt.consumer = cons
	pt.cc, err = cons.Consume(in.deliver, jetstream.PullMaxMessages(max(1, min(pc.Input.MaxAckPending, 2*p.cfg.QueueSize))),
		jetstream.PullHeartbeat(hb), jetstream.PullExpiry(expiry), jetstream.ConsumeErrHandler(in.failed))
	if err != nil {
		return fmt.Errorf("processor: pipeline %s partition %d: consume: %w", pc.Name, pt.num, err)
	}
	return nil
}

// deletePredecessors deletes the partition's consumers of earlier
// epochs, and the single durable consumer of versions before partitions:
// their pulls and acks die with them. Never a newer epoch's: an owner
// that resumes after a pause between its take and this point would
// otherwise delete its successor's consumer; and only while the fence
// holds.
func (pt *partition) deletePredecessors(ctx context.Context, stream jetstream.Stream) error {
	pc := pt.pipe.cfg
	prefix := fmt.Sprintf("%s-p%d-e", pc.Input.Durable, pt.num)
	return pt.p.retry(ctx, "delete old consumers", func(ctx context.Context) error {
		if !pt.fence.OK() {
			return errFenced
		}
		lctx, cancel := context.WithTimeout(ctx, pt.callTimeout())
		defer cancel()
		names := stream.ConsumerNames(lctx)
		var old []string
		for n := range names.Name() {
			e, err := strconv.ParseUint(strings.TrimPrefix(n, prefix), 10, 64)
			if n == pc.Input.Durable || (strings.HasPrefix(n, prefix) && err == nil && e < pt.epoch) {
				old = append(old, n)
			}
		}
		if err := names.Err(); err != nil {
			return err
		}
		for _, n := range old {
			// Each delete has a deadline of its own, and one left
			// unanswered is not sent again (issue 28): the answer comes
			// from the consumer's server, and none comes while that
			// server is lost, though the cluster carries the delete out.
			// A consumer left behind is never the fence (saves, claims
			// and outputs are fenced on their own); it expires after its
			// inactive threshold, or the next take deletes it.
			dctx, dcancel := context.WithTimeout(ctx, pt.callTimeout())
			err := stream.DeleteConsumer(dctx, n)
			dcancel()
			switch {
			case err == nil:
				pt.log.Info("deleted the consumer of an earlier owner", zap.String("consumer", n))
			case errors.Is(err, jetstream.ErrConsumerNotFound):
			case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
				pt.log.Info("delete of an earlier owner's consumer unanswered (its server lost?); not waiting for it", zap.String("consumer", n))
			default:
				return err
			}
		}
		return nil
	})
}

// createConsumer creates (or finds) the partition's consumer of this
// epoch, delivering its subject of the input stream from pt.start.
//
// The consumer has one replica whatever the stream's (issue 28). Its state
// is disposable: the ownership record's checkpoint is where the
// partition's replay starts, and every take makes a new consumer. A
// replicated consumer only added raft elections of 4–9 s (the server's
// election timeout, past lease_ttl + 1 s) wherever a server was lost:
// a fresh consumer whose preferred leader was the lost server (a crash
// is not announced, so about one in three while a server is down) had no
// leader for that long, its partition stopped it as unreachable after
// lease_ttl and took it again with another fresh consumer; and a consumer
// whose leader was lost waited for the same election. An R1 consumer has
// its leader at once, on a server the cluster sees live; one lost with
// its server is unreachable, and its partition is taken again with a new
// consumer after lease_ttl.
//
// A create is sent again for lease_ttl at most, then the epoch is given up
// (consume fails, the record is released and taken again). One left
// unanswered is first deleted if the cluster placed it (unplace): a
// consumer placed on a server lost in the seconds before, while the
// cluster still counted it live, is answered only when that server is
// back, and the server keeps a name's placement until it is deleted.
func (pt *partition) createConsumer(ctx context.Context, stream jetstream.Stream) (jetstream.Consumer, error) {
	pc := pt.pipe.cfg
	var cons jetstream.Consumer
	ctx, cancelAll := context.WithTimeout(ctx, max(pt.p.cfg.LeaseTTL, 2*pt.callTimeout()))
	defer cancelAll()
	name := consumerName(pc, pt.num, pt.epoch)
	attempt := pt.callTimeout()
	err := pt.p.retry(ctx, "create consumer", func(ctx context.Context) (err error) {
		actx, cancel := context.WithTimeout(ctx, attempt)
		defer cancel()
		cons, err = stream.CreateOrUpdateConsumer(actx, jetstream.ConsumerConfig{
			Durable:           name,
			FilterSubject:     pt.filter,
			AckPolicy:         jetstream.AckExplicitPolicy,
			AckWait:           pc.Input.AckWait,
			MaxAckPending:     pc.Input.MaxAckPending,
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       pt.start,
			InactiveThreshold: max(time.Hour, 10*pt.p.cfg.LeaseTTL),
			Replicas:          1,
		})
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && pt.unplace(ctx, stream, name) {
			// Placed anew, maybe on the lost server again: for about
			// 3 s after a crash the cluster counts the server live and
			// caught up (placement prefers caught-up servers, so it was
			// chosen again and again, TestClusterNodeLoss), so the
			// creates sent again wait half as long — the first one
			// placed after that comes sooner.
			attempt = max(pt.callTimeout()/2, 500*time.Millisecond)
		}
		return err
	})
	return cons, err
}

// unplace removes the placement of consumer name, whose create went
// unanswered, so that the create sent again is placed anew. The answer to
// a create comes from the server the cluster placed the consumer on; one
// placed on a server lost in the seconds before (a crash is not
// announced: the cluster counts it live and caught up for about 3 s,
// places fresh consumers on it, and even prefers it) is answered only
// once that server is back and has recovered — and a create sent again
// under the same name keeps that placement (issue 28: partitions resumed
// only with the restarted server, 1.7–1.9 s after its restart). The meta leader carries out a
// delete without the consumer's server (whose answer to it is lost too),
// so the delete is not waited for: the names it lists say when it is done.
// Nothing is deleted unless the name is listed (an unanswered create may
// not have reached the meta leader at all); bounded by callTimeout. It
// reports whether it deleted the placement.
func (pt *partition) unplace(ctx context.Context, stream jetstream.Stream, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, pt.callTimeout())
	defer cancel()
	if !consumerListed(ctx, stream, name) {
		return false
	}
	pt.log.Info("consumer create unanswered (placed on a lost server?): deleting it to create it again elsewhere", zap.String("consumer", name))
	dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := stream.DeleteConsumer(dctx, name)
	dcancel()
	if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return true
	}
	for ctx.Err() == nil && consumerListed(ctx, stream, name) {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// consumerListed reports whether the stream's consumer names (answered by
// the meta leader) hold name; false when they cannot be had.
func consumerListed(ctx context.Context, stream jetstream.Stream, name string) bool {
	names := stream.ConsumerNames(ctx)
	found := false
	for n := range names.Name() {
		found = found || n == name
	}
	return found && names.Err() == nil
}

// intake is one consume's callbacks: what each delivery hands over, and
// what an error of the consume does. deliver runs serially (nats.go's
// consume callback).
type intake struct {
	pt     *partition
	gctx   context.Context // the workers' context
	ix     *machine.Intake
	gapped bool // deliveries were lost: nothing more is handed over
	health *pullHealth
}

// deliver hands a delivery over to its key's worker, unless deliveries
// were lost before it (machine.Intake).
func (in *intake) deliver(m jetstream.Msg) {
	pt, pl := in.pt, in.pt.pipe
	in.health.delivered()
	d, ok := jsack.Parse(m.Reply())
	if !ok {
		md, err := m.Metadata()
		if err != nil {
			pt.log.Warn("message without metadata", zap.Error(err))
			_ = m.Term()
			return
		}
		d = jsack.Delivery{Stream: md.Sequence.Stream, Consumer: md.Sequence.Consumer, Pending: md.NumPending, Time: md.Timestamp.UnixNano()}
	}
	pt.pending.Store(d.Pending)
	pl.met.pending.Set(float64(pl.pendingSum()))
	if gap, _ := in.ix.Delivery(d.Consumer); gap || in.gapped {
		// Deliveries were lost in transit (machine.Intake): hand nothing
		// more over — this message stays unacknowledged — and take the
		// partition again under a new epoch, whose consumer delivers
		// from the checkpoint, in order, at once (the server would
		// redeliver the lost ones only after ack_wait, possibly after
		// later messages of their keys).
		if !in.gapped {
			in.gapped = true
			pt.log.Warn("deliveries lost in transit; taking the partition again under a new epoch to have them now, in order",
				zap.Uint64("consumer_seq", d.Consumer), zap.Uint64("stream_seq", d.Stream))
			pt.requestStop()
		}
		return
	}
	pt.track.Deliver(d.Stream)
	pt.dispatch(in.gctx, inMsg{subject: m.Subject(), data: m.Data(), header: m.Headers(), seq: d.Stream, js: m, tm: d.Time})
}

// failed handles an error of the consume.
func (in *intake) failed(_ jetstream.ConsumeContext, err error) {
	pt := in.pt
	switch {
	case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrBadRequest):
		// The consume has ended for good (a newer owner deleted the
		// consumer, say): stop this epoch without further writes;
		// the member the partition is assigned to takes it again.
		pt.log.Warn("consume ended; stopping the partition", zap.Error(err))
		pt.fence.Revoke()
	case errors.Is(err, nats.ErrNoResponders) && in.health.hasDelivered():
		// A pull to a consumer that has delivered found no responders:
		// no server in the cluster takes its pulls any more — the one it
		// lives on (an R1 consumer lives on one) is lost. Nothing comes
		// from it until that server is back and has recovered it
		// (1.5 s and more after a restart, under load), and nats.go would
		// pull again only after two more missed heartbeats: make it anew
		// under a new epoch now, placed on a server that answers (issue
		// 28: waiting lease_ttl/2 more after the first such answer held
		// partitions up to 1.9 s after their server's restart).
		pt.log.Warn("the consumer's server is lost (a pull found no responders); stopping the partition to take it again with a new consumer", zap.Error(err))
		pt.fence.Revoke()
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoHeartbeat):
		// nats.go pulls again after 2 missed heartbeats
		// (lease_ttl/2); a consumer silent for lease_ttl/2 more
		// after it delivered, unreachable for lease_ttl before
		// (pullHealth), is made anew under a new epoch.
		if in.health.failed(time.Now()) {
			pt.log.Warn("consumer unreachable; stopping the partition to take it again with a new consumer", zap.Error(err))
			pt.fence.Revoke()
			return
		}
		if in.health.hasDelivered() {
			// The consumer went silent (its server lost, maybe for
			// less than the heartbeats take to tell): acks sent
			// meanwhile are lost as with a connection, if it comes back.
			// (Not before its first delivery: a consumer still starting
			// answers "no responders" too, with nothing acked yet.)
			select {
			case pt.trouble <- struct{}{}:
			default:
			}
		}
		pt.log.Info("consume", zap.Error(err))
	default:
		pt.log.Warn("consume", zap.Error(err))
	}
}

// callTimeout bounds one attempt of a JetStream call that starts a
// partition (look up, delete, create consumers): lease_ttl/4, at least a
// second and at most the 5 s of other calls, so that a request lost with
// a server costs the partition that much before it is sent again, not 5 s.
func (pt *partition) callTimeout() time.Duration {
	return min(max(pt.p.cfg.LeaseTTL/4, time.Second), attemptTimeout)
}

// pullTiming returns the idle heartbeat and the expiry of a partition's
// pull requests, sized to lease_ttl so that a pull lost with a server (a
// "no responders" answer, or heartbeats that stop) is issued again by
// nats.go within lease_ttl/2 (two missed heartbeats) rather than after
// nats.go's 30 s default: heartbeat lease_ttl/4 within nats.go's
// 500 ms–30 s, expiry lease_ttl within [max(1 s, 2·heartbeat), 30 s].
func pullTiming(ttl time.Duration) (heartbeat, expiry time.Duration) {
	heartbeat = min(max(ttl/4, 500*time.Millisecond), 15*time.Second)
	expiry = max(min(ttl, 30*time.Second), 2*heartbeat, time.Second)
	return heartbeat, expiry
}

// pullHealth tells a consume that keeps failing (errors no more than gap
// apart, no delivery in between) for window — for lost once it has
// delivered — from one that failed once. Safe for concurrent use.
//
// A consumer that has delivered and then fails was lost with its server
// (an R1 consumer comes back only with it; a new one from the checkpoint
// costs a take). A pull answered "no responders" says so at once
// (intake.failed gives it up without asking pullHealth); heartbeats that
// stop while pulls still find a responder — a server that answers but
// whose consumer is silent — are given lost (lease_ttl/2) more after the
// lease_ttl/2 that two missed heartbeats take to tell. One that never
// delivered may still be starting — a pull answered "no responders"
// before the cluster's routes carry its interest, seen under load — and
// gets window (lease_ttl): a nats.go pull is sent again only after two
// heartbeats, so lease_ttl/2 would give up at the first retry.
type pullHealth struct {
	window, lost, gap time.Duration
	mu                sync.Mutex
	first, last       time.Time // the current streak of failures
	reached           bool      // a delivery came through
}

// delivered ends the streak.
func (h *pullHealth) delivered() {
	h.mu.Lock()
	h.first, h.reached = time.Time{}, true
	h.mu.Unlock()
}

// hasDelivered reports whether a delivery came through.
func (h *pullHealth) hasDelivered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reached
}

// failed records a failure at now and reports whether the streak has
// lasted window (lost once a delivery came through).
func (h *pullHealth) failed(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first.IsZero() || now.Sub(h.last) > h.gap {
		h.first = now
	}
	h.last = now
	limit := h.window
	if h.reached && h.lost > 0 {
		limit = h.lost
	}
	return now.Sub(h.first) >= limit
}

// repullAfterReconnect covers what the intake cannot see: deliveries
// lost at the tail of a lost connection (no later delivery reveals the
// gap) and acks lost with it — or with the consumer's server, which the
// worker's connection may outlive: a consumer gone silent after it
// delivered (missed heartbeats, a pull that found no consumer: a trouble
// signal from intake.failed) counts as a reconnection from then on, so that a consumer whose server came back within the unreachable
// window, acks lost, is found the same way (issue 28: with the
// consumer's leader on a restarted server, drains waited for ack_wait). The server would deliver the one again, and
// count the other settled, only after ack_wait — holding the partition's
// drain that long after a server restart (issue 28). So once the
// connection is back, as soon as the partition is idle (nothing delivered
// for a quarter of a second, its workers' queues empty) while its
// consumer still counts acks pending, the partition stops gracefully and
// its member takes it again at once under a new epoch: the new consumer
// delivers from the checkpoint (replays are skipped by sequence, their
// outputs dropped by Nats-Msg-Id). It waits for idleness so as never to
// cut into work in flight (a lane's batch, say); it gives up once ack_wait
// has passed since the reconnection (the server has redelivered by then).
func (pt *partition) repullAfterReconnect(ctx context.Context) {
	ch := pt.p.conn.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CONNECTED)
	defer pt.p.conn.RemoveStatusListener(ch)
	lost := false
	var back time.Time
	var ticker *time.Ticker
	var tick <-chan time.Time
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	const idle = 250 * time.Millisecond
	last := pt.track.Max()
	watch := func() { // from now on, look for lost acks as soon as idle
		back = time.Now()
		if ticker == nil {
			ticker = time.NewTicker(idle)
		}
		tick, last = ticker.C, pt.track.Max()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-ch:
			if !ok {
				return
			}
			switch st {
			case nats.RECONNECTING, nats.DISCONNECTED:
				lost, tick = true, nil
				// The workers' store calls waiting for an answer give
				// up (it was lost with the connection) and call again.
				pt.link.lost()
			case nats.CONNECTED:
				if lost {
					lost = false
					watch()
				}
			}
		case <-pt.trouble:
			if !lost {
				watch()
			}
		case <-tick:
			if time.Since(back) > pt.pipe.cfg.Input.AckWait {
				tick = nil
				continue
			}
			if m := pt.track.Max(); m != last || !pt.workersIdle() {
				last = m
				continue
			}
			ictx, cancel := context.WithTimeout(ctx, pt.callTimeout())
			ci, err := pt.consumer.Info(ictx)
			cancel()
			if err != nil {
				continue
			}
			if ci.NumAckPending == 0 {
				tick = nil
				continue
			}
			if pt.requestStop() {
				pt.log.Info("connection or consumer back with acks still pending at the consumer: taking the partition again under a new epoch, "+
					"so that what was lost comes back now rather than after ack_wait", zap.Int("ack_pending", ci.NumAckPending))
			}
			return
		}
	}
}

// workersIdle reports whether no worker has input queued.
func (pt *partition) workersIdle() bool {
	for _, w := range pt.workers {
		if len(w.in) > 0 {
			return false
		}
	}
	return true
}
