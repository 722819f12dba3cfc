package kpcaview

import (
	"math"
	"slices"
)

// Observation is one projected observation of a key, with the learner's
// state after it.
type Observation struct {
	// X orders the observations: Unix milliseconds (live) or the row
	// number (replay). It must not decrease.
	X     int64
	Seq   uint64
	Z     []float64 // projection; the first Options.ZDims values are kept
	SPE   float64
	T2    float64
	Label string // class label or prediction, "" when none
	// Pred is a classifier stage's prediction, "" without one. When Pred
	// is set, Label is the observation's own label ("" when it carried
	// none) and the pairs of both make the classifier's accuracy and
	// confusion.
	Pred string
	// SPELimit and T2Limit are the control limits the output carried (a
	// pipeline's monitor:), 0 without them; Alarm its alarm ("spe", "t2",
	// "both" or "").
	SPELimit, T2Limit float64
	Alarm             string
	// Contrib names an alarm's variables, largest contribution first (an
	// output's contrib field; nil without). The Series tallies them
	// (View.Contrib); it does not keep a reference to the slice.
	Contrib []Contribution

	Explained   float64
	Eigenvalues []float64 // the first Options.EigDims values are kept
	Stored      int
	Basis       uint64
	// Swaps and Moves are the learner's dictionary replacements and
	// centroid moves per 1,000 messages (learners.Summary).
	Swaps, Moves float64
	// Learn is the time the learner took for the message, in seconds; Age
	// the time from the observation's timestamp to its processing (NaN or
	// negative: unknown).
	Learn, Age float64
	// In, Out and Dead are the pipeline's counters of messages in, outputs
	// and dead letters when the observation was processed (live only).
	In, Out, Dead int64
	// Backfill marks an observation read back from the output stream
	// (before the record started): its projection, statistics, labels,
	// limits, explained share and basis are known, the learner's state
	// (eigenvalues, dictionary, timings, counters) is not. Backfilled
	// observations come before the live ones.
	Backfill bool
}

// Options size a Series.
type Options struct {
	// Samples is the number of observations kept (default 1024).
	Samples int
	// ZDims and EigDims are the numbers of components and eigenvalues kept
	// (default 8 each).
	ZDims, EigDims int
	// Buckets is the number of buckets kept (default 600).
	Buckets int
	// Width is the width of a bucket in X units (default 1000: a second
	// when X is in milliseconds).
	Width int64
	// Thin keeps the whole stream: when a store fills, its resolution
	// halves instead of the oldest entries being dropped.
	Thin bool
	// PerBucket, when positive, keeps at most about this many samples per
	// bucket, evenly spaced by the previous bucket's count, so that the
	// kept samples span Samples/PerBucket buckets at any rate (live).
	PerBucket int
}

func (o Options) withDefaults() Options {
	if o.Samples <= 0 {
		o.Samples = 1024
	}
	if o.ZDims <= 0 {
		o.ZDims = 8
	}
	if o.EigDims <= 0 {
		o.EigDims = 8
	}
	if o.Buckets <= 0 {
		o.Buckets = 600
	}
	if o.Width <= 0 {
		o.Width = 1000
	}
	return o
}

// maxEvents bounds the basis changes kept.
const maxEvents = 256

// bucket aggregates the observations whose X falls in [x, x+width).
type bucket struct {
	x, width              int64
	n                     int
	speSum, t2Sum, speMax float64
	learnSum, ageSum      float64
	ages                  int
	explained             float64
	eig                   []float64
	stored                int
	basis                 uint64
	swaps, moves          float64
	in, out, dead         int64
	classified, correct   int // observations with a label and a prediction; those predicted right
}

// Event is a change of the published basis or a drift marker.
type Event struct {
	X    int64  `json:"x"`
	Kind string `json:"kind"` // "basis" or "drift"
	// From and To are the basis versions of a "basis" event.
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
}

