package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/jsack"
	"github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/processor"
)

// rawRelay is the raw baseline: no processor, only what any pass-through
// on NATS has to do, written the fast way with nats.go. A durable pull
// consumer with explicit acks (the processor's shape: the same
// max_ack_pending and pull batch, by default the processor's defaults;
// one consumer whatever the number of keys) delivers each input; the
// callback decodes it, builds the output a pass-through learner would
// (the first k values, same fields, so the same size on the wire) and
// publishes it asynchronously with JetStream (PublishMsgAsync, a
// Nats-Msg-Id "raw/<key>/<seq>", at most window PubAcks pending); one
// goroutine takes the PubAck futures in publish order and acks each input
// once its output is stored. It is the most this machine's NATS carries
// for a consume → publish → ack pass-through; the processor's figures are
// read as ratios to it.
//
// With core outputs (no stream captures them: --output core) it
// publishes with core NATS and acks the input at once, as the processor
// does then.
//
// An error (a failed publish, a PubAck that reports one) stops nothing:
// it is kept, its input is not acked, and Err reports the first.
type rawRelay struct {
	out     publish.Out // the outputs: JetStream asynchronously, or core NATS (--output core), as the processor's
	cc      jetstream.ConsumeContext
	subject string // output subject prefix: outputs go to <subject>.<key>
	k       int
	q       chan rawPending
	done    chan struct{}
	err     atomic.Pointer[error]
	obs     []codec.Observation // the callback's decode buffer (callbacks are serial)
	stopped sync.Once
}

// rawPending is an output in flight and the input to ack when it lands.
type rawPending struct {
	f  jetstream.PubAckFuture
	in jetstream.Msg
}

// rawConfig is the raw baseline's shape.
type rawConfig struct {
	stream  string // input stream
	subject string // outputs go to <subject>.<key>
	k       int    // values per output
	window  int    // most publishes awaiting their PubAck
	maxAck  int    // the consumer's max_ack_pending
	pull    int    // messages per pull request
	coreOut bool   // core NATS outputs, acked at once
}

// pullBatch is the processor's pull batch for a max_ack_pending and a
// queue_size: min(maxAck, 2·queueSize), at least 1.
func pullBatch(maxAck, queueSize int) int { return max(1, min(maxAck, 2*queueSize)) }

// rawConsumer is the durable name of the raw baseline's consumer.
const rawConsumer = "bench-raw"

// startRaw creates the raw baseline's consumer on cfg.stream (every
// subject of the stream) on nc and starts relaying.
func startRaw(ctx context.Context, nc *nats.Conn, cfg rawConfig) (*rawRelay, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cfg.window))
	if err != nil {
		return nil, err
	}
	r := &rawRelay{out: publish.Out{Core: nc, Async: js, JetStream: !cfg.coreOut}, subject: cfg.subject, k: cfg.k, q: make(chan rawPending, cfg.window+1), done: make(chan struct{})}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(cctx, cfg.stream, jetstream.ConsumerConfig{
		Durable:       rawConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxAckPending: cfg.maxAck,
	})
	if err != nil {
		return nil, fmt.Errorf("raw baseline: consumer: %w", err)
	}
	go r.ackLoop()
	r.cc, err = cons.Consume(r.relay,
		jetstream.PullMaxMessages(cfg.pull),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { r.fail(fmt.Errorf("consume: %w", err)) }))
	if err != nil {
		close(r.q)
		<-r.done
		return nil, fmt.Errorf("raw baseline: consume: %w", err)
	}
	return r, nil
}

// relay is the consume callback: decode, build, publish asynchronously,
// hand the future to ackLoop. A full window makes PublishMsgAsync wait,
// which holds back the next delivery, as the processor's bounded queue
// does.
func (r *rawRelay) relay(m jetstream.Msg) {
	d, ok := jsack.Parse(m.Reply())
	if !ok {
		r.fail(errors.New("delivery without a JetStream reply subject"))
		_ = m.Term()
		return
	}
	key := keyToken(m.Subject())
	var enc codec.Encoding
	var err error
	r.obs, enc, err = codec.DecodeObservations(r.obs, m.Data(), m.Headers().Get(processor.HeaderContentType), codec.Limits{})
	if err != nil {
		r.fail(err)
		_ = m.Term()
		return
	}
	seq := strconv.FormatUint(d.Stream, 10)
	for i := range r.obs {
		o := &r.obs[i]
		if len(o.X) < r.k {
			r.fail(fmt.Errorf("observation of dimension %d < k = %d", len(o.X), r.k))
			_ = m.Term()
			return
		}
		out := codec.Output{ID: o.ID, Key: key, Seq: d.Stream, TS: o.TS, Z: o.X[:r.k]}
		for _, v := range o.X[r.k:] {
			out.SPE += v * v
		}
		data, err := codec.EncodeOutput(nil, enc, &out)
		if err != nil {
			r.fail(err)
			_ = m.Term()
			return
		}
		id := "raw/" + key + "/" + seq
		if len(r.obs) > 1 {
			id += "/" + strconv.Itoa(i)
		}
		pm := &nats.Msg{Subject: r.subject + "." + key, Data: data,
			Header: nats.Header{jetstream.MsgIDHeader: {id}, processor.HeaderContentType: {enc.ContentType()}}}
		f, err := r.out.Send(pm, jetstream.WithStallWait(time.Minute))
		if err != nil {
			r.fail(fmt.Errorf("publish: %w", err))
			return // not acked: redelivered after ack_wait
		}
		if f == nil { // core NATS: ack at once
			if i == len(r.obs)-1 {
				if err := m.Ack(); err != nil {
					r.fail(fmt.Errorf("ack: %w", err))
				}
			}
			continue
		}
		var in jetstream.Msg
		if i == len(r.obs)-1 {
			in = m // ack after the last output of the message
		}
		r.q <- rawPending{f: f, in: in}
	}
}

// ackLoop acks each input once its outputs' PubAcks arrived, in publish
// order. It exits when q is closed and drained.
func (r *rawRelay) ackLoop() {
	defer close(r.done)
	for p := range r.q {
		select {
		case <-p.f.Ok():
			if p.in != nil {
				if err := p.in.Ack(); err != nil {
					r.fail(fmt.Errorf("ack: %w", err))
				}
			}
		case err := <-p.f.Err():
			r.fail(fmt.Errorf("publish: %w", err))
		}
	}
}

// keyToken returns the key of a stored input subject bench.<tag>.in.<key>
// (with a partition token after it when the phase has partitions).
func keyToken(subj string) string {
	for range 3 {
		subj = subj[strings.IndexByte(subj, '.')+1:]
	}
	if i := strings.IndexByte(subj, '.'); i >= 0 {
		return subj[:i]
	}
	return subj
}

func (r *rawRelay) fail(err error) { r.err.CompareAndSwap(nil, &err) }

// Err returns the first error of the relay, nil if none.
func (r *rawRelay) Err() error {
	if e := r.err.Load(); e != nil {
		return *e
	}
	return nil
}

// stop stops consuming, waits (at most timeout) for the outputs in flight
// to be acknowledged and their inputs acked, and returns Err.
func (r *rawRelay) stop(timeout time.Duration) error {
	var err error
	r.stopped.Do(func() {
		r.cc.Stop()
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-r.cc.Closed():
		case <-t.C:
			err = fmt.Errorf("raw baseline: consumer did not stop within %v", timeout)
			return
		}
		close(r.q)
		select {
		case <-r.done:
		case <-t.C:
			err = fmt.Errorf("raw baseline: outputs still in flight after %v", timeout)
		}
	})
	return errors.Join(err, r.Err())
}
