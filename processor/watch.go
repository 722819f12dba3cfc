package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// Watched keys: the live page (/ui) and the series API record the outputs
// of a key only while someone looks at it. A request for a key's series
// watches it for watchTTL; its record (a kpcaview.Series: bounded rings of
// the last watchSamples outputs, at most watchPerSecond of them per second,
// and of watchBuckets one-second buckets) is dropped when the watch
// expires. Nothing is kept for the other keys: the
// worker's hook costs one atomic load per message while no key is watched.
const (
	watchTTL       = 30 * time.Second
	watchSamples   = 2048
	watchPerSecond = 64
	watchBuckets   = 600
	maxWatched     = 16
)

// watches is the processor's set of watched keys.
type watches struct {
	n    atomic.Int32 // len(keys): the hook's fast path
	mu   sync.Mutex
	keys map[watchID]*keyWatch
	// list is a copy of keys, replaced on every change, that the hook
	// scans without a lock (at most maxWatched entries).
	list atomic.Pointer[[]watchEntry]
}

type watchEntry struct {
	id watchID
	kw *keyWatch
}

// publish refreshes list and n from keys; the caller holds mu.
func (ws *watches) publish() {
	l := make([]watchEntry, 0, len(ws.keys))
	for id, kw := range ws.keys {
		l = append(l, watchEntry{id, kw})
	}
	ws.list.Store(&l)
	ws.n.Store(int32(len(l)))
}

type watchID struct {
	pipe *pipeline
	key  string
}

