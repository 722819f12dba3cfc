package machine

import (
	"fmt"
	"time"
)

// slot is one key known to the machine: loaded, or unloading while its
// last save is in flight.
type slot[M, O any] struct {
	*keyState
	out     outQueue[M, O]
	idx     int      // in Machine.all
	waiting bool     // in Machine.sendable
	queued  bool     // in Machine.toSave
	closer  bool     // in Machine.closers
	due     dueEntry // in Machine.dues (due.go)
}

// current is an input: a message (or request) in progress — its Apply
// sent — or waiting for its key to load (load.go).
type current[M any] struct {
	msg  M
	req  *Request
	key  string
	seq  uint64
	opts LoadOpts
}

// letter is a dead letter in flight: its input's delivery hold stays in
// the tracker until the dead letter has landed.
type letter[M any] struct {
	msg M
	key string
	seq uint64
}

// Machine is the core of one worker. M is the worker's input message, O
// its output message; the machine only stores and returns them.
type Machine[M, O any] struct {
	cfg      Config
	core     *keyCore
	win      window
	keys     map[string]*slot[M, O]
	all      []*slot[M, O] // the keys in a deterministic order
	cur      *current[M]   // the message whose Apply was sent
	loads    map[string]*loadOp[M]
	queue    []*loadOp[M]  // loads not started yet, in order
	started  int           // loads in flight
	parked   int           // inputs held by loads
	backlog  []*current[M] // inputs whose key loaded (or failed to), taken before new input
	acts     []Action[M, O]
	spare    []Action[M, O]
	now      time.Time
	inflight int
	sendable []*slot[M, O] // keys whose head waits for an in-flight slot (Window at most in flight)
	toSave   []*slot[M, O] // keys whose saveNow waits for a snapshot slot or their save in flight (saves.go)
	dues     []*slot[M, O] // heap of the keys a rule of the policy makes due, earliest first (due.go)
	dueOrd   uint64
	closers  []*slot[M, O] // after Close: the keys the end may wait for (saves.go finishIfDone)
	retrying []*slot[M, O]
	jobID    uint64
	letter   *letter[M] // the dead letter in flight (Reject emitted, not answered)
	lettered letters    // the dead letters stored (letters.go)
	copies   int        // copies of their inputs settled at once
	fenced   bool
	stopping bool
	closing  bool
	deadline time.Time
	done     bool
}

// New returns a machine. track is the partition's replay tracker (nil for a
// core NATS input: no sequences, no waiting, no holds); the machine holds
// in it each dirty key's first unsnapshotted sequence.
func New[M, O any](cfg Config, track *Tracker) *Machine[M, O] {
	cfg.Quota, cfg.Slots, cfg.Window = max(1, cfg.Quota), max(1, cfg.Slots), max(1, cfg.Window)
	if cfg.Letters <= 0 {
		cfg.Letters = defaultLetters
	}
	return &Machine[M, O]{cfg: cfg, core: newKeyCore(track, cfg.Policy, cfg.Quota, cfg.Slots),
		win: window{limit: cfg.Window}, keys: map[string]*slot[M, O]{}, loads: map[string]*loadOp[M]{},
		lettered: letters{limit: cfg.Letters}}
}

// Accepting reports whether the worker may Step the next input (a
// delivered message, a request): no message is in progress, none waits
// whose key loaded, fewer than Parked wait for loads, and the window has
// room — or the partition is fenced (what comes is nak'ed) or stopping
// (take the queued input, then finish).
func (m *Machine[M, O]) Accepting() bool {
	return m.takes() && (!m.win.full() || m.fenced || m.stopping)
}

// takes reports whether an input may be stepped, the window aside.
func (m *Machine[M, O]) takes() bool {
	return m.cur == nil && m.letter == nil && len(m.backlog) == 0 && m.parked < max(1, m.cfg.Parked) && !m.closing && !m.done
}

// HasReady reports whether actions wait to be executed.
func (m *Machine[M, O]) HasReady() bool { return len(m.acts) > 0 }

// Ready returns the actions to execute, in order. Steps made while they
// are executed go to the next Ready.
func (m *Machine[M, O]) Ready() Ready[M, O] {
	rd := Ready[M, O]{Actions: m.acts}
	m.acts = m.spare[:0]
	m.spare = nil
	return rd
}

