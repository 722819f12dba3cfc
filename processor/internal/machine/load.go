package machine

import (
	"fmt"
	"time"
)

// Loads (issue 30): a key that is not loaded is asked for with a Load
// action, and the worker answers with Loaded whenever the load ends — up
// to Config.Loads keys load at once, and meanwhile the machine takes the
// worker's other input: a miss no longer holds up every other key.
//
// A key's inputs stay in order: an input of a key that is loading (or
// waits to) is parked behind the key's earlier inputs, and when the key
// has loaded (or failed to) they go, in order, to the backlog, which is
// taken before any new input (Accepting is false while it is not empty).
// Inputs parked are at most Config.Parked (≤ 1: one, the synchronous
// behaviour): they are messages the worker already holds (counted by the
// input's max_ack_pending), and past the limit the input stops until a
// load ends.
//
// Room: a load that starts unloads the least recently used keys until its
// key fits in the quota, and keeps that room while in flight
// (keyCore.loading). A dirty victim needs a snapshot slot; with none free
// the load waits for one, at most SlotWait (the loads behind it wait too:
// they start in order), then its inputs go back (ErrStalled).
//
// The fence: no load starts once it is lost (a load claims its key, a
// write); the inputs of the loads not started go back at once, those of
// a load in flight when it answers (the key is known then, its inputs
// nak'ed unapplied).

// loadOp is a key being loaded, or waiting to be: the inputs that wait
// for it, in delivery order (the first asked for it).
type loadOp[M any] struct {
	key     string
	items   []*current[M]
	started bool // its Load was emitted
	// victim is the dirty key unloaded to make room whose save waits for
	// a snapshot slot, until deadline ("": none).
	victim   string
	deadline time.Time
}

// Loading reports how many keys are loading (their Load emitted, not
// answered) and how many inputs wait for loads.
func (m *Machine[M, O]) Loading() (loads, parked int) { return m.started, m.parked }

// take starts on an input whose turn came (delivered, or taken from the
// backlog): it waits behind its key's load if the key is loading,
// applies to the key if it is loaded, and asks for the key otherwise.
func (m *Machine[M, O]) take(c *current[M]) {
	if c.req == nil && m.fenced {
		m.refuse(c.msg, c.key, c.seq, Fail{Disp: Nak, Err: ErrFenced})
		return
	}
	if c.req == nil && m.takenLetter(c.key, c.msg, c.seq) {
		return
	}
	if lo, ok := m.loads[c.key]; ok {
		lo.items = append(lo.items, c)
		m.parked++
		return
	}
	s, loaded := m.keys[c.key]
	if c.req != nil {
		switch {
		case loaded:
			m.use(s)
			m.emit(Action[M, O]{Kind: ActServe, Key: c.key, Ref: c.req.Ref})
		case m.fenced:
			// Loading would claim the key (a write): refused.
			m.emit(Action[M, O]{Kind: ActServe, Key: c.key, Ref: c.req.Ref, Err: ErrFenced})
		default:
			m.queueLoad(c)
		}
		return
	}
	switch {
	case loaded:
		m.core.stale(c.key, s.lastSeq)
	case m.core.unsure(c.key, c.seq):
		// The key waits for a message whose load failed, which may be
		// applied already (a stale duplicate delivery): load the key to
		// know; once loaded, this message is taken again and waits or
		// not.
		m.queueLoad(c)
		return
	}
	if m.wait(c.msg, c.key, c.seq) {
		return
	}
	if !loaded {
		m.queueLoad(c)
		return
	}
	m.cur = c
	m.use(s)
	m.admit(s)
}

// queueLoad asks for c's key: its load starts in turn.
func (m *Machine[M, O]) queueLoad(c *current[M]) {
	lo := &loadOp[M]{key: c.key, items: []*current[M]{c}}
	m.loads[c.key] = lo
	m.queue = append(m.queue, lo)
	m.parked++
	m.startLoads()
}

// startLoads starts the queued loads, in order, while fewer than Loads
// are in flight and each finds room — once the backlog is taken: a load
// that started before would make room by unloading the keys that just
// loaded for the backlog (the least recently used), and with a small
// quota the keys would load one another out for ever (sim seed 6).
func (m *Machine[M, O]) startLoads() {
	for len(m.queue) > 0 && len(m.backlog) == 0 && m.letter == nil && m.started < max(1, m.cfg.Loads) && !m.fenced && !m.done {
		lo := m.queue[0]
		if !m.makeRoom(lo) {
			return
		}
		m.queue[0] = nil
		m.queue = m.queue[1:]
		lo.started = true
		m.started++
		m.core.loading++
		m.emit(Action[M, O]{Kind: ActLoad, Key: lo.key, Load: lo.items[0].opts})
	}
}

