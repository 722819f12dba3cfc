package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"time"
)

// Parameters of the simulated fleet (the processor's defaults where they
// matter, and the cluster test's lease and ack wait).
const (
	leaseTTL        = 3 * time.Second
	ackWait         = 5 * time.Second
	nakDelay        = 200 * time.Millisecond
	snapshotTimeout = 10 * time.Second
	shutdownTimeout = 5 * time.Second
	publishAttempt  = 2 * time.Second
	attemptTimeout  = 5 * time.Second // processor.attemptTimeout: one JetStream API call
	callTimeout     = time.Second     // partition.callTimeout: one call that starts a partition
	maxAckPending   = 8
	takeTimeout     = leaseTTL / 4 // processor's takeTimeout: one take, release or abandon attempt
	pipeline        = "p"
)

// service is a server-side part of the fleet that can go down.
type service int

const (
	svcKV     service = iota // the coordination bucket
	svcStream                // the input stream and its consumers' API
	svcOut                   // the output stream
	svcSnap                  // the snapshot store
	nServices
)

func (s service) String() string { return [...]string{"kv", "stream", "out", "snap"}[s] }

// event is one thing that happens at a simulated time; id orders events
// of the same time by when they were scheduled.
type event struct {
	at time.Duration
	id uint64
	fn func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].id < q[j].id
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// Options shape one run.
type Options struct {
	Seed uint64
	// Faults off: a reference run (no crash, no loss, nothing down).
	NoFaults bool
	// Trace receives a line per notable event (nil: none).
	Trace func(string)
}

// Result is what a run found.
type Result struct {
	Seed       uint64
	Violations []string
	Drained    time.Duration // when every output had landed, after the last fault
	LastFault  time.Duration
	Events     int
	Notes      []string // notable shell log lines (gave up waiting, lookups failed, …)
	// StaleSent counts snapshot writes (saves and claims) that reached
	// the store after a newer epoch took their partition; StaleLanded
	// those of them that its compare-and-set let through (world.snapSave).
	StaleSent, StaleLanded int
	// OwnSaveRetried counts saves that conflicted with this epoch's own
	// earlier save (landed, its answer lost) and were made again on its
	// revision (part.ambiguous, worker.ambiguous).
	OwnSaveRetried int
	// LetterCopies counts copies of inputs settled at once because their
	// dead letter was stored (machine/letters.go): a copy redelivered
	// while the dead letter was retried past ack_wait, or its termination
	// lost.
	LetterCopies int
	// StaleReads counts KV and snapshot reads answered with a version
	// older than the latest (stale.go).
	StaleReads int
}

// world is the simulated fleet and its servers.
type world struct {
	opt    Options
	rng    *rand.Rand
	now    time.Duration
	q      queue
	nextID uint64
	events int

	down      [nServices]time.Duration // down until
	lossy     bool                     // links lose messages
	lastFault time.Duration

	kv      map[string]*kvEntry
	kvRev   uint64
	snaps   map[string]*snapEntry
	snapRev uint64
	// Every committed version of each key, oldest first, for reads that
	// a replica behind the leader answers (stale.go).
	kvHist   map[string][]kvEntry
	snapHist map[string][]snapVer
	staleMax time.Duration // how far behind the leader a read may be (0: never)
	staleP   float64       // the share of reads answered behind the leader
	// manifests: the run's snapshots are large, each an object named by
	// its manifest; objs holds the objects not deleted (store.go).
	manifests bool
	objs      map[uint64]bool
	objNext   uint64
	objAt     map[uint64]time.Duration // when each object was put
	// resetCorrupt: on_corrupt_snapshot is reset (a corrupt snapshot's key
	// starts afresh), else fail (its message is refused, and comes again).
	resetCorrupt bool
	corrupt      map[uint64]bool // objects found missing (reported once)

	parts     int
	keys      []string
	input     []inMsg // input[i] has stream sequence i+1
	published int     // how many of input are in the stream
	consumers map[string]*consumer

	outIDs map[string]bool
	outs   map[string][]output // per key, in output stream order
	// dead: the dead letters stored, by input sequence (the dead-letter
	// stream drops a duplicate by its Nats-Msg-Id); deadGaveUp: inputs
	// whose dead letter the shell gave up on after snapshot_timeout and
	// terminated all the same (its documented policy, noted).
	dead       map[uint64]bool
	deadGaveUp map[uint64]bool

	members []*member

	res Result
}

// inMsg is one input message.
type inMsg struct {
	seq  uint64
	key  string
	part int
	val  uint64
	bad  badKind
}

// badKind is how an input is bad input: refused at decoding (before its
// key is touched), refused by the learner before learning, or failed
// numerically after learning part of its batch (it counts as applied).
// Each is dead-lettered, with no output.
type badKind int