// Series is the bounded record of one key. See the package comment.
type Series struct {
	o Options
	// samples: a ring (live) or a thinned array (Thin) of n entries; z
	// holds ZDims values per entry.
	sx       []int64
	sseq     []uint64
	sspe     []float64
	st2      []float64
	sz       []float64
	slabel   []string
	spred    []string
	salarm   []string
	head, n  int
	stride   int64 // Thin: keep every stride-th observation
	count    int64 // observations added
	zdims    int   // components seen (≤ ZDims)
	eigdims  int
	buckets  []bucket // ring or thinned, as the samples
	bhead    int
	bn       int
	width    int64
	events   []Event
	basis    uint64
	hasBasis bool
	labels   bool
	preds    bool
	alarms   bool    // some kept sample carried an alarm or limits
	backfill bool    // some observations were backfilled
	since    int64   // X of the first live observation (backfill set)
	live     bool    // a live observation was added
	speLim   float64 // the newest observation's limits (0: none)
	t2Lim    float64
	every    int // PerBucket: keep every every-th observation of a bucket
	inBucket int // observations in the current bucket
	contrib  contribTally
}

// NewSeries allocates a Series sized by o.
func NewSeries(o Options) *Series {
	o = o.withDefaults()
	s := &Series{o: o, stride: 1, width: o.Width,
		sx: make([]int64, o.Samples), sseq: make([]uint64, o.Samples), sspe: make([]float64, o.Samples),
		st2: make([]float64, o.Samples), sz: make([]float64, o.Samples*o.ZDims), slabel: make([]string, o.Samples), spred: make([]string, o.Samples),
		salarm: make([]string, o.Samples), buckets: make([]bucket, o.Buckets)}
	for i := range s.buckets {
		s.buckets[i].eig = make([]float64, o.EigDims)
	}
	return s
}

// Len returns the number of observations added.
func (s *Series) Len() int64 { return s.count }

// Add records one observation. It never keeps a reference to o's slices.
func (s *Series) Add(o *Observation) {
	s.count++
	s.zdims = max(s.zdims, min(len(o.Z), s.o.ZDims))
	s.eigdims = max(s.eigdims, min(len(o.Eigenvalues), s.o.EigDims))
	if o.Label != "" {
		s.labels = true
	}
	if o.Pred != "" {
		s.preds = true
	}
	s.speLim, s.t2Lim = o.SPELimit, o.T2Limit
	if o.Backfill {
		s.backfill = true
	} else if !s.live {
		s.live, s.since = true, o.X
	}
	if o.Alarm != "" || o.SPELimit > 0 {
		s.alarms = true
	}
	s.contrib.add(o)
	if s.hasBasis && o.Basis != s.basis {
		if len(s.events) == maxEvents {
			copy(s.events, s.events[1:])
			s.events = s.events[:maxEvents-1]
		}
		s.events = append(s.events, Event{X: o.X, Kind: "basis", From: s.basis, To: o.Basis})
	}
	s.basis, s.hasBasis = o.Basis, true
	newBucket := s.addToBucket(o)
	if s.o.PerBucket > 0 {
		if newBucket {
			s.every = 1
			if s.bn > 1 {
				prev := s.buckets[(s.bhead+s.bn-2)%s.o.Buckets].n
				s.every = max(1, (prev+s.o.PerBucket-1)/s.o.PerBucket)
			}
			s.inBucket = 0
		}
		s.inBucket++
		if (s.inBucket-1)%s.every != 0 || (s.bn == 1 && s.inBucket > s.o.PerBucket) {
			return // the first bucket, with no rate yet, keeps its first PerBucket
		}
	}
	s.addSample(o)
}

func (s *Series) addSample(o *Observation) {
	if s.o.Thin && (s.count-1)%s.stride != 0 {
		return
	}
	if s.o.Thin && s.n == s.o.Samples {
		// Keep every other sample and double the stride.
		k := 0
		for i := 0; i < s.n; i += 2 {
			s.moveSample(k, i)
			k++
		}
		s.n = k
		s.stride *= 2
		if (s.count-1)%s.stride != 0 {
			return
		}
	}
	i := nextSlot(s.o.Thin, &s.head, &s.n, s.o.Samples)
	s.sx[i], s.sseq[i], s.sspe[i], s.st2[i], s.slabel[i], s.spred[i], s.salarm[i] = o.X, o.Seq, o.SPE, o.T2, o.Label, o.Pred, o.Alarm
	z := s.sz[i*s.o.ZDims : (i+1)*s.o.ZDims]
	clear(z)
	copy(z, o.Z)
}

