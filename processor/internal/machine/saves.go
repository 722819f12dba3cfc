package machine

// Saves: a key's snapshot handed over when due, its landing, the tick that
// hands over the saves due by the policy (due.go), and the machine's end
// once nothing is held.

// maybeSnapshot hands s's snapshot over when the policy says it is due.
func (m *Machine[M, O]) maybeSnapshot(s *slot[M, O]) {
	if m.core.due(s.keyState, m.now, false, !m.fenced) {
		m.handoff(s)
	}
}

// saveSoon hands s's snapshot over now or, when a save of s is in flight
// or no slot is free, as soon as that save lands or a slot frees.
func (m *Machine[M, O]) saveSoon(s *slot[M, O]) {
	if !m.core.closing && !m.fenced && !s.saving && s.dirty && m.core.flying < m.cfg.Slots {
		m.handoff(s)
		return
	}
	m.saveLater(s)
}

// saveLater asks for s's snapshot as soon as its save in flight lands or a
// snapshot slot frees: s joins the keys that landed hands over (toSave),
// once. So a landing costs the keys waiting, not every key the worker
// knows (issue 30: with the local tier 10⁵–10⁶ keys, the walk of all of
// them after each save was most of a message's cost).
func (m *Machine[M, O]) saveLater(s *slot[M, O]) {
	s.saveNow = true
	if s.queued {
		return
	}
	s.queued = true
	m.toSave = append(m.toSave, s)
	// The keys dropped or handed over by other paths (tick, a load's
	// victim, the end) leave at the next landing; with none for a while,
	// the queue is swept here so that it stays within twice the keys known.
	if len(m.toSave) > 2*len(m.all)+16 {
		m.sweepToSave()
	}
}

// sweepToSave keeps, in order, the keys in toSave still known and still
// waiting for a save.
func (m *Machine[M, O]) sweepToSave() {
	keep := m.toSave[:0]
	for _, s := range m.toSave {
		if m.keys[s.key] == s && s.saveNow {
			keep = append(keep, s)
		} else {
			s.queued = false
		}
	}
	clear(m.toSave[len(keep):])
	m.toSave = keep
}

// handoff asks for a copy of s's state to be saved. While s has outputs
// that the output stream has not acknowledged, the save is held until
// they are: a snapshot never holds a message whose outputs could still be
// lost. A held job counts as in flight.
func (m *Machine[M, O]) handoff(s *slot[M, O]) {
	j := m.core.handoff(s.keyState)
	m.unschedule(s)
	m.jobID++
	job := Job{ID: m.jobID, LastSeq: j.lastSeq, DirtySeq: j.dirtySeq}
	m.emit(Action[M, O]{Kind: ActSnapshot, Key: s.key, Job: job, Held: s.out.hold(job)})
}

// landed applies the outcome of a save.
func (m *Machine[M, O]) landed(l SaveLanded) {
	if l.Outcome == Fenced {
		m.fence()
	}
	s, ok := m.keys[l.Key]
	if !ok {
		return
	}
	nx := m.core.landed(s.keyState, job{lastSeq: l.Job.LastSeq, dirtySeq: l.Job.DirtySeq}, l.Outcome, m.now)
	m.schedule(s) // dirty again while it saved: due by the policy in turn
	switch nx {
	case nextSave:
		m.saveSoon(s)
	case nextDrop:
		m.drop(s)
	case nextForget:
		if m.core.forget(s.keyState) {
			m.emit(Action[M, O]{Kind: ActLive, Key: s.key, Delta: -1})
		}
		m.drop(s)
	}
	m.handWaiting()
	m.startLoads()
	// What slots are left go on to the keys due by the policy, as the
	// tick would (after the keys that asked and a load's victim, which
	// hold up a request or a load): without this the saves due by time
	// were at most Slots a tick (8 a second a worker), whatever the
	// schedule asked for.
	m.handDue()
}

// handWaiting hands over, in the order they asked, the keys waiting for a
// snapshot slot while one is free: the keys in toSave that are dirty and
// have no save in flight. Those dropped meanwhile (unloaded, forgotten:
// a key loaded again is a new slot) or handed over by another path leave
// the queue; the rest stay, in order. It costs the entries it looks at,
// not the queue's length: the few kept among them move up to the first
// entry not looked at, and the queue starts there.
func (m *Machine[M, O]) handWaiting() {
	q := m.toSave
	kept, i := 0, 0 // q[:kept]: kept of the q[:i] looked at
	for ; i < len(q); i++ {
		if m.core.flying >= m.cfg.Slots || m.core.closing || m.fenced {
			break
		}
		s := q[i]
		switch {
		case m.keys[s.key] != s || !s.saveNow:
			s.queued = false
		case s.dirty && !s.saving:
			s.queued = false
			m.handoff(s)
		default:
			q[kept] = s // its save in flight, or clean until it changes again
			kept++
		}
	}
	copy(q[i-kept:i], q[:kept])
	clear(q[:i-kept])
	m.toSave = q[i-kept:]
}

