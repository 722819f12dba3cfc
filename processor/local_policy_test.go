package processor

import (
	"container/list"
	"testing"
)

// policyCache is the local tier's recency list alone: capacity keys in
// memory, a key read back inserted where the insertion policy says, the
// back one evicted when one too many are in memory.
type policyCache struct {
	capacity int
	lru      list.List
	at       map[int]*list.Element
	known    map[int]bool // every key used (the tier's keys: in memory or on disk)
	ins      insertion
}

func newPolicyCache(capacity int) *policyCache {
	return &policyCache{capacity: capacity, at: map[int]*list.Element{}, known: map[int]bool{}}
}

// use accesses key and reports whether it was a hit.
func (c *policyCache) use(key int) bool {
	c.known[key] = true
	if el, ok := c.at[key]; ok {
		c.lru.MoveToFront(el)
		c.ins.access(true, len(c.known))
		return true
	}
	c.ins.access(false, len(c.known))
	var el *list.Element
	if c.ins.back {
		el = c.lru.PushBack(key)
	} else {
		el = c.lru.PushFront(key)
	}
	c.at[key] = el
	if c.lru.Len() > c.capacity {
		victim := c.lru.Back()
		if victim == el {
			victim = victim.Prev()
		}
		delete(c.at, victim.Value.(int))
		c.lru.Remove(victim)
	}
	return false
}

// hitRate runs n accesses of keys from next and returns their hit rate.
func (c *policyCache) hitRate(n int, next func(i int) int) float64 {
	hits := 0
	for i := range n {
		if c.use(next(i)) {
			hits++
		}
	}
	return float64(hits) / float64(n)
}

// TestInsertionLoop: keys in a cycle twice as long as memory. LRU misses
// every one; the tier keeps a fixed part of the cycle and hits close to
// memory/keys (less the LRU probe window every probeEvery).
func TestInsertionLoop(t *testing.T) {
	const capacity, keys = 1000, 2000
	c := newPolicyCache(capacity)
	loop := func(i int) int { return i % keys }
	c.hitRate(20*keys, loop) // settle
	got := c.hitRate(40*keys, loop)
	want := 0.8 * float64(capacity) / keys * (probeEvery - 1) / probeEvery
	if got < want {
		t.Fatalf("hit rate over a cycle of %d keys with room for %d: %.3f, want ≥ %.3f (LRU: 0)", keys, capacity, got, want)
	}
	// The same cycle under LRU alone, for the record: nothing hits.
	lru := newPolicyCache(capacity)
	lru.ins.probe = true // a probe never ends below minWindow…
	lru.ins.n = -1 << 40 // …and this one never does: the mode stays LRU
	if r := lru.hitRate(40*keys, loop); r != 0 {
		t.Fatalf("LRU on a cycle longer than memory hit %.3f, want 0", r)
	}
	t.Logf("cycle of %d keys, room for %d: hit rate %.3f (LRU 0, best about %.3f)", keys, capacity, got, float64(capacity)/keys)
}

// TestInsertionShift: after a cycle that put the tier in back insertion,
// the keys in use change to a new set that fits in memory, used in a
// cycle: the tier goes back to LRU and hits nearly every time once the
// new keys are in memory (back insertion alone would keep the old keys
// and miss every new one for ever: inserted at the back, each new key is
// the next to go).
func TestInsertionShift(t *testing.T) {
	const capacity, keys = 1000, 2000
	c := newPolicyCache(capacity)
	c.hitRate(20*keys, func(i int) int { return i % keys })
	if !c.ins.back {
		t.Fatal("after a cycle longer than memory the tier inserts at the front, want the back")
	}
	const fresh = capacity / 2
	next := func(i int) int { return keys + i%fresh }
	c.hitRate(2*probeEvery*(keys+fresh), next) // at most probeEvery windows to adopt the new set
	if got := c.hitRate(20*fresh, next); got < 0.95 {
		t.Fatalf("hit rate on a new working set of %d keys with room for %d: %.3f, want ≥ 0.95", fresh, capacity, got)
	}
}

// TestInsertionRecency: a few hot keys used often among a stream of keys
// used once (a scan): hot keys stay in memory in either mode.
func TestInsertionRecency(t *testing.T) {
	const capacity = 1000
	c := newPolicyCache(capacity)
	const hot = 100
	n, hits, cold := 0, 0, 1<<20
	for i := range 200000 {
		key := i % hot
		if i%2 == 1 {
			key, cold = cold, cold+1
		} else {
			n++
			if c.use(key) {
				hits++
			}
			continue
		}
		c.use(key)
	}
	if rate := float64(hits) / float64(n); rate < 0.99 {
		t.Fatalf("hot keys' hit rate among a scan: %.3f, want ≥ 0.99", rate)
	}
}

// TestInsertionColdStart: a window in each mode where every key is new
// (all miss, a tie: it tells nothing) does not hold the tier in LRU for
// probeEvery windows: it probes the back again after the next window.
func TestInsertionColdStart(t *testing.T) {
	const keys = 2000
	var p insertion
	for range 2 * keys { // a window in LRU, the probe of the back: all new keys
		p.access(false, keys)
	}
	if p.back || p.probe || !p.measured[0] || !p.measured[1] {
		t.Fatalf("after a window in each mode, all missing: back %v probe %v measured %v; want LRU, no probe, both measured", p.back, p.probe, p.measured)
	}
	for range keys {
		p.access(false, keys)
	}
	if !p.back || !p.probe {
		t.Fatalf("one window after a tie: back %v probe %v, want a probe of the back", p.back, p.probe)
	}
}
