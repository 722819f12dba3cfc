package processor

// Where a key read back into memory goes in the local tier's recency list
// (issue 30). Plain LRU puts it at the front, the most recently used. When
// more keys are in use than fit in memory and they come in a cycle —
// devices reporting every T seconds, the round-robin of the bench — LRU is
// the worst policy there is: the key it evicts is the one needed soonest,
// every message misses memory and pays a local read, a decode, and (by
// batches) an encode and a local write. No policy does better on such a
// cycle than keeping a fixed part of it in memory, a hit rate of about
// memory/keys; inserting a key that comes back from disk at the back of
// the list instead (LRU insertion position, Qureshi et al., ISCA 2007)
// does that: the keys already in memory stay, the newcomer is the next to
// go unless it is used again first (a hit moves a key to the front, as in
// LRU). It is the wrong choice when the keys in use change to a new set
// that fits: the old ones would stay at the front for ever. So the tier
// measures both: it runs in the mode whose last measured window had the
// higher hit rate and, every probeEvery windows, runs one window in the
// other mode (time-multiplexed dueling). A loop then keeps about
// (probeEvery−1)/probeEvery of the best hit rate (the LRU probe window
// hits nothing), and a change of working set is adopted within
// probeEvery windows.

// probeEvery is how many windows the tier runs in one mode before it
// measures the other for a window.
const probeEvery = 8

// minWindow is the fewest accesses of a measured window.
const minWindow = 256

// insertion chooses where keys read back into memory go.
type insertion struct {
	back     bool       // the current mode: insert at the back (true) or the front (LRU)
	n, hits  int        // accesses and hits of the current window
	size     int        // accesses of the current window
	rate     [2]float64 // the hit rate of the last window in each mode: [front, back]
	measured [2]bool    // whether that mode has a window measured
	windows  int        // windows since the last probe
	probe    bool       // the current window is a probe of the other mode
}

// index is the slot of mode back in rate and measured.
func index(back bool) int {
	if back {
		return 1
	}
	return 0
}

// access counts one use of a key of a tier that knows keys (in memory
// and on disk): a hit (in memory) or a miss (read back). A window is at
// least as many accesses as there are keys when it starts, so that it
// spans a whole cycle of them: a shorter one would measure the part of a
// cycle that is in memory, or the part that is not.
func (p *insertion) access(hit bool, keys int) {
	if p.n == 0 {
		p.size = max(minWindow, keys)
	}
	p.n++
	if hit {
		p.hits++
	}
	if p.n < p.size {
		return
	}
	i := index(p.back)
	p.rate[i], p.measured[i] = float64(p.hits)/float64(p.n), true
	p.n, p.hits = 0, 0
	if p.probe {
		// The probe's window is over: keep the better mode (LRU on a tie,
		// and then probe again after the next window: both missing every
		// key tells nothing, as when every key is new).
		p.probe = false
		p.windows = 0
		p.back = p.rate[1] > p.rate[0]
		if p.rate[1] == p.rate[0] {
			p.windows = probeEvery - 1
		}
		return
	}
	p.windows++
	if p.windows >= probeEvery || !p.measured[index(!p.back)] {
		p.probe, p.back = true, !p.back
	}
}