// Advance says the actions of rd were executed; their storage is reused.
func (m *Machine[M, O]) Advance(rd Ready[M, O]) {
	clear(rd.Actions)
	m.spare = rd.Actions[:0]
}

// Done reports whether the machine finished after Close (or a Fatal).
func (m *Machine[M, O]) Done() bool { return m.done }

// Wake is when the machine next needs a Tick for a deadline of its own — a
// retry due, a slot wait or the close deadline — or zero.
func (m *Machine[M, O]) Wake() time.Time {
	var at time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, s := range m.retrying {
		if s.out.flying == 0 && len(s.out.groups) > 0 {
			earliest(s.out.retryAt)
		}
	}
	if len(m.queue) > 0 && m.queue[0].victim != "" {
		earliest(m.queue[0].deadline)
	}
	if m.closing && !m.done {
		earliest(m.deadline)
	}
	return at
}

// Pending is the number of outputs queued or in flight.
func (m *Machine[M, O]) Pending() int { return m.win.pending }

// InFlight is the number of publishes in flight.
func (m *Machine[M, O]) InFlight() int { return m.inflight }

// KeyInfo is the machine's view of a key.
type KeyInfo struct {
	Key       string
	LastSeq   uint64
	Dirty     bool
	Unloading bool // being unloaded: its last save is in flight
}

// Key returns the machine's view of key.
func (m *Machine[M, O]) Key(key string) (KeyInfo, bool) {
	s, ok := m.keys[key]
	if !ok {
		return KeyInfo{}, false
	}
	return KeyInfo{Key: key, LastSeq: s.lastSeq, Dirty: s.dirty, Unloading: s.evicting}, true
}

// Keys returns the machine's view of every key it knows.
func (m *Machine[M, O]) Keys() []KeyInfo {
	out := make([]KeyInfo, 0, len(m.all))
	for _, s := range m.all {
		out = append(out, KeyInfo{Key: s.key, LastSeq: s.lastSeq, Dirty: s.dirty, Unloading: s.evicting})
	}
	return out
}

// Step applies one event that happened at now. It fails only when the
// worker breaks the protocol (an input while not Accepting, an answer
// nobody asked for).
func (m *Machine[M, O]) Step(now time.Time, ev Event) error {
	m.now = now
	if l := m.letter; l != nil {
		// A Reject is answered before the worker steps anything but the
		// fence's loss and the answers of publishes it executes in the
		// meantime (it dead-letters synchronously): no input, tick or
		// save moves the partition on — no later message of the key, no
		// snapshot holding it — while its dead letter may still be lost.
		switch e := ev.(type) {
		case DeadLettered:
			if e.Key != l.key || e.Seq != l.seq {
				return fmt.Errorf("machine: dead letter of %d of key %q landed while %d of key %q is in flight", e.Seq, e.Key, l.seq, l.key)
			}
			m.letterLanded(true, nil)
			m.afterLetter()
			return nil
		case DeadLetterFailed:
			if e.Key != l.key || e.Seq != l.seq {
				return fmt.Errorf("machine: dead letter of %d of key %q failed while %d of key %q is in flight", e.Seq, e.Key, l.seq, l.key)
			}
			m.letterLanded(false, e.Err)
			m.afterLetter()
			return nil
		case FenceLost, Published:
			// A publish executed after the Reject was emitted, before it
			// was executed (an earlier action of the same Ready).
		default:
			return fmt.Errorf("machine: %T stepped while the dead letter of %d of key %q is in flight", ev, l.seq, l.key)
		}
	}
	if m.done {
		if l, ok := ev.(SaveLanded); ok {
			// The worker drains the saves in flight after Finished.
			m.landed(l)
			return nil
		}
		if _, ok := ev.(Published); ok {
			return nil
		}
		return nil
	}
	var err error
	switch e := ev.(type) {
	case Delivered[M]:
		err = m.deliver(e)
	case Request:
		err = m.request(e)
	case Loaded:
		err = m.loaded(e)
	case Applied[O]:
		err = m.applied(e)
	case Published:
		err = m.published(e)
	case SaveLanded:
		m.landed(e)
	case DeadLettered, DeadLetterFailed:
		return fmt.Errorf("machine: unexpected dead letter answer %+v", e)
	case Reset:
		if s, ok := m.keys[e.Key]; ok {
			m.core.reset(s.keyState, now)
			m.schedule(s)
			m.saveSoon(s)
		}
	case SaveNow:
		if s, ok := m.keys[e.Key]; ok && s.dirty {
			m.saveSoon(s)
		}
	case Tick:
		m.tick()
	case FenceLost:
		m.fence()
	case Stopping:
		m.stopping = true
	case Close:
		if !m.closing || e.Deadline.Before(m.deadline) {
			m.deadline = e.Deadline
		}
		first := !m.closing
		m.closing, m.stopping = true, true
		if first {
			m.listClosers()
		}
	default:
		return fmt.Errorf("machine: unknown event %T", ev)
	}
	if err == nil && !m.done {
		m.resume()
		m.startLoads()
		m.finishIfDone()
	}
	return err
}

