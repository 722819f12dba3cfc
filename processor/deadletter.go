package processor

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// reject dead-letters m with the reason of err and terminates it. The
// dead letter is published with JetStream when a stream stores the
// dead-letter subject (retried like an output, deduplicated by the input
// sequence), else with core NATS; a failure to publish it is logged and
// the input is terminated all the same — unless the fence was lost
// (lastMoment, read before each attempt): dead letters are fenced like
// outputs, and the message is left to the new owner.
func (w *worker) reject(ctx context.Context, m *inMsg, err error) {
	if w.lastMoment() != nil {
		w.fencedNak(m)
		return
	}
	_, reason := classify(err)
	pc := m.pipe.cfg
	w.dlLog.add(w.log, time.Now(), m.key, m.subject, m.seq, reason, err) // w.log names the pipeline
	dl := nats.NewMsg(expandShard(pc.DeadLetter, pc.Name, m.key, w.shard))
	dl.Data = m.data
	for k, v := range m.header {
		if k != jetstream.MsgIDHeader {
			dl.Header[k] = v
		}
	}
	dl.Header.Set(HeaderError, reason)
	dl.Header.Set(HeaderErrorDetail, err.Error())
	dl.Header.Set(HeaderSubject, m.subject)
	dl.Header.Set(HeaderInputSubject, inputSubject(m.subject, pc.Partitions))
	dl.Header.Set(HeaderStreamSeq, strconv.FormatUint(m.seq, 10))
	dl.Header.Set(HeaderPipeline, pc.Name)
	dl.Header.Set(HeaderKey, m.key)
	if w.dl.JetStream && m.js != nil {
		dl.Header.Set(jetstream.MsgIDHeader, pc.deadLetterID(w.shard, m.seq))
	}
	// With JetStream: attempts of publishAttempt, retried while the
	// failure is transient (deduplicated by the id), until the stream
	// acknowledges it, snapshot_timeout has passed, or the fence is lost.
	perr := w.dl.Retry(ctx, dl, time.Now().Add(w.snapshotTimeout), w.lastMoment)
	if errors.Is(perr, errFenced) {
		w.fencedNak(m)
		return
	}
	if perr != nil {
		w.log.Error("publish dead letter", zap.String("pipeline", pc.Name), zap.Uint64("seq", m.seq), zap.Error(perr))
	}
	if m.js != nil {
		if terr := m.js.TermWithReason(reason); terr != nil {
			w.log.Warn("term", zap.Error(terr))
		}
	}
	m.pipe.stats.DeadLettered.Add(1)
	w.met.messages.WithLabelValues(pc.Name, resultDeadLetter).Inc()
	w.met.deadLetters.WithLabelValues(pc.Name, reason).Inc()
}

// fencedNak gives back a message whose dead letter the fence stopped: its
// new owner dead-letters it (the letter's Nats-Msg-Id drops a second
// copy of one that landed).
func (w *worker) fencedNak(m *inMsg) {
	if m.js != nil {
		_ = m.js.Nak()
	}
}

// inputSubject is the subject a message stored as subject was published
// to: a partitioned input stream appends the partition as a last token.
func inputSubject(subject string, partitions int) string {
	if partitions > 1 {
		if i := strings.LastIndexByte(subject, '.'); i >= 0 {
			return subject[:i]
		}
	}
	return subject
}

// deadLetterLogEvery is the shortest interval between two warn lines
// about dead letters of one worker.
var deadLetterLogEvery = 10 * time.Second

// deadLetterLog keeps a flood of dead letters from writing one warn line
// per message: the first dead letter is logged with its details at once,
// the next ones within deadLetterLogEvery are counted by reason, and the
// count is logged (with the last one's details) when the interval is over
// — by the next dead letter or by the worker's tick.
type deadLetterLog struct {
	last     time.Time
	n        int
	byReason map[string]int
	sample   []zap.Field
}

func (d *deadLetterLog) add(log *zap.Logger, now time.Time, key, subject string, seq uint64, reason string, err error) {
	fields := []zap.Field{zap.String("key", key), zap.String("subject", subject),
		zap.Uint64("seq", seq), zap.String("reason", reason), zap.Error(err)}
	if !d.last.IsZero() && now.Sub(d.last) < deadLetterLogEvery {
		d.n++
		if d.byReason == nil {
			d.byReason = map[string]int{}
		}
		d.byReason[reason]++
		d.sample = fields
		return
	}
	if d.n > 0 {
		fields = append(fields, zap.Int("suppressed", d.n), zap.Any("suppressed_by_reason", d.byReason))
	}
	log.Warn("dead-lettered", fields...)
	d.last, d.n, d.byReason, d.sample = now, 0, nil, nil
}

// flush logs the dead letters counted since the last line, once the
// interval is over.
func (d *deadLetterLog) flush(log *zap.Logger, now time.Time) {
	if d.n == 0 || now.Sub(d.last) < deadLetterLogEvery {
		return
	}
	log.Warn("dead-lettered (more)", append(d.sample, zap.Int("count", d.n), zap.Any("by_reason", d.byReason),
		zap.Duration("within", now.Sub(d.last)))...)
	d.last, d.n, d.byReason, d.sample = now, 0, nil, nil
}
