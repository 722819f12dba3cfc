package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/processor/internal/machine"
)

// reject dead-letters m with the reason of err and terminates it, then
// tells the machine how the dead letter ended (DeadLettered or
// DeadLetterFailed): the input's delivery hold is settled only once its
// dead letter has landed, so that no checkpoint passes an input whose
// dead letter a crash or a fence may still stop (issue 28). It is
// synchronous: the worker steps nothing else meanwhile.
//
// The dead letter is published with JetStream when a stream stores the
// dead-letter subject (retried like an output, deduplicated by the input
// sequence), else with core NATS. The fence is read before each attempt
// (lastMoment): dead letters are fenced like outputs, and a fenced one
// (or one whose attempt the worker's cancelled context ended: a fenced
// stop) is given back by the machine (a nak) for the new owner to
// dead-letter. So is one that no stream stored because none answers for
// the dead-letter subject (deleted: classify.go, actHold), with an error
// naming it — terminated, every bad input would be lost until the stream
// is back. Any other failure, after snapshot_timeout of retries, is
// logged and the input terminated all the same.
func (w *worker) reject(ctx context.Context, m *inMsg, err error) {
	if ferr := w.lastMoment(); ferr != nil {
		w.step(machine.DeadLetterFailed{Key: m.key, Seq: m.seq, Err: ferr})
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
	if perr != nil && classifyAction(perr) == actHold {
		// No stream stores the dead letters (deleted?): the input is
		// kept (classify.go, actHold), not terminated and lost.
		perr = fmt.Errorf("%w: dead letters of pipeline %s go to %q, and no stream answers for it (was it deleted? create it, "+
			"or restart with dead_letters.create_stream): the input is kept and dead-lettered once the stream is there: %w",
			errNoStream, pc.Name, dl.Subject, perr)
		w.step(machine.DeadLetterFailed{Key: m.key, Seq: m.seq, Err: perr})
		return
	}
	if perr != nil && (errors.Is(perr, errFenced) || ctx.Err() != nil) {
		// Not stored, and the partition is stopping without finishing
		// (fenced, or its workers cancelled): the input goes back.
		if cause := context.Cause(ctx); !errors.Is(perr, errFenced) && cause != nil {
			perr = cause
		}
		w.step(machine.DeadLetterFailed{Key: m.key, Seq: m.seq, Err: perr})
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
	w.step(machine.DeadLettered{Key: m.key, Seq: m.seq})
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