// drop forgets an unloaded key.
func (m *Machine[M, O]) drop(s *slot[M, O]) {
	m.unschedule(s)
	delete(m.keys, s.key)
	last := m.all[len(m.all)-1]
	m.all[s.idx], last.idx = last, s.idx
	m.all = m.all[:len(m.all)-1]
	m.emit(Action[M, O]{Kind: ActUnload, Key: s.key})
}

// tick hands over the snapshots due by time, publishes again the outputs
// whose retry is due, gives up blocks too old and waits past deadlines.
func (m *Machine[M, O]) tick() {
	for _, x := range m.core.expire(m.now, m.cfg.BlockTTL) {
		m.emit(Action[M, O]{Kind: ActGaveUp, Key: x.key, Seq: x.seq, Waited: x.waited})
	}
	keep := m.retrying[:0]
	var due []*slot[M, O]
	for _, s := range m.retrying {
		switch {
		case len(s.out.groups) == 0 || m.keys[s.key] != s || s.out.retryAt.IsZero():
		case !m.now.Before(s.out.retryAt):
			due = append(due, s)
		default:
			keep = append(keep, s)
		}
	}
	clear(m.retrying[len(keep):])
	m.retrying = keep
	for _, s := range due {
		m.pump(s)
	}
	m.slotWaitOver()
	if m.closing {
		return
	}
	// The keys that asked for a save (their landings hand them over; this
	// is the safety net), then those due by the policy, earliest first:
	// the tick costs the keys it looks at, not the keys known (due.go).
	m.handWaiting()
	m.handDue()
}

// finishIfDone finishes after Close once nothing is left to wait for: the
// outputs are acknowledged (or hopeless: refused, or failed three times),
// and the final snapshots of the keys whose outputs are all acknowledged
// are saved — or the deadline passed, or the partition is fenced (then
// nothing more is written).
func (m *Machine[M, O]) finishIfDone() {
	if !m.closing || m.done || m.cur != nil || m.letter != nil || len(m.loads) > 0 || len(m.backlog) > 0 {
		return
	}
	if !m.fenced && m.now.Before(m.deadline) {
		waiting := false
		m.pruneClosers()
		for _, s := range m.closers {
			if s.out.hopeless() {
				continue // not waited for: replayed by the next owner
			}
			if len(s.out.groups) > 0 {
				waiting = true // its snapshot is held until its outputs are acknowledged
				continue
			}
			if !s.dirty || !m.cfg.OnShutdown {
				continue
			}
			waiting = true
			if !s.saving && m.core.flying < m.cfg.Slots {
				m.handoff(s)
			}
		}
		if waiting || m.core.flying != m.heldSaves() {
			return
		}
	}
	m.core.closing = true
	m.done = true
	m.emit(Action[M, O]{Kind: ActFinished, Pending: m.win.pending})
}

// heldSaves counts the snapshot jobs held for outputs (a key with one is
// saving: it is among the closers).
func (m *Machine[M, O]) heldSaves() int {
	n := 0
	for _, s := range m.closers {
		n += len(s.out.held)
	}
	return n
}

// The end waits for the keys with outputs not acknowledged, dirty keys
// (with OnShutdown) and saves in flight. Walking every key known on each
// step after Close cost O(keys) a step, with 10⁵–10⁶ keys known (the
// local tier) seconds of a shutdown for each save that landed; so Close
// lists, once, the keys that have outputs, are dirty or saving (the
// closers), and a key that gets an output or changes afterwards joins
// them (closerAdd, from applied and schedule, which every change of dirty
// or saving goes through). finishIfDone walks the closers, and drops
// those that are done.

// listClosers lists the closers when the input closes.
func (m *Machine[M, O]) listClosers() {
	for _, s := range m.all {
		m.closerAdd(s)
	}
}

// closerAdd lists s as a closer, after Close, when the end may wait for it.
func (m *Machine[M, O]) closerAdd(s *slot[M, O]) {
	if !m.closing || s.closer || m.keys[s.key] != s || !closerOf(s) {
		return
	}
	s.closer = true
	m.closers = append(m.closers, s)
}

// closerOf reports whether the end may wait for s.
func closerOf[M, O any](s *slot[M, O]) bool {
	return len(s.out.groups) > 0 || s.dirty || s.saving
}

// pruneClosers keeps, in order, the closers still known that the end may
// wait for.
func (m *Machine[M, O]) pruneClosers() {
	keep := m.closers[:0]
	for _, s := range m.closers {
		if m.keys[s.key] == s && closerOf(s) {
			keep = append(keep, s)
		} else {
			s.closer = false
		}
	}
	clear(m.closers[len(keep):])
	m.closers = keep
}