// nextSlot returns the slot to write next in a store of size slots that
// holds *n from *head on: the next one after them when thin (the caller
// made room by thinning), else the ring's next, overwriting the oldest
// once the ring is full.
func nextSlot(thin bool, head, n *int, size int) int {
	if thin {
		*n++
		return *n - 1
	}
	i := (*head + *n) % size
	if *n < size {
		*n++
	} else {
		*head = (*head + 1) % size
	}
	return i
}

func (s *Series) moveSample(dst, src int) {
	if dst == src {
		return
	}
	s.sx[dst], s.sseq[dst], s.sspe[dst], s.st2[dst], s.slabel[dst], s.spred[dst], s.salarm[dst] = s.sx[src], s.sseq[src], s.sspe[src], s.st2[src], s.slabel[src], s.spred[src], s.salarm[src]
	d := s.o.ZDims
	copy(s.sz[dst*d:(dst+1)*d], s.sz[src*d:(src+1)*d])
}

// last returns the newest bucket, or nil.
func (s *Series) last() *bucket {
	if s.bn == 0 {
		return nil
	}
	if s.o.Thin {
		return &s.buckets[s.bn-1]
	}
	return &s.buckets[(s.bhead+s.bn-1)%s.o.Buckets]
}

// addToBucket adds o to its bucket and reports whether it opened one.
func (s *Series) addToBucket(o *Observation) bool {
	opened := false
	start := o.X - mod(o.X, s.width)
	b := s.last()
	if b == nil || start >= b.x+b.width {
		if s.o.Thin && s.bn == s.o.Buckets {
			s.mergeBuckets()
			start = o.X - mod(o.X, s.width)
			b = s.last()
		}
	}
	if b == nil || start >= b.x+b.width {
		b = &s.buckets[nextSlot(s.o.Thin, &s.bhead, &s.bn, s.o.Buckets)]
		eig := b.eig
		clear(eig)
		*b = bucket{x: start, width: s.width, eig: eig}
		opened = true
	}
	b.n++
	b.speSum += o.SPE
	b.t2Sum += o.T2
	b.speMax = max(b.speMax, o.SPE)
	if o.Pred != "" && o.Label != "" {
		b.classified++
		if o.Pred == o.Label {
			b.correct++
		}
	}
	b.explained, b.basis = o.Explained, o.Basis
	if o.Backfill {
		return opened // no learner state
	}
	b.learnSum += o.Learn
	if o.Age >= 0 {
		b.ageSum += o.Age
		b.ages++
	}
	b.stored, b.swaps, b.moves = o.Stored, o.Swaps, o.Moves
	b.in, b.out, b.dead = o.In, o.Out, o.Dead
	clear(b.eig)
	copy(b.eig, o.Eigenvalues)
	return opened
}

// mergeBuckets doubles the bucket width (Thin): buckets that fall in the
// same bucket of the new width are merged, keeping the later one's state.
func (s *Series) mergeBuckets() {
	w := 2 * s.width
	k := -1
	for i := range s.bn {
		src := s.buckets[i] // a copy; its eig is bucket i's array
		x := src.x - mod(src.x, w)
		if k >= 0 && s.buckets[k].x == x {
			a := &s.buckets[k]
			a.n += src.n
			a.speSum += src.speSum
			a.t2Sum += src.t2Sum
			a.speMax = max(a.speMax, src.speMax)
			a.learnSum += src.learnSum
			a.ageSum += src.ageSum
			a.ages += src.ages
			a.explained, a.stored, a.basis, a.swaps, a.moves = src.explained, src.stored, src.basis, src.swaps, src.moves
			a.in, a.out, a.dead = src.in, src.out, src.dead
			a.classified += src.classified
			a.correct += src.correct
			copy(a.eig, src.eig)
			continue
		}
		k++ // k ≤ i: bucket k was read already
		eig := s.buckets[k].eig
		copy(eig, src.eig)
		src.eig, src.x, src.width = eig, x, w
		s.buckets[k] = src
	}
	s.bn = k + 1
	s.width = w
}

