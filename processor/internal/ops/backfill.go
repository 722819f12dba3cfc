package ops

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// A key's record starts when it is first watched; its recent past is
// read back from the output stream (when one captures the outputs) so
// that the page shows history at once: the projections, SPE, T², labels,
// limits and alarms of the key's last outputs — at most watchSamples of
// the last watchBuckets seconds, the most recent when there are more.
// Outputs do not carry the learner's state (eigenvalues, dictionary,
// timings), which the record has only from the first watch on
// (kpcaview.View.Since).

// backfillWait bounds the reading back: the page's first request waits
// for it.
const backfillWait = 2 * time.Second

// contentType is the header that names an output's encoding.
const contentType = "Content-Type"

// backfill returns the recent outputs of key as observations, oldest
// first; none (and a debug line) when the pipeline's outputs are not in a
// stream or reading them fails.
func (s *Server) backfill(ctx context.Context, pl Pipeline, key string) []kpcaview.Observation {
	if pl.OutputStream == "" || s.cfg.JS == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, backfillWait)
	defer cancel()
	subject := s.v.OutputSubject(pl.Name, key)
	now := time.Now()
	span := time.Duration(watchBuckets) * time.Second
	var out []kpcaview.Observation
	// First the whole window; when it holds more than watchSamples
	// outputs, again from where the last watchSamples start at the rate
	// seen.
	for round := 0; round < 2; round++ {
		obs, pending, err := s.readOutputs(ctx, pl.OutputStream, subject, now.Add(-span), watchSamples)
		if err != nil {
			s.cfg.Log.Debug("reading back a watched key's outputs", zap.String("pipeline", pl.Name), zap.String("key", key), zap.Error(err))
			return out
		}
		out = obs
		if pending == 0 || round == 1 {
			break
		}
		total := float64(len(obs)) + float64(pending)
		span = time.Duration(float64(span) * float64(watchSamples) / total)
	}
	return out
}

// readOutputs reads up to max outputs of subject stored since start, with
// an ephemeral consumer of its own (no acks, in memory, deleted after); it
// returns them and how many more were pending.
func (s *Server) readOutputs(ctx context.Context, stream, subject string, start time.Time, max int) ([]kpcaview.Observation, uint64, error) {
	js := s.cfg.JS
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		FilterSubject: subject, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute, Replicas: 1})
	if err != nil {
		return nil, 0, err
	}
	name := cons.CachedInfo().Name
	defer func() {
		// Not left to its inactivity threshold.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, stream, name)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return nil, 0, nil
	}
	var out []kpcaview.Observation
	var pending uint64
	for len(out) < max {
		batch, err := cons.FetchNoWait(min(256, max-len(out))) // what is stored: never waits for more
		if err != nil {
			return out, 0, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = md.NumPending
			enc := codec.Msgpack
			if strings.HasPrefix(m.Headers().Get(contentType), "application/json") {
				enc = codec.JSON
			}
			o, err := codec.DecodeOutput(m.Data(), enc)
			if err != nil {
				continue
			}
			label, pred := labels(o)
			out = append(out, kpcaview.Observation{X: md.Timestamp.UnixMilli(), Seq: o.Seq, Z: o.Z, SPE: o.SPE, T2: o.T2,
				Label: label, Pred: pred, SPELimit: o.SPELimit, T2Limit: o.T2Limit, Alarm: o.Alarm,
				Explained: o.Explained, Basis: o.BasisVersion, Age: -1, Backfill: true})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return out, 0, err
		}
		if got == 0 || pending == 0 {
			break
		}
	}
	return out, pending, nil
}
