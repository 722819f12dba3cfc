package monitor

import (
	"math"
	"sort"
)

// window holds the last (at most cap) values of a statistic in arrival
// order and sorted, for its empirical quantile, and the newest half of
// them sorted as well (recentQuantile). add costs O(cap) (memmoves), the
// quantiles O(1); no allocation after construction.
type window struct {
	ring   []float64 // arrival order; when full, ring[start] is the oldest
	start  int
	sorted []float64
	recent []float64 // the newest ⌈cap/2⌉ values (fewer until that many arrived), sorted
}

func newWindow(n int) window {
	return window{ring: make([]float64, 0, n), sorted: make([]float64, 0, n), recent: make([]float64, 0, (n+1)/2)}
}

func (w *window) len() int { return len(w.ring) }

func (w *window) reset() {
	w.ring, w.start, w.sorted, w.recent = w.ring[:0], 0, w.sorted[:0], w.recent[:0]
}

// add appends v, dropping the oldest value when full.
func (w *window) add(v float64) {
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, v)
	} else {
		old := w.ring[w.start]
		w.ring[w.start] = v
		w.start = (w.start + 1) % len(w.ring)
		w.sorted = remove(w.sorted, old)
	}
	w.sorted = insert(w.sorted, v)
	if len(w.recent) == cap(w.recent) {
		// The value ⌈cap/2⌉ arrivals back leaves the newest half.
		w.recent = remove(w.recent, w.at(len(w.ring)-1-cap(w.recent)))
	}
	w.recent = insert(w.recent, v)
}

// at returns the value of arrival index k (0 the oldest held).
func (w *window) at(k int) float64 {
	return w.ring[(w.start+k)%len(w.ring)]
}

// insert inserts v into the sorted s (len(s) < cap(s)).
func insert(s []float64, v float64) []float64 {
	i := sort.SearchFloat64s(s, v)
	s = s[:len(s)+1]
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

// remove removes one value v from the sorted s (v is in s).
func remove(s []float64, v float64) []float64 {
	i := sort.SearchFloat64s(s, v)
	copy(s[i:], s[i+1:])
	return s[:len(s)-1]
}

// quantile returns the empirical p-quantile: the value at 0-based rank
// (n + 1)·p − 1, linearly interpolated, so that a new value from the same
// distribution exceeds it with probability about 1 − p; the largest value
// when that rank is beyond it.
func (w *window) quantile(p float64) float64 { return quantileOf(w.sorted, p) }

// recentQuantile is quantile over the newest ⌈cap/2⌉ values (all of
// them while the window holds fewer).
func (w *window) recentQuantile(p float64) float64 { return quantileOf(w.recent, p) }

// limit is the limit rule of the package comment ("Limits"): the
// whole window's p-quantile q, or the newest half's when that is larger
// and more of the newest half's h values lie above q than chance allows
// — more than h·(1 − p) + shiftZ·√(h·p·(1 − p)), the count expected when
// nothing moved plus shiftZ standard deviations. So a statistic whose
// distribution moved up within half a window raises the limit at once,
// one that moved down keeps the whole window's, and on a stationary
// process the noisier half-window estimate is rarely taken.
func (w *window) limit(p float64) float64 {
	q := w.quantile(p)
	h := float64(len(w.recent))
	if len(w.recent) == len(w.sorted) {
		return q
	}
	above := h - float64(sort.Search(len(w.recent), func(i int) bool { return w.recent[i] > q }))
	if above > h*(1-p)+shiftZ*math.Sqrt(h*p*(1-p)) {
		return max(q, w.recentQuantile(p))
	}
	return q
}

// shiftZ is the margin, in standard deviations of the count, by which
// the newest half must exceed its expected count above the whole
// window's quantile before its own quantile is taken (see the package
// comment, "Limits", for the measured choice).
const shiftZ = 0.5

// quantileOf is the empirical p-quantile of the sorted, non-empty s.
func quantileOf(s []float64, p float64) float64 {
	n := len(s)
	r := float64(n+1)*p - 1
	if r >= float64(n-1) {
		return s[n-1]
	}
	if r <= 0 {
		return s[0]
	}
	i := int(r)
	f := r - float64(i)
	return s[i] + f*(s[i+1]-s[i])
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
