package ops

import (
	"context"
	"errors"
	"math"
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

// backfillRead bounds the outputs read back in one round: a window
// holding more is narrowed first (at the rate seen) and read again.
const backfillRead = 4 * watchSamples

// backfillRounds bounds the narrowing: the last round reads its window
// whatever it holds (within backfillWait), keeping the newest.
const backfillRounds = 6

// backfill returns the recent outputs of key as observations, oldest
// first: the newest watchSamples of the last watchBuckets seconds. None
// (and a debug line) when the pipeline's outputs are not in a stream or
// reading them fails.
func (s *Server) backfill(ctx context.Context, pl Pipeline, key string) []kpcaview.Observation {
	if pl.OutputStreamOf != nil {
		pl.OutputStream = pl.OutputStreamOf(key)
	}
	if pl.OutputStream == "" || s.cfg.JS == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, backfillWait)
	defer cancel()
	subject := s.v.OutputSubject(pl.Name, key)
	now := time.Now()
	span := time.Duration(watchBuckets) * time.Second
	// A consumer says how many outputs its window holds before any is
	// read: a window with more than backfillRead is narrowed to about
	// twice watchSamples at the rate seen, and asked again. The outputs
	// read are all of the window's, of which the newest watchSamples are
	// kept: a burst late in the window is shown, not the window's start.
	for round := 1; ; round++ {
		limit := uint64(backfillRead)
		if round == backfillRounds {
			limit = math.MaxUint64
		}
		obs, total, err := s.readOutputs(ctx, pl.OutputStream, subject, now.Add(-span), watchSamples, limit)
		if err != nil {
			s.cfg.Log.Debug("reading back a watched key's outputs", zap.String("pipeline", pl.Name), zap.String("key", key), zap.Error(err))
			return obs
		}
		if total <= limit {
			return obs
		}
		span = time.Duration(float64(span) * 2 * watchSamples / float64(total))
	}
}

// readOutputs reads the outputs of subject stored since start with an
// ephemeral consumer of its own (no acks, in memory, deleted after) and
// returns the newest keep of them and how many the window held. A window
// of more than limit is not read (none returned).
func (s *Server) readOutputs(ctx context.Context, stream, subject string, start time.Time, keep int, limit uint64) ([]kpcaview.Observation, uint64, error) {
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
	total := cons.CachedInfo().NumPending
	if total == 0 || total > limit {
		return nil, total, nil
	}
	var out []kpcaview.Observation
	for {
		batch, err := cons.FetchNoWait(256) // what is stored: never waits for more
		if err != nil {
			return newest(out, keep), total, err
		}
		got := 0
		pending := uint64(0)
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
				Contrib:   kpcaview.ContribOf(nil, o.Contrib, codecContrib),
				Explained: o.Explained, Basis: o.BasisVersion, Age: -1, Backfill: true})
			if len(out) >= 2*keep { // memory bounded by 2·keep
				out = append(out[:0], out[len(out)-keep:]...)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return newest(out, keep), total, err
		}
		if got == 0 || pending == 0 {
			return newest(out, keep), total, nil
		}
	}
}

// newest returns the last keep of obs.
func newest(obs []kpcaview.Observation, keep int) []kpcaview.Observation {
	if len(obs) > keep {
		return obs[len(obs)-keep:]
	}
	return obs
}

// codecContrib reads an output's contribution for the live page.
func codecContrib(c codec.Contribution) (int, float64) { return c.Var, c.Value }
