package sim

import (
	"slices"
	"strings"
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// member is one instance of the fleet: its coordinator (modelled on
// processor/coord.go) and the partitions it runs.
type member struct {
	w       *world
	id      string
	inc     int // incarnation: bumped by a crash, so that nothing of the old process acts
	up      bool
	rate    float64 // its clock's rate (skew)
	paused  time.Duration
	started time.Time

	watching  bool
	watchNext time.Duration
	inNext    time.Duration // arrival of the last message sent to it (one connection: in order)
	outNext   time.Duration // arrival of the last message it sent
	synced    bool
	members   map[string]seenMember
	records   map[int]ownership.View
	parts     map[int]*part
	taking    map[int]bool // takes and abandons in flight: each partition's own, in parallel
	leaving   bool
	releasing bool
	left      bool
}

type seenMember struct {
	rev  uint64
	at   time.Time
	info ownership.Member
}

var epoch0 = time.Unix(1_000_000, 0)

// clock is the member's monotonic clock (skewed).
func (m *member) clock() time.Time {
	return epoch0.Add(time.Duration(float64(m.w.now) * m.rate))
}

// real converts a duration on m's clock to simulated time.
func (m *member) real(d time.Duration) time.Duration { return time.Duration(float64(d) / m.rate) }

// deliver runs fn on m if it is still incarnation inc; while m is paused
// everything waits for the pause to end.
func (m *member) deliver(inc int, fn func()) {
	if !m.up || m.inc != inc {
		return
	}
	if m.w.now < m.paused {
		m.w.at(m.paused-m.w.now, func() { m.deliver(inc, fn) })
		return
	}
	fn()
}

// after runs fn after d on m's clock.
func (m *member) after(d time.Duration, fn func()) {
	inc := m.inc
	m.w.at(m.real(d), func() { m.deliver(inc, fn) })
}

func (m *member) self() ownership.Member {
	return ownership.Member{ID: m.id, Started: m.started,
		Pipelines: []ownership.MemberPipeline{{Name: pipeline, Partitions: m.w.parts, Layout: "L"}}}
}

// start starts a process of m: heartbeat, then the watcher (initial
// values dated by ownership.Backdate), then the ownership loop.
func (m *member) start() {
	w := m.w
	m.up = true
	m.inc++
	m.started = epoch0.Add(w.now)
	m.synced, m.watching, m.leaving, m.left, m.releasing = false, false, false, false, false
	m.members, m.records = map[string]seenMember{}, map[int]ownership.View{}
	m.parts, m.taking = map[int]*part{}, map[int]bool{}
	w.trace(m.id + " starts")
	m.heartbeat(m.startWatch)
	m.after(leaseTTL/3, m.heartbeatLoop)
	m.after(leaseTTL/10, m.tickLoop)
}

type initial struct {
	keys []string
	es   []kvEntry
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// startWatch starts the watcher: the bucket as it stands (dated by
// ownership.Backdate from the entries' server times), then every update.
func (m *member) startWatch() {
	w := m.w
	w.call(m, svcKV, attemptTimeout, 0, func() (any, error) {
		m.watching = true
		m.watchNext = w.now
		var es []kvEntry
		var keys []string
		for _, k := range w.kvKeys() {
			if e := w.kv[k]; !e.deleted {
				keys = append(keys, k)
				es = append(es, *e)
			}
		}
		return initial{keys, es}, nil
	}, func(v any, err error) {
		if err != nil {
			m.watching = false
			m.after(200*time.Millisecond, m.startWatch)
			return
		}
		in := v.(initial)
		now := m.clock()
		var ref time.Time
		for _, e := range in.es {
			ref = later(ref, epoch0.Add(e.at))
		}
		for i, e := range in.es {
			m.observe(in.keys[i], e, ownership.Backdate(now, ref, epoch0.Add(e.at)))
		}
		m.synced = true
		m.evaluate()
	})
}

func (m *member) heartbeat(then func()) {
	w := m.w
	w.call(m, svcKV, min(snapshotTimeout, max(leaseTTL/3, 100*time.Millisecond)), 0, func() (any, error) {
		return w.kvWrite(memberKey(m.id), kvEntry{member: true, started: m.started}, 0, true)
	}, func(any, error) {
		if then != nil {
			then()
		}
	})
}

func (m *member) heartbeatLoop() {
	if m.leaving {
		return
	}
	m.heartbeat(nil)
	m.after(leaseTTL/3, m.heartbeatLoop)
}

func (m *member) tickLoop() {
	if m.left {
		return
	}
	m.evaluate()
	m.after(leaseTTL/10, m.tickLoop)
}

// observe records one watcher update, or a read's answer (refresh), seen
// at at on m's clock.
func (m *member) observe(key string, e kvEntry, at time.Time) {
	switch {
	case strings.HasPrefix(key, "members."):
		id := strings.TrimPrefix(key, "members.")
		if e.deleted {
			delete(m.members, id)
		} else if s, ok := m.members[id]; !ok || s.rev != e.rev {
			m.members[id] = seenMember{rev: e.rev, at: at, info: ownership.Member{ID: id, Started: e.started,
				Pipelines: []ownership.MemberPipeline{{Name: pipeline, Partitions: m.w.parts, Layout: "L"}}}}
		}
	case strings.HasPrefix(key, "partitions."):
		n := atoi(key[strings.LastIndexByte(key, '.')+1:])
		v := m.records[n]
		if v.Rev >= e.rev {
			// The model's watch may deliver an update before the initial
			// values; a read (coord.refresh) older than the view is
			// dropped, as coord.observe does since the fix of seed 10955
			// (before, it set the view back).
			return
		}
		v = ownership.View{Rev: e.rev, SeenAt: at}
		if !e.deleted {
			v.Exists, v.Rec = true, e.rec
		}
		m.records[n] = v
	}
	m.poke()
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = 10*n + int(c-'0')
	}
	return n
}

// poke evaluates soon (the coordinator's kick).
func (m *member) poke() {
	inc := m.inc
	m.w.at(0, func() { m.deliver(inc, m.evaluate) })
}

func (m *member) alive(now time.Time) []ownership.Member {
	out := []ownership.Member{m.self()}
	for id, s := range m.members {
		if id != m.id && now.Sub(s.at) < leaseTTL {
			out = append(out, s.info)
		}
	}
	slices.SortFunc(out, func(a, b ownership.Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// evaluate applies ownership.Decide to every partition (coord.evaluate).
func (m *member) evaluate() {
	if !m.synced || m.leaving {
		return
	}
	now := m.clock()
	alive := m.alive(now)
	n := m.w.parts
	views := make([]ownership.View, n)
	owners := make([]string, n)
	for i := range n {
		views[i] = m.records[i]
		if views[i].Exists {
			owners[i] = views[i].Rec.Owner
		}
		if m.parts[i] != nil {
			owners[i] = m.id
		}
	}
	cands, _ := ownership.Candidates(alive, pipeline, owners)
	targets := ownership.AssignTargets(cands, pipeline, owners)
	for i := range n {
		pt := m.parts[i]
		switch ownership.Decide(m.id, targets[i], views[i], pt != nil, now, leaseTTL) {
		case ownership.Take:
			if !m.taking[i] {
				m.take(i, views[i])
			}
		case ownership.Release:
			pt.requestStop()
		case ownership.Abandon:
			m.abandon(i, views[i])
		}
	}
}

// take writes {self, epoch+1, checkpoint} by compare-and-set on the
// revision seen and starts the partition (coord.take).
func (m *member) take(n int, v ownership.View) {
	w := m.w
	rec := ownership.Record{Owner: m.id, Epoch: 1, Checkpoint: 1}
	if v.Exists {
		rec.Epoch, rec.Checkpoint = v.Rec.Epoch+1, max(v.Rec.Checkpoint, 1)
	}
	granted := m.clock()
	m.taking[n] = true
	w.call(m, svcKV, takeTimeout, 0, func() (any, error) {
		return w.kvWrite(recordKey(n), kvEntry{rec: rec}, v.Rev, false)
	}, func(r any, err error) {
		m.taking[n] = false
		if err != nil {
			m.refresh(n)
			return
		}
		if m.leaving {
			m.releaseRecord(n, rec, r.(uint64), nil)
			return
		}
		w.trace(m.id + " takes partition " + itoa(n) + " epoch " + itoa(int(rec.Epoch)) + " at " + itoa(int(rec.Checkpoint)))
		pt := newPart(m, n, rec.Epoch, r.(uint64), rec.Checkpoint, granted)
		m.parts[n] = pt
		pt.run()
		m.evaluate()
	})
}

// abandon releases a record naming m that m does not run.
func (m *member) abandon(n int, v ownership.View) {
	if m.taking[n] {
		return
	}
	m.taking[n] = true
	m.releaseRecord(n, v.Rec, v.Rev, func(err error) {
		m.taking[n] = false
		if err != nil {
			m.refresh(n)
		}
	})
}

func (m *member) releaseRecord(n int, r ownership.Record, rev uint64, done func(error)) {
	w := m.w
	r.Owner = ""
	w.call(m, svcKV, takeTimeout, 0, func() (any, error) {
		return w.kvWrite(recordKey(n), kvEntry{rec: r}, rev, false)
	}, func(_ any, err error) {
		if done != nil {
			done(err)
		}
	})
}

// refresh reads a record after a compare-and-set on it failed.
func (m *member) refresh(n int) {
	w := m.w
	w.call(m, svcKV, takeTimeout, 0, func() (any, error) {
		e := w.kvRead(recordKey(n))
		if e == nil || e.deleted {
			return nil, errNotFound
		}
		return *e, nil
	}, func(v any, err error) {
		if err == nil {
			m.observe(recordKey(n), v.(kvEntry), m.clock())
		}
	})
}

// crash ends m's process at once: nothing more of it acts.
func (m *member) crash() {
	m.up = false
	m.inc++
	m.watching = false
	m.w.trace(m.id + " crashes")
}

// leave stops m gracefully: heartbeat removed, every partition stopped
// (final snapshots, records released).
func (m *member) leave() {
	w := m.w
	m.leaving = true
	w.call(m, svcKV, shutdownTimeout, 0, func() (any, error) {
		return w.kvWrite(memberKey(m.id), kvEntry{member: true, deleted: true}, 0, true)
	}, func(any, error) {})
	for _, n := range m.sortedParts() {
		m.parts[n].requestStop()
	}
	m.checkLeft()
}

func (m *member) sortedParts() []int {
	var out []int
	for n := range m.parts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// checkLeft finishes leaving once every partition stopped.
func (m *member) checkLeft() {
	if m.leaving && len(m.parts) == 0 && !m.left && !m.releasing {
		m.releasing = true
		m.releaseOwned(0)
	}
}

// releaseOwned releases, from partition n on, every record that still
// names m, read from the bucket stream's leader (coord.releaseOwned),
// then m has left.
func (m *member) releaseOwned(n int) {
	w := m.w
	if n >= w.parts {
		m.left = true
		w.trace(m.id + " left")
		return
	}
	w.call(m, svcKV, shutdownTimeout, 0, func() (any, error) {
		// At the leader (processor.leaderGet), never behind.
		if e := w.kv[recordKey(n)]; e != nil && !e.deleted {
			return *e, nil
		}
		return nil, errNotFound
	}, func(v any, err error) {
		if err != nil || v.(kvEntry).rec.Owner != m.id {
			m.releaseOwned(n + 1)
			return
		}
		e := v.(kvEntry)
		m.releaseRecord(n, e.rec, e.rev, func(error) { m.releaseOwned(n + 1) })
	})
}
