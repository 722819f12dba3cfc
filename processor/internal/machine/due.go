package machine

// The saves due by the policy (issue 30): the keys that a tick may hand
// over because of the time since they changed (Policy.Every) or the
// messages applied since their last handoff (Policy.EveryMessages) are
// kept in a heap ordered by when they become due, so that a tick costs
// the keys it hands over (and log n each), not a walk of every key the
// worker knows — with the local tier a worker knows 10⁵–10⁶ keys, and it
// ticks every Every/2.
//
// A key is in the heap exactly while it is known (not dropped), dirty,
// has no save in flight, and a rule can make it due: schedule is called
// after every change of those (a message applied, a reset, a handoff, a
// landing, a drop), so the heap holds at most one entry per key known and
// never a stale one. Its due time is when the key changed plus Every; a
// key that reached EveryMessages is due since it changed, and goes before
// every key due by time only (class 0 before class 1), so that the first
// entry not due means none behind it is, whatever the clock did. Equal
// entries leave in the order they were scheduled (ord). A key with a save
// in flight leaves the heap and comes back, if dirty, when it lands.

// dueEntry is a key's place in the heap (16 bytes a key). Every is the
// same for every key, so the time a key changed orders the keys due by
// time as well as those due by count: the entry keeps no time of its own.
type dueEntry struct {
	ord   uint64 // scheduling order among equal entries
	idx   int32  // in Machine.dues, or -1
	class int8   // 0: due by count, 1: by time
}

// dueBefore orders the heap: class, then when the key changed, then ord.
func dueBefore(a, b *keyState, ea, eb *dueEntry) bool {
	if ea.class != eb.class {
		return ea.class < eb.class
	}
	if !a.dirtyAt.Equal(b.dirtyAt) {
		return a.dirtyAt.Before(b.dirtyAt)
	}
	return ea.ord < eb.ord
}

// before reports whether heap entry i goes before entry j.
func (m *Machine[M, O]) before(i, j int) bool {
	a, b := m.dues[i], m.dues[j]
	return dueBefore(a.keyState, b.keyState, &a.due, &b.due)
}

// schedule puts s in the heap of saves due by the policy, moves it, or
// takes it out, as its state says now.
func (m *Machine[M, O]) schedule(s *slot[M, O]) {
	m.closerAdd(s) // every change of dirty or saving comes here
	p := m.cfg.Policy
	byCount := p.EveryMessages > 0 && s.since >= p.EveryMessages
	if m.keys[s.key] != s || !s.dirty || s.saving || (!byCount && p.Every <= 0) {
		m.unschedule(s)
		return
	}
	class := int8(1)
	if byCount {
		class = 0
	}
	e := &s.due
	if e.idx >= 0 && e.class == class {
		return // in place: a key's dirtyAt is set only while it is clean or saving, out of the heap
	}
	m.dueOrd++
	e.class, e.ord = class, m.dueOrd
	if e.idx < 0 {
		e.idx = int32(len(m.dues))
		m.dues = append(m.dues, s)
		m.dueUp(int(e.idx))
		return
	}
	m.dueFix(int(e.idx))
}

// unschedule takes s out of the heap, if there.
func (m *Machine[M, O]) unschedule(s *slot[M, O]) {
	i := int(s.due.idx)
	if i < 0 {
		return
	}
	last := len(m.dues) - 1
	m.dueSwap(i, last)
	m.dues[last] = nil
	m.dues = m.dues[:last]
	s.due.idx = -1
	if i < last {
		m.dueFix(i)
	}
}

// handDue hands over, earliest first, the keys due by the policy while a
// snapshot slot is free — not once the input closed (the end's own
// saves go then: finishIfDone).
func (m *Machine[M, O]) handDue() {
	for len(m.dues) > 0 && m.core.flying < m.cfg.Slots && !m.fenced && !m.closing && !m.core.closing {
		s := m.dues[0]
		if !m.core.due(s.keyState, m.now, false, true) {
			return // the earliest is not due: none is
		}
		m.handoff(s) // takes s out
	}
}

func (m *Machine[M, O]) dueSwap(i, j int) {
	m.dues[i], m.dues[j] = m.dues[j], m.dues[i]
	m.dues[i].due.idx, m.dues[j].due.idx = int32(i), int32(j)
}

func (m *Machine[M, O]) dueFix(i int) {
	if !m.dueDown(i) {
		m.dueUp(i)
	}
}

func (m *Machine[M, O]) dueUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.before(i, p) {
			return
		}
		m.dueSwap(i, p)
		i = p
	}
}

// dueDown moves entry i down while a child goes first, and reports
// whether it moved.
func (m *Machine[M, O]) dueDown(i int) bool {
	start, n := i, len(m.dues)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && m.before(r, c) {
			c = r
		}
		if !m.before(c, i) {
			break
		}
		m.dueSwap(i, c)
		i = c
	}
	return i > start
}
