package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// A lane is one worker's ordered path to a JetStream output stream with
// several outputs of a key in flight (output.key_in_flight > 1): a fast
// batch publish (nats-server ≥ 2.12, stream allow_batched) in gap-fail
// mode. Each output is a core NATS publish whose reply subject carries the
// batch, its sequence in the batch and the operation,
//
//	<inbox>.<batch id>.<flow>.fail.<seq>.<op>.$FI
//
// and the stream answers on that subject: flow acknowledgements "every
// message up to seq is persisted" (flow 1: after each), a gap or an error
// (the batch then ends), and one PubAck with the count of messages
// persisted when the batch ends (committed by an end-of-batch, a gap or an
// error). What the server guarantees in gap-fail mode (server/stream.go
// processJetStreamFastBatchMsg, jetstream_batching.go): a batch persists a
// prefix of its messages in batch order — a message whose predecessor did
// not arrive, or failed, ends the batch, and nothing later of it is
// persisted; a duplicate (Nats-Msg-Id within the stream's duplicates
// window) is skipped without ending it; once a batch has ended, or the
// server dropped it (inactivity timeout, restart), every later message of
// it is refused ("batch publish ID unknown" unless it is message 1).
//
// The lane's rules, which with the machine's (internal/machine/window.go)
// keep each key's outputs in input order and each once:
//   - One batch at a time. A batch opens with message 1 alone; later
//     sends wait in the lane until the stream answers it, so a batch is
//     known to exist before it carries more (message 1 can then never open
//     it again behind later ones).
//   - The first sign of trouble — a gap, an error, a no-responders status,
//     a publish that could not be written, a message unanswered for the
//     publish attempt timeout (snapshot_timeout/5, ≥ 500ms) — ends the
//     batch: the lane sends an end-of-batch (op 3) at the next sequence,
//     again each timeout until answered. The batch is over when the stream
//     answers with its PubAck (count: messages 1..count persisted) or
//     refuses one of its messages as unknown (dropped by the server: what
//     it had persisted is unknown). Both answers come after every earlier
//     message of the batch was processed (one connection, processed in
//     order), and nothing of the batch can be persisted after them.
//   - Then every unanswered message is answered: persisted (seq ≤ what the
//     acknowledgements and count say) or failed. A failed one may have
//     been persisted (its acknowledgement lost): the machine sends it
//     again and the stream drops the duplicate.
//   - While a batch ends, and until the worker has stepped its machine
//     with every answer of it and executed what the machine asked for
//     meanwhile (settled), a send is refused at once — answered as failed,
//     in turn — and only then may the next batch open. So a key's outputs
//     in flight are all in one batch, in order, and the machine knows that
//     an earlier output of a key failed before a later one can open a new
//     batch. (TestMachineLaneMutation shows what breaks otherwise;
//     TestWindowFaults/lane found the case of a publish that the machine
//     asked for after one answer and the worker executed after the next.)
//   - Answers of earlier batches are ignored (each batch has a new id).
//
// The machine does the rest: a key's failure stops it until all its
// outputs in flight are answered, then it sends everything not
// acknowledged again, in order, from the first. A key's outputs in the
// stream are thus in order: each batch persists a prefix of what it
// carried, and it carried the key's outputs in order from the first one
// not known to be persisted.
//
// Limits. A batch needs the stream's allow_batched (setup falls back to one
// output in flight per key, with a log line, when the output stream does
// not allow it or discards new messages at its limits — a store that
// refuses one message and takes the next would break the prefix). In a
// cluster, messages reach the stream leader over the member's connection
// and the same order holds; a leader change resets the server's view of a
// batch (it goes on from what was persisted), which the rules above treat
// like a gap (internal/clustertest's TestClusterElastic/lane stops the
// output stream's leader mid-stream, R3 streams on three nodes).
type lane struct {
	pub     lanePublisher
	prefix  string        // reply subjects: <prefix>.<batch>.<flow>.fail.<seq>.<op>.$FI
	timeout time.Duration // an unanswered message, or an end, older than this
	idle    time.Duration // a batch with nothing unanswered this long is closed

	id         string    // the current batch; "" none (the next send opens one)
	next       uint64    // the next sequence in the batch
	opening    bool      // message 1 sent, not answered yet
	ending     bool      // an end-of-batch was sent at endSeq
	draining   bool      // the batch is over; the worker has not settled its answers yet
	endSeq     uint64    //
	endAt      time.Time // send the end again at
	subject    string    // where an end-of-batch goes: the last subject sent
	sent       []laneMsg // unanswered, in batch order
	queued     []laneMsg // waiting for the batch to open
	last       time.Time // the last send
	disabled   error     // the stream refuses batches: every send fails with it, until disabledAt + laneRecheck
	disabledAt time.Time
	errSeq     uint64 // the message the stream refused with errMsg (0: none) in this batch
	errMsg     error  //
	out        []laneResult

	batches, ends uint64 // batches opened, and ended by trouble
}

