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
type outQueue[M, O any] struct {
	groups  []*outGroup[M, O]
	flying  bool      // groups[0].msgs[groups[0].next] is in flight
	retryAt time.Time // zero unless the head waits to be published again
	tries   int       // failed attempts of the head message in a row
	refused bool      // the last attempt failed with an error that retries may not cure
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
// whether q's head can be published now (nothing of the key in flight or
// waiting to retry).
func push[M, O any](w *window, q *outQueue[M, O], g *outGroup[M, O]) bool {
	q.groups = append(q.groups, g)
	w.pending += len(g.msgs)
	return q.ready(time.Time{})
}

// ready reports whether q's head message can be published at now: q has
// outputs, none in flight, and no retry is due later than now (a zero now
// only publishes a head that is not waiting to retry).
func (q *outQueue[M, O]) ready(now time.Time) bool {
	if len(q.groups) == 0 || q.flying {
		return false
	}
	return q.retryAt.IsZero() || (!now.IsZero() && !now.Before(q.retryAt))
}

// send marks q's head message as in flight and returns it; q must be ready.
func (q *outQueue[M, O]) send() O {
	g := q.groups[0]
	q.flying, q.retryAt = true, time.Time{}
	return g.msgs[g.next]
}

// acked records that q's message in flight was acknowledged. It returns
// the group that is now complete (its input can be acknowledged), or nil,
// and the held snapshot jobs that may now be saved.
func acked[M, O any](w *window, q *outQueue[M, O]) (done *outGroup[M, O], saves []Job) {
	g := q.groups[0]
	q.flying, q.tries, q.refused = false, 0, false
	g.next++
	w.pending--
	if g.next < len(g.msgs) {
		return nil, nil
	}
	q.groups[0] = nil
	q.groups = q.groups[1:]
	if len(q.groups) == 0 {
		q.groups = nil // let the backing array go
	}
	return g, q.release()
}

// failed records that q's message in flight was not acknowledged (refused:
// by an error that retries may not cure, such as a message larger than the
// stream allows): it is published again at now + backoff, before anything
// later of the key. It returns when.
func (q *outQueue[M, O]) failed(now time.Time, refused bool) time.Time {
	q.flying, q.refused = false, refused
	q.tries++
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