// keyWatch is one watched key's record. The worker that owns the key adds
// to it; API requests read it.
type keyWatch struct {
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

// get returns the watch of key, or nil.
func (ws *watches) get(pl *pipeline, key string) *keyWatch {
	l := ws.list.Load()
	if l == nil {
		return nil
	}
	for _, e := range *l {
		if e.id.pipe == pl && e.id.key == key {
			return e.kw
		}
	}
	return nil
}

// watch starts or renews the watch of key and returns its record. A new
// record starts with seed (the key's recent outputs read back from the
// output stream, oldest first), added before any live output.
func (ws *watches) watch(pl *pipeline, key string, seed []kpcaview.Observation) (*keyWatch, error) {
	id := watchID{pl, key}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if kw, ok := ws.keys[id]; ok {
		kw.timer.Reset(watchTTL)
		return kw, nil
	}
	if len(ws.keys) >= maxWatched {
		return nil, fmt.Errorf("processor: %w: %d keys are watched already (at most %d; a watch ends %s after its last request)",
			errTooManyWatches, len(ws.keys), maxWatched, watchTTL)
	}
	if ws.keys == nil {
		ws.keys = map[watchID]*keyWatch{}
	}
	kw := &keyWatch{s: kpcaview.NewSeries(kpcaview.Options{Samples: watchSamples, Buckets: watchBuckets, Width: 1000, PerBucket: watchPerSecond})}
	for i := range seed {
		kw.s.Add(&seed[i])
	}
	kw.timer = time.AfterFunc(watchTTL, func() {
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

// watched reports whether key is watched.
func (ws *watches) watched(pl *pipeline, key string) bool {
	return ws.n.Load() != 0 && ws.get(pl, key) != nil
}

// stop ends every watch.
func (ws *watches) stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for id, kw := range ws.keys {
		kw.timer.Stop()
		delete(ws.keys, id)
	}
	ws.publish()
}

var errTooManyWatches = fmt.Errorf("too many watched keys")

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

// watchOut is the worker's hook: after the outputs of a message of e were
// published, it records them when e's key is watched. The learner started
// on the message at start and took took (so the hook reads no clock).
func (w *worker) watchOut(e *entry, start time.Time, took time.Duration) {
	ws := &w.p.watch
	if ws.n.Load() == 0 {
		return
	}
	kw := ws.get(e.pipe, e.key)
	if kw == nil {
		return
	}
	now := start.Add(took)
	st := &e.pipe.stats
	kw.mu.Lock()
	defer kw.mu.Unlock()
	o := &kw.o
	if now.Sub(kw.sumAt) >= sumEvery {
		sum := e.l.Summary(w.eig)
		o.Swaps, o.Moves, kw.sumAt = sum.SwapsPer1000, sum.MovesPer1000, now
	}
	// apply and applied left the eigenvalues of the last output in w.eig
	// and the dictionary's fill in e.stored.
	o.X, o.Eigenvalues, o.Stored = now.UnixMilli(), w.eig, e.stored
	o.Learn = took.Seconds() / float64(len(w.res.outs))
	o.In, o.Out, o.Dead = st.In.Load(), st.Out.Load(), st.DeadLettered.Load()
	for i := range w.res.outs {
		out := &w.res.outs[i]
		o.Seq, o.Z, o.SPE, o.T2, o.Basis, o.Explained = out.Seq, out.Z, out.SPE, out.T2, out.BasisVersion, out.Explained
		o.SPELimit, o.T2Limit, o.Alarm = out.SPELimit, out.T2Limit, out.Alarm
		o.Age = -1
		if out.TS > 0 {
			o.Age = float64(now.UnixNano())/1e9 - out.TS
		}
		o.Label, o.Pred = labels(out)
		kw.s.Add(o)
	}
	o.Z, o.Eigenvalues = nil, nil // the worker's buffers
}

// KeyInfo describes a key loaded on this instance (GET /api/v1/keys).
type KeyInfo struct {
	Key       string `json:"key"`
	Partition int    `json:"partition"`
	Seen      int64  `json:"seen"`
	LastSeq   uint64 `json:"last_seq"`
	Stored    int    `json:"stored"`
	Advice    string `json:"advice,omitempty"`
	Watched   bool   `json:"watched"`
}

// listKeys answers the "keys" control request on the worker goroutine:
// the loaded keys of pl (only key when set), as JSON.
func (w *worker) listKeys(pl *pipeline, key string) ([]byte, error) {
	var out []KeyInfo
	for _, k := range w.m.Keys() {
		e := w.keys[k.Key]
		if e == nil || e.pipe != pl || k.Unloading || (key != "" && k.Key != key) {
			continue
		}
		out = append(out, KeyInfo{Key: k.Key, Partition: w.part.num, Seen: e.l.Seen(), LastSeq: k.LastSeq, Stored: e.stored, Advice: e.advice})
	}
	return json.Marshal(out)
}

// Keys returns the keys of pipeline loaded on this instance, sorted.
func (p *Processor) Keys(ctx context.Context, pipeline string) ([]KeyInfo, error) {
	pl, err := p.pipeline(pipeline)
	if err != nil {
		return nil, err
	}
	var out []KeyInfo
	for i := range pl.parts {
		pt := pl.parts[i].Load()
		if pt == nil {
			continue
		}
		for _, w := range pt.workers {
			ks, err := p.askKeys(ctx, pt, w, pl, "")
			if err != nil {
				return nil, err
			}
			out = append(out, ks...)
		}
	}
	for i := range out {
		out[i].Watched = p.watch.watched(pl, out[i].Key)
	}
	slices.SortFunc(out, func(a, b KeyInfo) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out, nil
}

func (p *Processor) askKeys(ctx context.Context, pt *partition, w *worker, pl *pipeline, key string) ([]KeyInfo, error) {
	r, err := pt.send(ctx, w, &control{op: "keys", pipe: pl, key: key, reply: make(chan controlReply, 1)})
	if err != nil {
		return nil, err
	}
	var ks []KeyInfo
	if err := json.Unmarshal(r.data, &ks); err != nil {
		return nil, err
	}
	return ks, nil
}

// view returns the key view of a watched key's record.
func (p *Processor) view(pl *pipeline, key string, kw *keyWatch) *kpcaview.KeyView {
	kw.mu.Lock()
	v := kw.s.View(0.99, kpcaview.DefaultDrift)
	kw.mu.Unlock()
	lc := pl.cfg.Learner
	return &kpcaview.KeyView{Pipeline: pl.cfg.Name, Key: key, Member: p.id, Time: time.Now().UnixMilli(),
		Learner: lc.Learner, Dim: lc.Dim, Components: lc.Components, Budget: lc.Budget,
		WatchTTL: watchTTL.Milliseconds(), View: v}
}
