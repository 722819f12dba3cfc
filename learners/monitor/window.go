package monitor

import "sort"

// window holds the last (at most cap) values of a statistic in arrival
// order and sorted, for its empirical quantile. add costs O(cap) (two
// memmoves), quantile O(1); no allocation after construction.
type window struct {
	ring   []float64 // arrival order; when full, ring[start] is the oldest
	start  int
	sorted []float64
}

func newWindow(n int) window {
	return window{ring: make([]float64, 0, n), sorted: make([]float64, 0, n)}
}

func (w *window) len() int { return len(w.ring) }

func (w *window) reset() {
	w.ring, w.start, w.sorted = w.ring[:0], 0, w.sorted[:0]
}

// add appends v, dropping the oldest value when full.
func (w *window) add(v float64) {
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, v)
	} else {
		old := w.ring[w.start]
		w.ring[w.start] = v
		w.start = (w.start + 1) % len(w.ring)
		i := sort.SearchFloat64s(w.sorted, old)
		copy(w.sorted[i:], w.sorted[i+1:])
		w.sorted = w.sorted[:len(w.sorted)-1]
	}
	i := sort.SearchFloat64s(w.sorted, v)
	w.sorted = w.sorted[:len(w.sorted)+1]
	copy(w.sorted[i+1:], w.sorted[i:])
	w.sorted[i] = v
}

// quantile returns the empirical p-quantile: the value at 0-based rank
// (n + 1)·p − 1, linearly interpolated, so that a new value from the same
// distribution exceeds it with probability about 1 − p; the largest value
// when that rank is beyond it.
func (w *window) quantile(p float64) float64 {
	n := len(w.sorted)
	r := float64(n+1)*p - 1
	if r >= float64(n-1) {
		return w.sorted[n-1]
	}
	if r <= 0 {
		return w.sorted[0]
	}
	i := int(r)
	f := r - float64(i)
	return w.sorted[i] + f*(w.sorted[i+1]-w.sorted[i])
}

// values returns a copy of the values, oldest first.
func (w *window) values() []float64 {
	out := make([]float64, 0, len(w.ring))
	if len(w.ring) == cap(w.ring) {
		out = append(out, w.ring[w.start:]...)
		return append(out, w.ring[:w.start]...)
	}
	return append(out, w.ring...)
}

// load replaces the contents with vs (oldest first, len ≤ cap, finite).
func (w *window) load(vs []float64) {
	w.reset()
	for _, v := range vs {
		w.add(v)
	}
}