// makeRoom unloads the least recently used keys until lo's key fits, and
// reports whether it does; not yet when a dirty victim waits for a
// snapshot slot, or the loads in flight hold all the room but the key of
// the message in progress.
func (m *Machine[M, O]) makeRoom(lo *loadOp[M]) bool {
	if lo.victim != "" {
		if m.core.flying >= m.cfg.Slots {
			return false
		}
		if v, ok := m.keys[lo.victim]; ok && v.evicting && v.dirty && !v.saving {
			m.handoff(v)
		}
		lo.victim, lo.deadline = "", time.Time{}
	}
	for m.core.full() {
		k := m.core.victim()
		if k == nil || (m.cur != nil && m.cur.key == k.key) {
			return false // all the room is the loads' in flight, or the message in progress's
		}
		v := m.keys[k.key]
		drop, save := m.core.unload(v.keyState)
		m.emit(Action[M, O]{Kind: ActLive, Key: v.key, Delta: -1})
		switch {
		case drop:
			m.drop(v)
		case save && m.core.flying >= m.cfg.Slots:
			lo.victim, lo.deadline = v.key, m.now.Add(m.cfg.SlotWait)
			return false
		case save:
			m.handoff(v)
		}
	}
	return true
}

// loaded answers a Load: the key joins the loaded keys and its inputs go
// to the backlog, or, when it failed, they are refused or taken again.
func (m *Machine[M, O]) loaded(l Loaded) error {
	lo, ok := m.loads[l.Key]
	if !ok || !lo.started {
		return fmt.Errorf("machine: unexpected load of key %q", l.Key)
	}
	delete(m.loads, l.Key)
	m.started--
	m.core.loading--
	if l.Fail != nil {
		m.failLoad(lo, *l.Fail)
		return nil
	}
	m.parked -= len(lo.items)
	m.shrink(1, "") // a key brought back meanwhile may have taken its room
	s := &slot[M, O]{keyState: &keyState{key: l.Key, lastSeq: l.LastSeq}, idx: len(m.all), due: dueEntry{idx: -1}}
	s.out.perKey = m.cfg.KeyInFlight
	m.keys[l.Key] = s
	m.all = append(m.all, s)
	m.core.add(s.keyState)
	m.emit(Action[M, O]{Kind: ActLive, Key: l.Key, Delta: 1})
	m.core.stale(l.Key, l.LastSeq)
	// Fenced meanwhile: take refuses them (the messages go back unapplied).
	m.backlog = append(m.backlog, lo.items...)
	return nil
}

// failLoad refuses the input that asked for lo's key with f, and deals
// with the inputs parked behind it: after a transient failure a message
// waits (nak) for the failed one; otherwise each is taken again (and
// loads the key for itself); after a fatal one they all go back.
func (m *Machine[M, O]) failLoad(lo *loadOp[M], f Fail) {
	m.parked -= len(lo.items)
	c := lo.items[0]
	if c.req != nil {
		m.emit(Action[M, O]{Kind: ActServe, Key: c.key, Ref: c.req.Ref, Err: f.Err})
	} else {
		m.core.loadFailed(c.key, c.seq, f.Disp == Nak, m.now)
		m.refuse(c.msg, c.key, c.seq, f)
	}
	for _, c := range lo.items[1:] {
		switch {
		case m.done && c.req != nil:
			m.emit(Action[M, O]{Kind: ActServe, Key: c.key, Ref: c.req.Ref, Err: f.Err})
		case m.done:
			m.emit(Action[M, O]{Kind: ActNak, Key: c.key, Msg: c.msg, Seq: c.seq, Err: f.Err})
		case c.req == nil && f.Disp == Nak && m.wait(c.msg, c.key, c.seq):
		default:
			m.backlog = append(m.backlog, c)
		}
	}
}

// slotWaitOver fails the load that waited for a snapshot slot past
// SlotWait: its victim is saved as soon as a slot frees, and its inputs
// come back later.
func (m *Machine[M, O]) slotWaitOver() {
	if len(m.queue) == 0 {
		return
	}
	lo := m.queue[0]
	if lo.victim == "" || m.now.Before(lo.deadline) {
		return
	}
	if v, ok := m.keys[lo.victim]; ok {
		m.saveLater(v)
	}
	m.queue[0] = nil
	m.queue = m.queue[1:]
	delete(m.loads, lo.key)
	err := fmt.Errorf("processor: unload key %q: %w: no snapshot slot within %v", lo.victim, ErrStalled, m.cfg.SlotWait)
	m.failLoad(lo, Fail{Disp: Nak, Err: err})
}

// dropQueued gives back the inputs of the loads not started (the fence
// is lost: starting one would claim its key).
func (m *Machine[M, O]) dropQueued() {
	for _, lo := range m.queue {
		delete(m.loads, lo.key)
		m.parked -= len(lo.items)
		for _, c := range lo.items {
			if c.req != nil {
				m.emit(Action[M, O]{Kind: ActServe, Key: c.key, Ref: c.req.Ref, Err: ErrFenced})
			} else {
				m.refuse(c.msg, c.key, c.seq, Fail{Disp: Nak, Err: ErrFenced})
			}
		}
	}
	clear(m.queue)
	m.queue = m.queue[:0]
}

// resume takes the inputs whose keys loaded (or failed to), in order,
// while no message is in progress: they go before any new input.
func (m *Machine[M, O]) resume() {
	for m.cur == nil && m.letter == nil && len(m.backlog) > 0 && !m.done {
		c := m.backlog[0]
		m.backlog[0] = nil
		m.backlog = m.backlog[1:]
		m.take(c)
	}
}