const (
	good       badKind = iota
	badDecode          // worker.deliver: Delivered with a Reject
	badLearner         // worker.apply: Applied with a Reject, unchanged
	badNumeric         // worker.apply: Applied with a Reject, changed
	nBadKinds
)

// changes reports whether msg changes its key's state.
func (msg inMsg) changes() bool { return msg.bad == good || msg.bad == badNumeric }

// output is one output message.
type output struct {
	key   string
	seq   uint64
	hash  uint64
	epoch uint64
}

func (w *world) violate(format string, a ...any) {
	s := fmt.Sprintf("t=%v: ", w.now) + fmt.Sprintf(format, a...)
	w.res.Violations = append(w.res.Violations, s)
	w.trace("VIOLATION " + s)
}

func (w *world) note(format string, a ...any) {
	s := fmt.Sprintf("t=%v: ", w.now) + fmt.Sprintf(format, a...)
	w.res.Notes = append(w.res.Notes, s)
	w.trace(s)
}

func (w *world) trace(s string) {
	if w.opt.Trace != nil {
		w.opt.Trace(fmt.Sprintf("%10v %s", w.now, s))
	}
}

// at schedules fn after d of simulated time.
func (w *world) at(d time.Duration, fn func()) {
	w.nextID++
	heap.Push(&w.q, &event{at: w.now + max(d, 0), id: w.nextID, fn: fn})
}

// step runs the next event; false when none is left.
func (w *world) step() bool {
	if len(w.q) == 0 {
		return false
	}
	e := heap.Pop(&w.q).(*event)
	w.now = e.at
	w.events++
	e.fn()
	return true
}

func (w *world) isDown(s service) bool { return w.now < w.down[s] }

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// between returns a duration uniformly in [lo, hi).
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

// latency is one link's delay: mostly a millisecond or two, sometimes
// (faults on) much longer.
func (w *world) latency() time.Duration {
	d := w.between(200*time.Microsecond, 3*time.Millisecond)
	if w.lossy && w.chance(0.05) {
		d += w.between(10*time.Millisecond, 800*time.Millisecond)
	}
	return d
}

// lost reports whether a message on a link is lost.
func (w *world) lost() bool { return w.lossy && w.chance(0.03) }

// errTimeout is a call that got no answer in time.
type simErr string

func (e simErr) Error() string { return string(e) }

const (
	errTimeout  simErr = "timeout"
	errConflict simErr = "wrong last revision"
	errNotFound simErr = "not found"
	errFenced   simErr = "fenced"
	errLinkLost simErr = "connection lost"
)

// call is a request of member m to service s, answered within timeout or
// not at all (then reply gets errTimeout at the deadline): effect runs on
// the server when the request arrives, if the service is up; its reply
// may be lost on the way back (a write that landed, unanswered). slow
// adds to the server's time (a slow disk).
func (w *world) call(m *member, s service, timeout, slow time.Duration, effect func() (any, error), reply func(any, error)) {
	w.callOn(m, s, timeout, slow, false, effect, reply)
}

// callOn is call; with cut, a reply lost on its way back is lost with
// its connection, which the client learns at once (errLinkLost, a
// latency later) instead of at the timeout.
func (w *world) callOn(m *member, s service, timeout, slow time.Duration, cut bool, effect func() (any, error), reply func(any, error)) {
	inc := m.inc
	sent := w.now
	answered := false
	answer := func(v any, err error) {
		if answered {
			return
		}
		answered = true
		m.deliver(inc, func() { reply(v, err) })
	}
	w.at(timeout, func() { answer(nil, errTimeout) })
	there := m.fifo(&m.outNext, w.latency())
	w.at(there+slow, func() {
		if w.isDown(s) || w.lost() {
			return
		}
		v, err := effect()
		back := m.fifo(&m.inNext, w.latency())
		if w.lost() {
			if cut {
				w.at(back, func() { answer(nil, errLinkLost) })
			}
			return
		}
		if w.now+back-sent >= timeout {
			return
		}
		w.at(back, func() { answer(v, err) })
	})
}

// fifo keeps one connection's messages in order: a message sent now with
// delay d arrives no earlier than the one sent before it.
func (m *member) fifo(next *time.Duration, d time.Duration) time.Duration {
	at := max(m.w.now+d, *next)
	*next = at
	return at - m.w.now
}

// send carries a one-way message to member m (a delivery, a watch
// update), lost or delayed like any other.
func (w *world) send(m *member, fn func()) {
	if w.lost() {
		return
	}
	inc := m.inc
	w.at(m.fifo(&m.inNext, w.latency()), func() { m.deliver(inc, fn) })
}
