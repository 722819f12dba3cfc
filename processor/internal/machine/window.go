package machine

import "time"

// The output window: how a worker publishes to a JetStream output stream
// without waiting for each PubAck before the next message.
//
// Each key keeps its unacknowledged outputs in a queue (outQueue), grouped
// by input message in input order. At most one message of a key is in
// flight: the next is published only when the previous one's PubAck came
// back, and a failed or timed-out publish is retried — the same message,
// deduplicated by its Nats-Msg-Id — before anything later of the key. So
// a key's outputs land in the output stream in input order whatever fails,
// and each once. Keys do not wait for each other: a worker has one
// publish in flight per key with outputs, up to its window of queued and
// in-flight outputs (window); when the window is full the worker takes no
// more input until acknowledgements come back, so a slow or failing output
// stream holds back only the partitions that publish to it.
//
// An input message is acknowledged when the last of its outputs is. A
// snapshot handed over while the key has outputs queued is held
// (outQueue.hold) until every output of the messages it holds is
// acknowledged: a snapshot never records a message whose outputs could
// still be lost, so a restart replays them. The rules here do no I/O; the
// machine (machine.go) applies them and the worker publishes, retries and
// acknowledges what its Ready says.

// outGroup is the outputs of one input message of a key.
type outGroup[M, O any] struct {
	seq    uint64 // the input's sequence (stream sequence, or core NATS counter)
	msgs   []O    // owned: nothing else refers to them
	next   int    // msgs[:next] are acknowledged
	in     M      // acknowledged when the group is done
	result string // the input's result label
}

// heldSave is a snapshot job waiting for the outputs of the messages it
// holds: released once no queued group has seq ≤ barrier.
type heldSave struct {
	job     Job
	barrier uint64
}

// outQueue is one key's outputs not yet acknowledged by the output stream.
//
// A key sends its outputs in order in rounds: from the first output not
// acknowledged (the head), up to perKey in flight (one unless the worker
// publishes through a lane, see KeyInFlight). Acknowledgements come back in
// send order and pop the head. The first failure of a round breaks it:
// nothing more of the key is sent until every output of the round still
// in flight has resolved (acknowledged or failed); then, after the retry
// backoff, the next round starts again from the head — every output not
// acknowledged, in order. With one in flight per key this is the retry of
// the failed head before anything later of the key.
type outQueue[M, O any] struct {
	groups  []*outGroup[M, O]
	perKey  int       // outputs in flight at most (0: 1)
	flying  int       // outputs of this round in flight
	cg, cm  int       // the next output to send: groups[cg].msgs[cm]
	broken  bool      // an output of this round failed: send no more until flying is 0
	ord     uint64    // the head's ordinal: outputs acknowledged before it
	retryAt time.Time // zero unless the head waits to be published again
	tries   int       // failed rounds in a row
	refused bool      // the last failure was an error that retries may not cure
	held    []heldSave
}

// window counts a worker's outputs that are queued or in flight.
type window struct {
	limit   int
	pending int // outputs queued or in flight, all keys
}

// full reports whether the worker must stop taking input.
func (w *window) full() bool { return w.pending >= w.limit }

// push appends g (at least one message) to q, counted in w, and says
// whether q can send now (see ready).
func push[M, O any](w *window, q *outQueue[M, O], g *outGroup[M, O]) bool {
	if len(q.groups) == 0 {
		q.cg, q.cm = 0, g.next
	}
	q.groups = append(q.groups, g)
	w.pending += len(g.msgs)
	return q.ready(time.Time{})
}

// ready reports whether q can send its next output at now: it has one not
// yet sent in this round, fewer than perKey in flight, the round is not
// broken, and no retry is due later than now (a zero now only sends when
// no retry is pending).
func (q *outQueue[M, O]) ready(now time.Time) bool {
	if q.cg >= len(q.groups) || q.broken || q.flying >= max(1, q.perKey) {
		return false
	}
	return q.retryAt.IsZero() || (!now.IsZero() && !now.Before(q.retryAt))
}

// send marks q's next output as in flight and returns it with its input's
// sequence and its ordinal (the ordinal its acknowledgement names); q must
// be ready.
func (q *outQueue[M, O]) send() O {
	o, _, _ := q.sendNext()
	return o
}