// emit queues an action. The replay tracker is the machine's: every
// change of it besides the deliveries (the consume callback's Deliver) is
// made here or in keyCore, as the machine decides it — an ack settles
// its delivery's hold, a nak (or a fatal stop, which naks) keeps it
// until the redelivery, a dead letter settles it when it has landed
// (letterLanded) — never by the worker that executes the action. So the
// checkpoint has one writer per role, and a checkpoint read at any moment
// reflects what the machine decided.
func (m *Machine[M, O]) emit(a Action[M, O]) {
	if t := m.core.track; t != nil {
		switch a.Kind {
		case ActAck:
			t.Release(a.Seq)
		case ActNak, ActFatal:
			t.Nak(a.Seq)
		}
	}
	m.acts = append(m.acts, a)
}

// afterLetter moves on once a dead letter ended: the backlog and the
// queued loads wait while one is in flight — a load would make room by
// unloading keys, handing over a snapshot of the letter's key that holds
// the rejected message before its dead letter is stored (the simulation
// with asynchronous loads: seeds 6969, 9190, 10812).
func (m *Machine[M, O]) afterLetter() {
	if !m.done {
		m.resume()
		m.startLoads()
	}
	m.finishIfDone()
}

// letterLanded settles the dead letter in flight: stored, its input's
// delivery hold is released (the checkpoint may pass it); not stored, the
// input goes back (a nak keeps the hold until its redelivery). Released
// when the Reject was emitted, a renewal could write a checkpoint past an
// input whose dead letter a crash or a fence then stopped: neither
// dead-lettered nor retried (issue 28).
func (m *Machine[M, O]) letterLanded(stored bool, err error) {
	l := m.letter
	m.letter = nil
	if !stored {
		if m.core.track != nil {
			// As any nak'ed message: the key's later messages wait for it.
			m.core.block(l.key, l.seq, m.now)
		}
		m.emit(Action[M, O]{Kind: ActNak, Key: l.key, Msg: l.msg, Seq: l.seq, Err: err})
		return
	}
	if t := m.core.track; t != nil {
		m.core.settled(l.key, l.seq)
		t.Release(l.seq)
		m.lettered.add(l.key, l.seq)
	}
}

// fence records that the partition may no longer write (FenceLost, or a
// save that landed Fenced). From then on the machine emits no effect —
// no Load (a load claims its key), Apply, Publish, Ack, Reject, Snapshot
// or SaveHeld — only what gives messages back (Nak, Fatal) or concerns
// the worker alone (Retry, Unload, Live, Serve, GaveUp, Finished): the
// partition's next owner replays from the checkpoint what this one did
// not settle. The inputs waiting for loads not started (a load claims
// its key) go back at once, those of a load in flight when it answers.
func (m *Machine[M, O]) fence() {
	m.fenced = true
	m.dropQueued()
}

// deliver starts on an input message.
func (m *Machine[M, O]) deliver(d Delivered[M]) error {
	if !m.takes() {
		return fmt.Errorf("machine: message %d of key %q delivered while not accepting", d.Seq, d.Key)
	}
	if d.Fail == nil && m.fenced {
		d.Fail = &Fail{Disp: Nak, Err: ErrFenced}
	}
	if (d.Fail == nil || d.Fail.Disp == Reject) && m.takenLetter(d.Key, d.Msg, d.Seq) {
		return nil
	}
	if d.Fail != nil {
		m.refuse(d.Msg, d.Key, d.Seq, *d.Fail)
		return nil
	}
	m.take(&current[M]{msg: d.Msg, key: d.Key, seq: d.Seq, opts: LoadOpts{Create: true}})
	return nil
}

