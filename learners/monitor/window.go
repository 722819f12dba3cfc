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

// rank returns the position of v among the values as a fraction in
// [0, 1]: the share of values below v, ties counted half. For a v drawn
// from the same distribution as the values it is about uniform (mean ½,
// variance about 1/12). O(log n); 0.5 for an empty window.
func (w *window) rank(v float64) float64 {
	n := len(w.sorted)
	if n == 0 {
		return 0.5
	}
	lo := sort.SearchFloat64s(w.sorted, v)
	hi := lo
	if lo < n && w.sorted[lo] == v {
		hi = lo + sort.Search(n-lo, func(i int) bool { return w.sorted[lo+i] > v })
	}
	return float64(lo+hi) / float64(2*n)
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

// queue is the ring of pending observations, storage allocated once.
type queue struct {
	x       []float64 // n×d slots
	spe, t2 []float64
	lspe    []float64 // nil without the linear residual
	d       int
	head, n int
}

func newQueue(n, d int, linear bool) queue {
	q := queue{x: make([]float64, n*d), spe: make([]float64, n), t2: make([]float64, n), d: d}
	if linear {
		q.lspe = make([]float64, n)
	}
	return q
}

func (q *queue) cap() int { return len(q.spe) }

func (q *queue) reset() { q.head, q.n = 0, 0 }

// oldest returns the oldest entry (q.n > 0); its x is valid until the next push.
func (q *queue) oldest() (x []float64, spe, t2, lspe float64) {
	i := q.head
	if q.lspe != nil {
		lspe = q.lspe[i]
	}
	return q.x[i*q.d : (i+1)*q.d], q.spe[i], q.t2[i], lspe
}

func (q *queue) pop() {
	q.head = (q.head + 1) % q.cap()
	q.n--
}

// push appends a copy of x (q.n < cap).
func (q *queue) push(x []float64, spe, t2, lspe float64) {
	i := (q.head + q.n) % q.cap()
	copy(q.x[i*q.d:(i+1)*q.d], x)
	q.spe[i], q.t2[i] = spe, t2
	if q.lspe != nil {
		q.lspe[i] = lspe
	}
	q.n++
}

func (q *queue) values() []Pending {
	var out []Pending
	for k := range q.n {
		i := (q.head + k) % q.cap()
		p := Pending{X: append([]float64(nil), q.x[i*q.d:(i+1)*q.d]...), SPE: q.spe[i], T2: q.t2[i]}
		if q.lspe != nil {
			p.LSPE = q.lspe[i]
		}
		out = append(out, p)
	}
	return out
}

func (q *queue) load(ps []Pending) {
	q.reset()
	for _, p := range ps {
		q.push(p.X, p.SPE, p.T2, p.LSPE)
	}
}