// lanePublisher is the lane's port to NATS: a core publish (nats.Conn).
type lanePublisher interface {
	PublishMsg(m *nats.Msg) error
}

type laneMsg struct {
	key string
	ord uint64
	seq uint64
	msg *nats.Msg
	at  time.Time
}

// laneResult answers one send: err nil when the stream persisted it.
type laneResult struct {
	key     string
	ord     uint64
	err     error
	refused bool
}

// HeaderLane marks an end-of-batch message of a lane (value "end"): it is
// published to an output subject, empty, and the stream does not store it,
// but a core NATS subscriber to the output subjects receives it.
const HeaderLane = "Kpcastream-Lane"

// Operations of a fast batch message (server FastBatchOp*).
const (
	laneOpStart  = 0
	laneOpAppend = 1
	laneOpEnd    = 3 // commit what arrived, store nothing
)

// Errors of outputs a lane did not get persisted.
var (
	errLaneEnding  = errors.New("processor: output lane: batch ending, output not sent")
	errLaneEnded   = errors.New("processor: output lane: batch ended before this output was persisted")
	errLaneUnknown = errors.New("processor: output lane: batch dropped by the server (restart or inactivity); whether this output was persisted is unknown")
)

// laneRecheck is how long a lane refuses sends after the stream said it
// does not allow batch publishing, before it asks again.
const laneRecheck = 10 * time.Second

// Server error codes the lane tells apart (server/jetstream_errors_generated.go).
const (
	jsErrBatchDisabled = 10205
	jsErrBatchUnknown  = 10208
)

func newLane(pub lanePublisher, prefix string, timeout time.Duration) *lane {
	return &lane{pub: pub, prefix: prefix, timeout: timeout, idle: min(timeout, time.Second)}
}

// pop returns the oldest answer not taken yet.
func (l *lane) pop() (laneResult, bool) {
	if len(l.out) == 0 {
		l.out = nil
		return laneResult{}, false
	}
	r := l.out[0]
	l.out = l.out[1:]
	return r, true
}

// laneTrace, when set (tests), is told what each lane does.
var laneTrace func(l *lane, format string, args ...any)

// trace tells laneTrace; callers check laneTrace first, so that the hot
// path does not build the arguments.
func (l *lane) trace(format string, args ...any) { laneTrace(l, format, args...) }

func (l *lane) answer(m laneMsg, err error, refused bool) {
	if laneTrace != nil {
		l.trace("answer %s ord %d seq %d: %v", m.msg.Header.Get("Nats-Msg-Id"), m.ord, m.seq, err)
	}
	l.out = append(l.out, laneResult{key: m.key, ord: m.ord, err: err, refused: refused})
}

// publish sends key's output ord (Nats-Msg-Id set) through the lane. Its
// answer comes in results: at once when the lane refuses it.
func (l *lane) publish(key string, ord uint64, m *nats.Msg, now time.Time) {
	lm := laneMsg{key: key, ord: ord, msg: m}
	switch {
	case l.disabled != nil:
		l.answer(lm, l.disabled, true)
	case l.ending || l.draining:
		l.answer(lm, errLaneEnding, false)
	case l.id == "":
		l.id, l.next, l.opening = nuid.Next(), 1, true
		l.batches++
		l.send(lm, laneOpStart, now)
	case l.opening:
		l.queued = append(l.queued, lm)
	default:
		l.send(lm, laneOpAppend, now)
	}
}

func (l *lane) reply(seq uint64, op int) string {
	return l.prefix + "." + l.id + ".1.fail." + strconv.FormatUint(seq, 10) + "." + strconv.Itoa(op) + ".$FI"
}