func mod(x, w int64) int64 {
	m := x % w
	if m < 0 {
		m += w
	}
	return m
}

// Limits are the control limits of the novelty scores: the ones the
// newest output carried (Source "monitor": a pipeline's monitor:, at its
// level), else the Q-quantile of the kept samples' SPE and T² (Source
// "quantile").
type Limits struct {
	Q      float64 `json:"q"`
	Source string  `json:"source"`
	SPE    float64 `json:"spe"`
	T2     float64 `json:"t2"`
	// SPEOver and T2Over count the kept samples marked on each chart
	// (View.Marked): above the limit, or alarmed with a monitor's limits.
	SPEOver int `json:"spe_over"`
	T2Over  int `json:"t2_over"`
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the finite values of xs
// by linear interpolation between order statistics (0 when none). It does
// not modify xs.
func Quantile(xs []float64, q float64) float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	q = min(max(q, 0), 1)
	p := q * float64(len(v)-1)
	i := int(p)
	if i+1 >= len(v) {
		return v[len(v)-1]
	}
	f := p - float64(i)
	return v[i]*(1-f) + v[i+1]*f
}

// ControlLimits computes the q-quantile limits of spe and t2 and counts
// the values above them.
func ControlLimits(spe, t2 []float64, q float64) Limits {
	return countOver(Limits{Q: q, Source: "quantile", SPE: Quantile(spe, q), T2: Quantile(t2, q)}, spe, t2)
}

// countOver counts the values of spe and t2 above l's limits.
func countOver(l Limits, spe, t2 []float64) Limits {
	for _, v := range spe {
		if v > l.SPE {
			l.SPEOver++
		}
	}
	for _, v := range t2 {
		if v > l.T2 {
			l.T2Over++
		}
	}
	return l
}

// DriftRule marks a bucket as the start of a drift when its mean SPE
// stands out from the buckets before it: with ref the median and mad the
// median absolute deviation of the mean SPE of the (at most) Window
// buckets before it, at least Min of them,
//
//	spe > Factor·ref  and  (spe − ref) / max(1.4826·mad, ref/50) > Z,
//
// and the bucket before it was not marked so itself: one marker per
// episode. The ratio alone misses the change back to a quieter structure
// after a noisier one (the demo's two structures differ 2.6× in SPE and
// the change spikes 2.5–7× over the level before it), and a long window
// spanning both levels hides the spike in its median; the robust z-score
// over a short window ignores the noise of a steady level (and the level
// shift itself once the window holds it), the ratio ignores tiny shifts
// of a nearly constant SPE.
type DriftRule struct {
	Window, Min int
	Factor, Z   float64
}

// DefaultDrift is the rule of the page and the report: a window of 10
// buckets (10 s live, 10 × the bucket width in a replay), from the 5th
// bucket of a record on.
var DefaultDrift = DriftRule{Window: 10, Min: 5, Factor: 1.5, Z: 8}

// Markers returns the indices of the buckets that start a drift episode,
// given the buckets' mean SPE in order.
func (r DriftRule) Markers(spe []float64) []int {
	var out []int
	above := false
	dev := make([]float64, 0, r.Window)
	for i := range spe {
		lo := max(0, i-r.Window)
		if i-lo < max(1, r.Min) {
			continue
		}
		ref := Quantile(spe[lo:i], 0.5)
		dev = dev[:0]
		for _, v := range spe[lo:i] {
			dev = append(dev, math.Abs(v-ref))
		}
		scale := max(1.4826*Quantile(dev, 0.5), ref/50)
		now := ref > 0 && spe[i] > r.Factor*ref && (spe[i]-ref)/scale > r.Z
		if now && !above {
			out = append(out, i)
		}
		above = now
	}
	return out
}

