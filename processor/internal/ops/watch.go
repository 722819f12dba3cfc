package ops

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/learners"
)

// Watched keys: the live page (/ui) and the series API record the outputs
// of a key only while someone looks at it. A request for a key's series
// watches it for WatchTTL; its record (a kpcaview.Series: bounded rings of
// the last watchSamples outputs, at most watchPerSecond of them per second,
// and of watchBuckets one-second buckets) is dropped when the watch
// expires. Nothing is kept for the other keys: the worker's hook costs one
// atomic load per message while no key is watched.
const (
	WatchTTL       = 30 * time.Second
	watchSamples   = 2048
	watchPerSecond = 64
	watchBuckets   = 600
	MaxWatched     = 16
)

// Watches is the set of watched keys. Its zero value is an empty set. The
// workers call Any and Get on every output (lock-free) and Record on a
// watched key's; the HTTP API starts and renews watches. Safe for
// concurrent use.
type Watches struct {
	n    atomic.Int32 // len(keys): the hook's fast path
	mu   sync.Mutex
	keys map[watchID]*Watch
	// list is a copy of keys, replaced on every change, that the hook
	// scans without a lock (at most MaxWatched entries).
	list atomic.Pointer[[]watchEntry]
}

type watchID struct{ pipeline, key string }

type watchEntry struct {
	id watchID
	kw *Watch
}

// publish refreshes list and n from keys; the caller holds mu.
func (ws *Watches) publish() {
	l := make([]watchEntry, 0, len(ws.keys))
	for id, kw := range ws.keys {
		l = append(l, watchEntry{id, kw})
	}
	ws.list.Store(&l)
	ws.n.Store(int32(len(l)))
}

// Watch is one watched key's record. The worker that owns the key adds to
// it (Record); API requests read it.
type Watch struct {
	mu    sync.Mutex
	s     *kpcaview.Series
	timer *time.Timer // expiry, reset by each request
	o     kpcaview.Observation
	sumAt time.Time // when swaps and moves were last read (Summary)
}

// sumEvery is how often the hook reads the learner's Summary for the
// dictionary's swap and move rates (running means over ~1,000 messages):
// a Summary costs more than the rest of the hook.
const sumEvery = 100 * time.Millisecond

// Any reports whether some key is watched: one atomic load.
func (ws *Watches) Any() bool { return ws.n.Load() != 0 }

// Get returns the watch of key of pipeline, or nil.
func (ws *Watches) Get(pipeline, key string) *Watch {
	l := ws.list.Load()
	if l == nil {
		return nil
	}
	for _, e := range *l {
		if e.id.key == key && e.id.pipeline == pipeline {
			return e.kw
		}
	}
	return nil
}

// Watched reports whether key of pipeline is watched.
func (ws *Watches) Watched(pipeline, key string) bool {
	return ws.Any() && ws.Get(pipeline, key) != nil
}

// Start starts or renews the watch of key of pipeline and returns its
// record; it refuses a new watch beyond MaxWatched. A new record starts
// with seed (the key's recent outputs read back from the output stream,
// oldest first), added before any live output.
func (ws *Watches) Start(pipeline, key string, seed []kpcaview.Observation) (*Watch, error) {
	id := watchID{pipeline, key}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if kw, ok := ws.keys[id]; ok {
		kw.timer.Reset(WatchTTL)
		return kw, nil
	}
	if len(ws.keys) >= MaxWatched {
		return nil, fmt.Errorf("processor: %w: %d keys are watched already (at most %d; a watch ends %s after its last request)",
			errTooManyWatches, len(ws.keys), MaxWatched, WatchTTL)
	}
	if ws.keys == nil {
		ws.keys = map[watchID]*Watch{}
	}
	kw := &Watch{s: kpcaview.NewSeries(kpcaview.Options{Samples: watchSamples, Buckets: watchBuckets, Width: 1000, PerBucket: watchPerSecond})}
	for i := range seed {
		kw.s.Add(&seed[i])
	}
	kw.timer = time.AfterFunc(WatchTTL, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if ws.keys[id] == kw {
			delete(ws.keys, id)
			ws.publish()
		}
	})
	ws.keys[id] = kw
	ws.publish()
	return kw, nil
}

// Stop ends every watch (and stops their timers).
func (ws *Watches) Stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for id, kw := range ws.keys {
		kw.timer.Stop()
		delete(ws.keys, id)
	}
	ws.publish()
}

// View returns the record as the page shows it (control limits at 0.99,
// drift by kpcaview.DefaultDrift).
func (kw *Watch) View() *kpcaview.View {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	return kw.s.View(0.99, kpcaview.DefaultDrift)
}

// Summarizer is the learner as the hook reads it.
type Summarizer interface {
	Summary(dst []float64) learners.Summary
}

// Sample is what the hook records of one message besides its outputs,
// read on the worker goroutine. Nothing in it is retained.
type Sample struct {
	// At is when the learner finished the message; Took how long it took.
	At   time.Time
	Took time.Duration
	// Learner is read for the dictionary's swap and move rates every
	// sumEvery; its Summary writes into Eigenvalues.
	Learner Summarizer
	// Eigenvalues are those of the last output (length k).
	Eigenvalues []float64
	// Stored is the dictionary's fill.
	Stored int
	// In, Out and Dead are the pipeline's counters.
	In, Out, Dead int64
}

// Record adds the outputs of one message to the record, under its lock.
func (kw *Watch) Record(s *Sample, outs []codec.Output) {
	now := s.At
	kw.mu.Lock()
	defer kw.mu.Unlock()
	o := &kw.o
	if now.Sub(kw.sumAt) >= sumEvery {
		sum := s.Learner.Summary(s.Eigenvalues)
		o.Swaps, o.Moves, kw.sumAt = sum.SwapsPer1000, sum.MovesPer1000, now
	}
	o.X, o.Eigenvalues, o.Stored = now.UnixMilli(), s.Eigenvalues, s.Stored
	o.Learn = s.Took.Seconds() / float64(len(outs))
	o.In, o.Out, o.Dead = s.In, s.Out, s.Dead
	for i := range outs {
		out := &outs[i]
		o.Seq, o.Z, o.SPE, o.T2, o.Basis, o.Explained = out.Seq, out.Z, out.SPE, out.T2, out.BasisVersion, out.Explained
		o.SPELimit, o.T2Limit, o.Alarm = out.SPELimit, out.T2Limit, out.Alarm
		o.Contrib = kpcaview.ContribOf(o.Contrib, out.Contrib, codecContrib)
		o.Age = -1
		if out.TS > 0 {
			o.Age = float64(now.UnixNano())/1e9 - out.TS
		}
		o.Label, o.Pred = labels(out)
		kw.s.Add(o)
	}
	o.Z, o.Eigenvalues = nil, nil // the caller's buffers
}

// labels returns what the page records of an output: without a
// classifier stage, its label (y); with one, the observation's own label
// ("" when it carried none) and the prediction, paired for the page's
// accuracy and confusion.
func labels(o *codec.Output) (label, pred string) {
	if o.Y.Kind != codec.ScalarNone {
		label = o.Y.Text()
	}
	if o.Pred.Kind != codec.ScalarNone {
		pred = o.Pred.Text()
	}
	return label, pred
}