func (l *lane) send(lm laneMsg, op int, now time.Time) {
	lm.seq, lm.at = l.next, now
	l.next++
	lm.msg.Reply = l.reply(lm.seq, op)
	if laneTrace != nil {
		l.trace("send %s ord %d batch %s seq %d", lm.msg.Header.Get("Nats-Msg-Id"), lm.ord, l.id, lm.seq)
	}
	l.sent = append(l.sent, lm)
	l.subject, l.last = lm.msg.Subject, now
	if err := l.pub.PublishMsg(lm.msg); err != nil {
		// Maybe not written: whatever follows would leave a gap.
		l.end(now)
	}
}

// end ends the current batch: no more sends into it, and an end-of-batch
// at the next sequence asks the stream what it persisted.
func (l *lane) end(now time.Time) {
	if l.ending || l.id == "" {
		return
	}
	l.ending = true
	l.ends++
	for _, q := range l.queued {
		l.answer(q, errLaneEnding, false)
	}
	l.queued = nil
	l.endSeq = l.next
	l.next++
	l.sendEnd(now)
}

func (l *lane) sendEnd(now time.Time) {
	if laneTrace != nil {
		l.trace("end batch %s at %d", l.id, l.endSeq)
	}
	l.endAt = now.Add(l.timeout)
	_ = l.pub.PublishMsg(&nats.Msg{Subject: l.subject, Reply: l.reply(l.endSeq, laneOpEnd), Header: nats.Header{HeaderLane: []string{"end"}}}) // lost: sent again at endAt
}

// persisted answers the messages up to seq as persisted; the first
// answer of a batch opens it for the sends that waited.
func (l *lane) persisted(seq uint64, now time.Time) {
	if l.opening {
		l.opening = false
		for len(l.queued) > 0 && !l.ending { // an end answers the rest
			q := l.queued[0]
			l.queued = l.queued[1:]
			l.send(q, laneOpAppend, now)
		}
	}
	n := 0
	for n < len(l.sent) && l.sent[n].seq <= seq {
		l.answer(l.sent[n], nil, false)
		n++
	}
	l.sent = l.sent[n:]
	if len(l.sent) == 0 {
		l.sent = nil
	}
}

// over closes the ended batch: what is unanswered failed (err; refused
// when no retry can cure it).
func (l *lane) over(err error, refused bool) {
	for _, m := range l.sent {
		if m.seq == l.errSeq {
			// Sent again it would fail again: refused, so a shutdown does
			// not wait for it.
			l.answer(m, l.errMsg, true)
			continue
		}
		l.answer(m, err, refused)
	}
	for _, q := range l.queued {
		l.answer(q, err, refused)
	}
	l.id, l.sent, l.queued, l.opening, l.ending = "", nil, nil, false, false
	l.errSeq, l.errMsg = 0, nil
	l.draining = true
}

// settled says the worker has stepped its machine with every answer taken
// so far and executed what the machine asked for meanwhile: after a batch
// is over, the lane refuses sends until then. A send that the machine
// asked for after one answer (the acknowledgement of a key's earlier
// output), before it saw a later one (the failure of the key's next
// output), would otherwise open the next batch out of order.
func (l *lane) settled() {
	if len(l.out) == 0 {
		l.draining = false
	}
}

