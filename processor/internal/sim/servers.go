package sim

import (
	"slices"
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// The servers: the coordination bucket, the snapshot store, the input
// stream's consumers and the output stream.

// kvEntry is one key of the coordination bucket.
type kvEntry struct {
	rec     ownership.Record // a partition record
	started time.Time        // a heartbeat: when its member started
	member  bool
	rev     uint64
	at      time.Duration // written at (server time)
	deleted bool
}

func recordKey(n int) string     { return "partitions." + pipeline + "." + itoa(n) }
func memberKey(id string) string { return "members." + id }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// kvWrite writes key if its revision is rev (rev 0: it must not exist; a
// put when any is true), and sends the update to every watching member.
func (w *world) kvWrite(key string, e kvEntry, rev uint64, anyRev bool) (uint64, error) {
	cur := w.kv[key]
	if !anyRev {
		switch {
		case rev == 0 && cur != nil && !cur.deleted:
			return 0, errConflict
		case rev != 0 && (cur == nil || cur.rev != rev):
			return 0, errConflict
		}
	}
	w.kvRev++
	e.rev, e.at = w.kvRev, w.now
	w.kv[key] = &e
	w.kvHist[key] = append(w.kvHist[key], e)
	for _, m := range w.members {
		if m.up && m.watching {
			w.watchSend(m, key, e)
		}
	}
	return e.rev, nil
}

// watchSend hands an update to m's watcher: in order (an ordered
// consumer), after a delay; while the bucket is down it waits.
func (w *world) watchSend(m *member, key string, e kvEntry) {
	d := w.latency()
	if w.isDown(svcKV) {
		d += w.down[svcKV] - w.now
	}
	d = max(d, m.watchNext-w.now) // in order
	m.watchNext = w.now + d
	inc := m.inc
	w.at(d, func() { m.deliver(inc, func() { m.observe(key, e, m.clock()) }) })
}

// snapEntry is one key's snapshot.
type snapEntry struct {
	st    keyState
	last  uint64
	epoch uint64
	rev   uint64
	obj   uint64 // the object a manifest names (0: inline; store.go)
}

// keyState is a key's learner: how many messages it saw and a hash of
// them in order.
type keyState struct {
	seen uint64
	hash uint64
}

func (s keyState) apply(seq, val uint64) keyState {
	h := s.hash ^ (seq*0x9e3779b97f4a7c15 + val)
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 31
	return keyState{seen: s.seen + 1, hash: h}
}

// snapSave writes key's snapshot by compare-and-set on rev (0: none).
//
// The processor reads no fence before a save or a claim: the
// compare-and-set is their fence. So a write of an ended epoch may be
// sent (a zombie's, a save handed over just before the lease expired);
// what must hold is checked here, where it lands: it never lands over a
// snapshot of a newer epoch (the newer owner claims a key, moving its
// revision, before it applies anything). One that lands before the newer
// owner touched the key is harmless — its state holds only messages
// whose outputs are acknowledged — and the end-of-run checks of states
// and outputs see to that; such writes are counted (Result.StaleLanded).
func (w *world) snapSave(key string, s snapEntry, rev uint64) (uint64, error) {
	cur := w.snaps[key]
	stale := false
	if e := w.kv[recordKey(ownership.PartitionOf(key, w.parts))]; e != nil && e.rec.Epoch > s.epoch {
		stale = true
		w.res.StaleSent++
	}
	if (cur == nil && rev != 0) || (cur != nil && cur.rev != rev) {
		return 0, errConflict
	}
	if cur != nil && cur.epoch > s.epoch {
		w.violate("snapshot of key %s by epoch %d landed over epoch %d's (rev %d)", key, s.epoch, cur.epoch, rev)
	}
	if stale {
		w.res.StaleLanded++
	}
	w.snapRev++
	s.rev = w.snapRev
	w.snaps[key] = &s
	w.snapHist[key] = append(w.snapHist[key], snapVer{s: &s, at: w.now})
	return s.rev, nil
}

// consumer is one partition consumer of the input stream.
type consumer struct {
	name    string
	part    int
	epoch   uint64
	next    uint64 // next stream sequence to consider for a first delivery
	cons    uint64 // consumer (delivery) sequence
	pending map[uint64]time.Duration
	to      *part // where its pulls come from
	deleted bool
	pumpAt  time.Duration // when the next pump is scheduled (0: none)
}

// createConsumer creates (or finds) the consumer name of partition n
// starting at start.
func (w *world) createConsumer(name string, n int, epoch, start uint64) {
	if c := w.consumers[name]; c == nil || c.deleted {
		w.consumers[name] = &consumer{name: name, part: n, epoch: epoch, next: max(start, 1), pending: map[uint64]time.Duration{}}
	}
}

// pull starts pt's pulls from consumer name (the Consume after the
// consumer's creation was answered).
func (w *world) pull(name string, pt *part) {
	w.at(w.latency(), func() {
		if c := w.consumers[name]; c != nil && !c.deleted && !w.isDown(svcStream) {
			c.to = pt
			w.pump(c)
		} else if c != nil && !c.deleted {
			w.at(w.down[svcStream]-w.now, func() { w.pull(name, pt) })
		}
	})
}

// deleteConsumers deletes partition n's consumers of epochs before epoch
// (partition.consume).
func (w *world) deleteConsumers(n int, epoch uint64) {
	for _, name := range w.consumerNames() {
		if c := w.consumers[name]; c.part == n && c.epoch < epoch && !c.deleted {
			w.deleteConsumer(c)
		}
	}
}

// deleteConsumer deletes c; its puller learns it from its next pull
// (nats.go's ErrConsumerDeleted), and its partition stops.
func (w *world) deleteConsumer(c *consumer) {
	c.deleted = true
	if pt := c.to; pt != nil && pt.m.up && pt.m.inc == pt.inc {
		w.send(pt.m, func() {
			if pt.current() && !pt.fenced && !pt.done {
				pt.revoke("consume ended: consumer deleted")
			}
		})
	}
}

func (w *world) kvKeys() []string {
	var out []string
	for k := range w.kv {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (w *world) consumerNames() []string {
	var out []string
	for name := range w.consumers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// pump delivers what consumer c may: redeliveries due, then first
// deliveries up to max_ack_pending, to the member pulling; it runs again
// when the next redelivery is due.
func (w *world) pump(c *consumer) {
	if c.deleted || c.to == nil {
		return
	}
	if w.isDown(svcStream) {
		w.pumpAt(c, w.down[svcStream]-w.now)
		return
	}
	var due []uint64
	for seq, at := range c.pending {
		if at <= w.now {
			due = append(due, seq)
		}
	}
	slices.Sort(due)
	for _, seq := range due {
		w.deliverTo(c, seq)
	}
	for len(c.pending) < maxAckPending && c.next <= uint64(w.published) {
		seq := c.next
		c.next++
		if w.input[seq-1].part != c.part {
			continue
		}
		w.deliverTo(c, seq)
	}
	next := time.Duration(-1)
	for _, at := range c.pending {
		if next < 0 || at < next {
			next = at
		}
	}
	if next >= 0 {
		w.pumpAt(c, next-w.now)
	}
}

// pumpAt pumps c after d, unless a pump is already due by then.
func (w *world) pumpAt(c *consumer, d time.Duration) {
	at := w.now + d
	if c.pumpAt > w.now && c.pumpAt <= at {
		return
	}
	c.pumpAt = at
	w.at(d, func() {
		if c.pumpAt == at {
			c.pumpAt = 0
			w.pump(c)
		}
	})
}

func (w *world) deliverTo(c *consumer, seq uint64) {
	c.cons++
	c.pending[seq] = w.now + ackWait
	pt, cs, msg := c.to, c.cons, w.input[seq-1]
	if !pt.m.up || pt.m.inc != pt.inc {
		return // pulled by a process that is gone: comes back after ack_wait
	}
	w.send(pt.m, func() { pt.onDelivery(c.name, cs, msg) })
}

// ackArrives settles seq at consumer name (lost while the stream is down).
func (w *world) ackArrives(name string, seq uint64, nak bool) {
	c := w.consumers[name]
	if c == nil || c.deleted || w.isDown(svcStream) {
		return
	}
	if _, ok := c.pending[seq]; !ok {
		return
	}
	if nak {
		c.pending[seq] = w.now + nakDelay
		w.pumpAt(c, nakDelay)
		return
	}
	delete(c.pending, seq)
	w.pump(c)
}

// publishOut stores an output unless its id is a duplicate.
func (w *world) publishOut(o output) {
	id := o.key + "/" + itoa(int(o.seq))
	if w.outIDs[id] {
		return
	}
	w.outIDs[id] = true
	w.outs[o.key] = append(w.outs[o.key], o)
}

// storeDead stores the dead letter of input seq (a duplicate is dropped
// by its id).
func (w *world) storeDead(seq uint64) {
	if w.input[seq-1].bad == good {
		w.violate("a dead letter of input %d, which is good input", seq)
	}
	w.dead[seq] = true
}

// publishInput puts the next input message into the stream.
func (w *world) publishInput() {
	w.published++
	for _, name := range w.consumerNames() {
		w.pump(w.consumers[name])
	}
}