// SampleCols are the kept samples, oldest first, as columns.
type SampleCols struct {
	X   []int64     `json:"x"`
	Seq []uint64    `json:"seq"`
	SPE []float64   `json:"spe"`
	T2  []float64   `json:"t2"`
	Z   [][]float64 `json:"z"` // Z[i] is component i+1's column
	// Label is the class label or prediction of each sample, absent when
	// no sample carried one.
	Label []string `json:"label,omitempty"`
	// Pred is the classifier's prediction of each sample, absent without a
	// classifier stage; where it is set, Label is the sample's own label
	// ("" when it had none).
	Pred []string `json:"pred,omitempty"`
	// Alarm is each sample's alarm as its output carried it ("spe", "t2",
	// "both" or ""), absent unless the outputs carry a monitor's limits.
	Alarm []string `json:"alarm,omitempty"`
}

// BucketCols are the buckets, oldest first, as columns. SPE and T2 are
// means over the bucket's observations; the learner's state (Explained,
// Eig, Stored, Basis, Swaps, Moves) and the pipeline counters (In, Out,
// Dead) are those after its last observation; Learn and Age are mean
// seconds (Age 0 when no observation carried a timestamp).
type BucketCols struct {
	X         []int64     `json:"x"`
	Width     []int64     `json:"width"`
	N         []int       `json:"n"`
	SPE       []float64   `json:"spe"`
	SPEMax    []float64   `json:"spe_max"`
	T2        []float64   `json:"t2"`
	Explained []float64   `json:"explained"`
	Eig       [][]float64 `json:"eig"` // Eig[i] is eigenvalue i+1's column
	Stored    []int       `json:"stored"`
	Basis     []uint64    `json:"basis"`
	Swaps     []float64   `json:"swaps"`
	Moves     []float64   `json:"moves"`
	Learn     []float64   `json:"learn"`
	Age       []float64   `json:"age"`
	In        []int64     `json:"in"`
	Out       []int64     `json:"out"`
	Dead      []int64     `json:"dead"`
	// Classified counts the bucket's observations with both a label and
	// a prediction, Correct those predicted right (absent without
	// predictions).
	Classified []int `json:"classified,omitempty"`
	Correct    []int `json:"correct,omitempty"`
}

// View is a JSON-ready copy of a Series.
type View struct {
	// Count is the number of observations added; Stride the spacing of
	// the kept samples (1 live; a power of two in a thinned Series).
	Count   int64      `json:"count"`
	Stride  int64      `json:"stride"`
	Samples SampleCols `json:"samples"`
	Buckets BucketCols `json:"buckets"`
	Limits  Limits     `json:"limits"`
	// Since, when set, is the X from which the record has the learner's
	// state (eigenvalues, dictionary, timings, counters): the observations
	// before it were read back from the output stream.
	Since int64 `json:"since,omitempty"`
	// Events are the basis changes and the drift markers, in order of X.
	Events []Event `json:"events"`
	// Contrib tallies the variables named by the alarms (all of the
	// key's, not only the kept samples'); omitted when none named any.
	Contrib *ContribView `json:"contrib,omitempty"`
}