func (q *outQueue[M, O]) sendNext() (o O, seq, ord uint64) {
	g := q.groups[q.cg]
	o, seq = g.msgs[q.cm], g.seq
	ord = q.ord + uint64(q.sent())
	q.flying++
	q.retryAt = time.Time{}
	if q.cm++; q.cm == len(g.msgs) {
		q.cg, q.cm = q.cg+1, 0
	}
	return o, seq, ord
}

// sent counts the outputs of this round sent (in flight, or failed in a
// broken round): those between the head and the cursor.
func (q *outQueue[M, O]) sent() int {
	if len(q.groups) == 0 {
		return 0
	}
	n := -q.groups[0].next
	for i := 0; i < q.cg && i < len(q.groups); i++ {
		n += len(q.groups[i].msgs)
	}
	return n + q.cm
}

// headSeq is the input sequence of q's head output (0: none).
func (q *outQueue[M, O]) headSeq() uint64 {
	if len(q.groups) == 0 {
		return 0
	}
	return q.groups[0].seq
}

// acked records that q's oldest output in flight, the head, was
// acknowledged. It returns the group that is now complete (its input can
// be acknowledged), or nil, and the held snapshot jobs that may now be
// saved.
func acked[M, O any](w *window, q *outQueue[M, O]) (done *outGroup[M, O], saves []Job) {
	g := q.groups[0]
	q.flying--
	if !q.broken {
		q.tries, q.refused = 0, false
	}
	g.next++
	q.ord++
	w.pending--
	if g.next < len(g.msgs) {
		return nil, nil
	}
	q.groups[0] = nil
	q.groups = q.groups[1:]
	if q.cg > 0 {
		q.cg--
	} else { // the cursor was on the group that completed: a round that ended at its end
		q.cm = 0
	}
	if len(q.groups) == 0 {
		q.groups = nil // let the backing array go
		q.cg, q.cm = 0, 0
	}
	return g, q.release()
}

// failed records that an output of q in flight was not acknowledged
// (refused: by an error that retries may not cure, such as a message
// larger than the stream allows). It reports whether it is the round's
// first failure (then tries counts it).
func (q *outQueue[M, O]) failed(refused bool) (first bool) {
	q.flying--
	if q.broken {
		return false
	}
	q.broken, q.refused = true, refused
	q.tries++
	return true
}

// endRound starts the next round once a broken one has nothing in flight:
// everything not acknowledged is sent again from the head, in order, at
// now + backoff. It returns when (zero: the round is not over).
func (q *outQueue[M, O]) endRound(now time.Time) time.Time {
	if !q.broken || q.flying > 0 {
		return time.Time{}
	}
	q.broken = false
	q.cg, q.cm = 0, 0
	if len(q.groups) > 0 {
		q.cm = q.groups[0].next
	}
	q.retryAt = now.Add(retryBackoff(q.tries))
	return q.retryAt
}

// hopeless reports whether a shutdown should stop waiting for q: its head
// was refused, or failed three times in a row.
func (q *outQueue[M, O]) hopeless() bool {
	return len(q.groups) > 0 && (q.refused || q.tries >= 3)
}

// retryBackoff is the wait before attempt n+1 of a failed publish: 20ms,
// doubling, at most 1s.
func retryBackoff(n int) time.Duration {
	d := 20 * time.Millisecond
	for i := 1; i < n && d < time.Second; i++ {
		d *= 2
	}
	return min(d, time.Second)
}

// hold keeps job until every output of the messages it holds — everything
// queued now — is acknowledged. It reports false (job not held: save it
// now) when q is empty.
func (q *outQueue[M, O]) hold(job Job) bool {
	if len(q.groups) == 0 {
		return false
	}
	q.held = append(q.held, heldSave{job: job, barrier: q.groups[len(q.groups)-1].seq})
	return true
}

// release returns the held jobs whose messages' outputs are all
// acknowledged.
func (q *outQueue[M, O]) release() []Job {
	var out []Job
	for len(q.held) > 0 && (len(q.groups) == 0 || q.groups[0].seq > q.held[0].barrier) {
		out = append(out, q.held[0].job)
		q.held = q.held[1:]
	}
	if len(q.held) == 0 {
		q.held = nil
	}
	return out
}