// laneAnswer is any answer of the stream to a fast batch message.
type laneAnswer struct {
	Type  string `json:"type"` // "ack", "gap", "err"; "" for a PubAck
	Seq   uint64 `json:"seq"`  // ack: persisted up to it
	Batch string `json:"batch"`
	Count uint64 `json:"count"` // PubAck: messages 1..count persisted
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// onAnswer handles a message on the lane's reply subjects.
func (l *lane) onAnswer(subject string, hdr nats.Header, data []byte, now time.Time) {
	id, seq, ok := l.parseReply(subject)
	if laneTrace != nil {
		l.trace("answer from the stream, batch %s seq %d (current %s): %s %v", id, seq, l.id, data, hdr)
	}
	if !ok || id != l.id || id == "" {
		return // an earlier batch's, or not ours
	}
	if st := hdr.Get("Status"); st != "" {
		// 503: no stream listens on the subject (yet). Not processed: a
		// gap for whatever follows; an end-of-batch is sent again.
		if l.ending && seq == l.endSeq {
			return
		}
		l.end(now)
		return
	}
	var a laneAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return
	}
	switch {
	case a.Type == "ack":
		l.persisted(a.Seq, now)
	case a.Type == "err" && a.Error != nil:
		// The stream refused message seq (too large, a limit): it ends
		// the batch; the message is answered with the stream's error.
		if l.errSeq == 0 {
			l.errSeq, l.errMsg = a.Seq, fmt.Errorf("processor: output lane: the stream refused the output: %s (%d)", a.Error.Description, a.Error.ErrCode)
		}
		l.end(now)
	case a.Type == "gap" || a.Type == "err":
		l.end(now)
	case a.Error != nil:
		switch {
		case a.Error.ErrCode == jsErrBatchDisabled:
			l.disabledAt = now
			l.disabled = fmt.Errorf("processor: output lane: the output stream does not allow batch publishing (allow_batched): %s", a.Error.Description)
			l.over(l.disabled, true)
		case a.Error.ErrCode == jsErrBatchUnknown:
			l.over(errLaneUnknown, false)
		case seq == 1:
			// The first message failed: the batch was never opened, or
			// was dropped at once.
			l.over(fmt.Errorf("processor: output lane: %s (%d)", a.Error.Description, a.Error.ErrCode), false)
		default:
			// Refused before the batch saw it (too large, a limit): the
			// batch would go on with a gap; end it. The message is
			// answered with the stream's error.
			if l.errSeq == 0 {
				l.errSeq, l.errMsg = seq, fmt.Errorf("processor: output lane: the stream refused the output: %s (%d)", a.Error.Description, a.Error.ErrCode)
			}
			l.end(now)
		}
	case a.Batch == l.id:
		l.persisted(a.Count, now)
		l.over(errLaneEnded, false)
	}
}

// parseReply reads the batch id and sequence of one of the lane's reply
// subjects.
func (l *lane) parseReply(subject string) (id string, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(subject, l.prefix+".")
	if !found {
		return "", 0, false
	}
	f := strings.Split(rest, ".")
	if len(f) != 6 || f[5] != "$FI" {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(f[3], 10, 64)
	return f[0], seq, err == nil
}

// tick ends a batch whose oldest message has waited too long, sends an
// end-of-batch again, or closes an idle batch (before the server's
// inactivity timeout drops it).
func (l *lane) tick(now time.Time) {
	if l.disabled != nil && now.Sub(l.disabledAt) >= laneRecheck {
		l.disabled = nil // the stream may allow batches now: the next send asks it
	}
	switch {
	case l.id == "":
	case l.ending:
		if !now.Before(l.endAt) {
			l.sendEnd(now)
		}
	case len(l.sent) > 0:
		if now.Sub(l.sent[0].at) >= l.timeout {
			l.end(now)
		}
	case len(l.queued) == 0 && now.Sub(l.last) >= l.idle:
		// Nothing unanswered: end it without waiting for the answer.
		l.endSeq = l.next
		l.sendEnd(now)
		l.id = ""
	}
}

// lost tells the lane that the connection was lost: the answers to what
// it sent may be lost with it, and would otherwise be waited for until the
// publish attempt timeout — holding the keys' later outputs, and a
// graceful stop after a reconnection, that long (issue 28: 1.4–1.9 s of a
// server restart's 2). A batch with sends unanswered ends now: its
// end-of-batch, buffered by the client, goes out first on the new
// connection and is answered with what the stream persisted. An end
// already sent is sent again (it, or its answer, may be lost too).
func (l *lane) lost(now time.Time) {
	switch {
	case l.id == "":
	case l.ending:
		l.sendEnd(now)
	case len(l.sent) > 0 || len(l.queued) > 0:
		l.end(now)
	}
}

// close ends the batch when the worker stops, so that the server need not
// wait for its inactivity timeout (nothing is waited for: what is still
// unanswered is replayed by the partition's next run).
func (l *lane) close() {
	if l.id != "" && !l.ending {
		l.endSeq = l.next
		l.sendEnd(time.Now())
		l.id = ""
	}
}

// wake is when tick next has something to do (zero: nothing).
func (l *lane) wake() time.Time {
	switch {
	case l.id == "":
		return time.Time{}
	case l.ending:
		return l.endAt
	case len(l.sent) > 0:
		return l.sent[0].at.Add(l.timeout)
	case len(l.queued) == 0:
		return l.last.Add(l.idle)
	}
	return time.Time{}
}