// wait refuses message seq of key (a nak) when it must wait for an
// earlier unapplied message of the key, and reports whether it did.
func (m *Machine[M, O]) wait(msg M, key string, seq uint64) bool {
	wait, first := m.core.waits(key, seq, m.now)
	if wait {
		m.refuse(msg, key, seq, Fail{Disp: Nak, Err: fmt.Errorf("%w: key %q: sequence %d before %d", ErrWaiting, key, first, seq)})
	}
	return wait
}

// request starts on a control request.
func (m *Machine[M, O]) request(r Request) error {
	if !m.takes() {
		return fmt.Errorf("machine: request for key %q while not accepting", r.Key)
	}
	m.take(&current[M]{req: &r, key: r.Key, opts: LoadOpts{ReplaceCorrupt: r.ReplaceCorrupt}})
	return nil
}

// use marks a known key as the most recently used, bringing back one that
// was being unloaded.
func (m *Machine[M, O]) use(s *slot[M, O]) {
	if m.core.revive(s.keyState) {
		m.emit(Action[M, O]{Kind: ActLive, Key: s.key, Delta: 1})
		m.shrink(0, s.key)
	}
	m.core.touch(s.keyState)
}

// shrink unloads the least recently used keys while more than Quota are
// live (and extra more to come): a key brought back while its unloading
// save was in flight makes one too many, and without this a round over
// more keys than the quota brought every one back and held them all
// (issue 30). A dirty victim is handed over now or, with no snapshot slot
// free, as soon as one is.
//
// Keys loading count as live (their room is kept for them). Neither keep
// (the key brought back) nor the key of the message in progress is
// unloaded: with none other to unload, the quota is passed until a load
// answers (load.go).
func (m *Machine[M, O]) shrink(extra int, keep string) {
	for m.core.lru.Len()+m.core.loading+extra > m.core.quota {
		var v *slot[M, O]
		for e := m.core.lru.Back(); e != nil; e = e.Prev() {
			k := e.Value.(*keyState)
			if k.key != keep && (m.cur == nil || k.key != m.cur.key) {
				v = m.keys[k.key]
				break
			}
		}
		if v == nil {
			return
		}
		drop, save := m.core.unload(v.keyState)
		m.emit(Action[M, O]{Kind: ActLive, Key: v.key, Delta: -1})
		switch {
		case drop:
			m.drop(v)
		case save && m.core.flying < m.cfg.Slots && !m.fenced && !m.core.closing:
			m.handoff(v)
		case save:
			m.saveLater(v)
		}
	}
}

// admit applies the message in progress to its loaded key, or skips it
// when the key's state already holds it (a replay after a restore, or a
// redelivery whose outputs are still in the window).
func (m *Machine[M, O]) admit(s *slot[M, O]) {
	c := m.cur
	if m.core.admit(s.keyState, c.seq) == vSkip {
		m.cur = nil
		m.ack(c.key, c.msg, c.seq, ResultSkipped)
		return
	}
	m.emit(Action[M, O]{Kind: ActApply, Key: c.key, Msg: c.msg, Seq: c.seq})
}

// Result labels of acks the machine chooses itself.
const ResultSkipped = "skipped"

// applied answers the Apply of the message in progress.
func (m *Machine[M, O]) applied(a Applied[O]) error {
	c := m.cur
	if c == nil || c.key != a.Key {
		return fmt.Errorf("machine: unexpected apply of key %q", a.Key)
	}
	m.cur = nil
	s := m.keys[c.key]
	if a.Changed {
		m.core.applied(s.keyState, c.seq, m.now)
		m.schedule(s)
	}
	if a.Fail != nil {
		m.refuse(c.msg, c.key, c.seq, *a.Fail)
		return nil
	}
	if len(a.Outs) > 0 {
		g := &outGroup[M, O]{seq: c.seq, msgs: a.Outs, in: c.msg, result: a.Result}
		if push(&m.win, &s.out, g) {
			m.pump(s)
		}
		m.closerAdd(s)
	} else {
		m.ack(c.key, c.msg, c.seq, a.Result)
	}
	m.maybeSnapshot(s)
	return nil
}