// View returns a copy of the record with control limits at quantile q and
// drift markers by rule.
func (s *Series) View(q float64, rule DriftRule) *View {
	v := &View{Count: s.count, Stride: s.stride, Contrib: s.contrib.view()}
	if s.backfill {
		v.Since = s.since
		if !s.live {
			v.Since = math.MaxInt64 // nothing live yet
		}
	}
	sc := &v.Samples
	sc.X, sc.Seq = make([]int64, s.n), make([]uint64, s.n)
	sc.SPE, sc.T2 = make([]float64, s.n), make([]float64, s.n)
	sc.Z = make([][]float64, s.zdims)
	for c := range sc.Z {
		sc.Z[c] = make([]float64, s.n)
	}
	if s.labels || s.preds {
		sc.Label = make([]string, s.n)
	}
	if s.preds {
		sc.Pred = make([]string, s.n)
	}
	if s.alarms {
		sc.Alarm = make([]string, s.n)
	}
	for j := range s.n {
		i := (s.head + j) % s.o.Samples
		sc.X[j], sc.Seq[j], sc.SPE[j], sc.T2[j] = s.sx[i], s.sseq[i], finite(s.sspe[i]), finite(s.st2[i])
		for c := range sc.Z {
			sc.Z[c][j] = finite(s.sz[i*s.o.ZDims+c])
		}
		if sc.Label != nil {
			sc.Label[j] = s.slabel[i]
		}
		if s.preds {
			sc.Pred[j] = s.spred[i]
		}
		if sc.Alarm != nil {
			sc.Alarm[j] = s.salarm[i]
		}
	}
	if s.speLim > 0 && s.t2Lim > 0 {
		v.Limits = Limits{Q: q, Source: "monitor", SPE: s.speLim, T2: s.t2Lim}
		v.Limits.SPEOver, v.Limits.T2Over = len(v.Marked("spe")), len(v.Marked("t2"))
	} else {
		v.Limits = ControlLimits(sc.SPE, sc.T2, q)
	}

	bc := &v.Buckets
	n := s.bn
	bc.X, bc.Width, bc.N = make([]int64, n), make([]int64, n), make([]int, n)
	bc.SPE, bc.SPEMax, bc.T2, bc.Explained = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	bc.Stored, bc.Basis, bc.Swaps, bc.Moves = make([]int, n), make([]uint64, n), make([]float64, n), make([]float64, n)
	bc.Learn, bc.Age = make([]float64, n), make([]float64, n)
	bc.In, bc.Out, bc.Dead = make([]int64, n), make([]int64, n), make([]int64, n)
	if s.preds {
		bc.Classified, bc.Correct = make([]int, n), make([]int, n)
	}
	bc.Eig = make([][]float64, s.eigdims)
	for c := range bc.Eig {
		bc.Eig[c] = make([]float64, n)
	}
	for j := range n {
		b := &s.buckets[(s.bhead+j)%s.o.Buckets]
		bc.X[j], bc.Width[j], bc.N[j] = b.x, b.width, b.n
		m := float64(max(b.n, 1))
		bc.SPE[j], bc.SPEMax[j], bc.T2[j] = finite(b.speSum/m), finite(b.speMax), finite(b.t2Sum/m)
		bc.Explained[j], bc.Stored[j], bc.Basis[j] = finite(b.explained), b.stored, b.basis
		bc.Swaps[j], bc.Moves[j], bc.Learn[j] = finite(b.swaps), finite(b.moves), finite(b.learnSum/m)
		if b.ages > 0 {
			bc.Age[j] = finite(b.ageSum / float64(b.ages))
		}
		bc.In[j], bc.Out[j], bc.Dead[j] = b.in, b.out, b.dead
		if s.preds {
			bc.Classified[j], bc.Correct[j] = b.classified, b.correct
		}
		for c := range bc.Eig {
			bc.Eig[c][j] = finite(b.eig[c])
		}
	}
	v.Events = append(v.Events, s.events...)
	for _, i := range rule.Markers(bc.SPE) {
		v.Events = append(v.Events, Event{X: bc.X[i], Kind: "drift"})
	}
	slices.SortStableFunc(v.Events, func(a, b Event) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
	if v.Events == nil {
		v.Events = []Event{}
	}
	return v
}

// Marked returns the indices of the kept samples that the novelty chart
// of which ("spe" or "t2") marks: with a monitor's limits (Source
// "monitor") and the samples' alarms, those whose output raised that
// alarm (under the limits of its time); else those above the view's
// limit. Limits.SPEOver and T2Over count them; the page (app.js) and the
// replay's PNG plots mark the same samples.
func (v *View) Marked(which string) []int {
	vals, lim := v.Samples.SPE, v.Limits.SPE
	if which == "t2" {
		vals, lim = v.Samples.T2, v.Limits.T2
	}
	al := v.Samples.Alarm
	mon := v.Limits.Source == "monitor" && al != nil
	var out []int
	for i, x := range vals {
		if (mon && (al[i] == which || al[i] == "both")) || (!mon && x > lim) {
			out = append(out, i)
		}
	}
	return out
}

// finite maps NaN and ±Inf to 0 (JSON has no such numbers).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