// ack settles message seq of key whose effects are done (applied, its
// outputs acknowledged, or skipped) — unless the partition is fenced: a
// fenced machine settles nothing, it gives the message back (nak), and
// its next owner, replaying from the checkpoint, settles it.
func (m *Machine[M, O]) ack(key string, msg M, seq uint64, result string) {
	if m.fenced {
		m.emit(Action[M, O]{Kind: ActNak, Key: key, Msg: msg, Seq: seq, Err: ErrFenced})
		return
	}
	m.core.settled(key, seq)
	m.emit(Action[M, O]{Kind: ActAck, Key: key, Msg: msg, Seq: seq, Result: result})
}

// refuse naks, dead-letters or stops on a message, as f says.
func (m *Machine[M, O]) refuse(msg M, key string, seq uint64, f Fail) {
	switch f.Disp {
	case Reject:
		if m.fenced {
			// Dead letters are fenced like outputs.
			m.emit(Action[M, O]{Kind: ActNak, Key: key, Msg: msg, Seq: seq, Err: ErrFenced})
			return
		}
		m.letter = &letter[M]{msg: msg, key: key, seq: seq}
		m.emit(Action[M, O]{Kind: ActReject, Key: key, Msg: msg, Seq: seq, Err: f.Err})
	case Fatal:
		m.emit(Action[M, O]{Kind: ActFatal, Key: key, Msg: msg, Seq: seq, Err: f.Err})
		m.core.closing = true
		m.done = true
	default:
		m.emit(Action[M, O]{Kind: ActNak, Key: key, Msg: msg, Seq: seq, Err: f.Err})
	}
}

// pump publishes s's next outputs while it may (window.go), unless the
// partition is fenced (then nothing more is published: its next owner
// replays what is not acknowledged). A key held back only by the worker's
// in-flight limit waits in sendable.
func (m *Machine[M, O]) pump(s *slot[M, O]) {
	if m.fenced {
		return
	}
	for s.out.ready(m.now) {
		if m.inflight >= m.cfg.Window {
			if !s.waiting {
				s.waiting = true
				m.sendable = append(m.sendable, s)
			}
			return
		}
		m.inflight++
		o, seq, ord := s.out.sendNext()
		m.emit(Action[M, O]{Kind: ActPublish, Key: s.key, Out: o, Seq: seq, Ord: ord})
	}
}

// published answers a Publish of key's output.
func (m *Machine[M, O]) published(p Published) error {
	s, ok := m.keys[p.Key]
	if !ok {
		m.inflight-- // a key forgotten meanwhile (a conflicting save): nothing to do
		return nil
	}
	if s.out.flying == 0 {
		return fmt.Errorf("machine: unexpected publish result of key %q", p.Key)
	}
	m.inflight--
	defer m.sendWaiting()
	if p.Err == nil && (s.out.perKey <= 1 || p.Ord == s.out.ord) {
		done, saves := acked(&m.win, &s.out)
		if done != nil {
			m.ack(s.key, done.in, done.seq, done.result)
		}
		for _, j := range saves {
			if m.fenced {
				// Saved nowhere: the job ends as a fenced save does (its
				// hold stays); the worker's copy goes with the worker.
				m.core.landed(s.keyState, job{lastSeq: j.LastSeq, dirtySeq: j.DirtySeq}, Fenced, m.now)
				m.schedule(s)
				continue
			}
			m.emit(Action[M, O]{Kind: ActSaveHeld, Key: s.key, Job: j})
		}
		m.endRound(s)
		m.pump(s)
		return nil
	}
	err := p.Err
	if err == nil {
		err = fmt.Errorf("machine: acknowledgement of output %d of key %q while %d is the oldest in flight", p.Ord, p.Key, s.out.ord)
	}
	if s.out.failed(p.Refused) {
		m.emit(Action[M, O]{Kind: ActRetry, Key: s.key, Seq: s.out.headSeq(), Attempt: s.out.tries, Err: err})
	}
	m.endRound(s)
	return nil
}

// endRound schedules the next round of s's outputs once its broken round
// has nothing in flight.
func (m *Machine[M, O]) endRound(s *slot[M, O]) {
	if at := s.out.endRound(m.now); !at.IsZero() {
		m.retrying = append(m.retrying, s)
	}
}

// sendWaiting publishes for the keys that waited for an in-flight slot.
func (m *Machine[M, O]) sendWaiting() {
	for m.inflight < m.cfg.Window && len(m.sendable) > 0 {
		s := m.sendable[0]
		m.sendable[0] = nil
		m.sendable = m.sendable[1:]
		s.waiting = false
		if m.keys[s.key] == s {
			m.pump(s)
		}
	}
}
