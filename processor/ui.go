package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// The live page and its JSON API, served by Handler on the HTTP listener
// (the one of /metrics):
//
//	GET /                                   redirects (302) to /ui/
//	GET /ui/                                the page (static files embedded in the binary)
//	GET /api/v1/pipelines                   pipelines with their counters and loaded keys
//	GET /api/v1/keys?pipeline=P[&q=S][&limit=N]   keys of P loaded here (containing S)
//	GET /api/v1/series?pipeline=P&key=K     the key's record (kpcaview.KeyView); watches K
//	                                        (a key of a partition run here, loaded or not)
//	GET /api/v1/stream?pipeline=P&key=K[&every=D] the same as server-sent events every D (default 1s)
//
// Errors are JSON {"error": "..."} with status 400 (bad parameters), 404
// (unknown pipeline, or a key whose partition does not run here), 429 (too many
// watched keys) or 503 (the partition is stopping).

// uiRoutes adds the page and the API to mux.
func (p *Processor) uiRoutes(mux *http.ServeMux) {
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(kpcaview.Assets())))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	// The listener's root leads to the page (a temporary redirect: the root
	// may serve something else one day). Only "/" itself: other unknown
	// paths stay 404.
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	mux.HandleFunc("GET /api/v1/pipelines", p.apiPipelines)
	mux.HandleFunc("GET /api/v1/keys", p.apiKeys)
	mux.HandleFunc("GET /api/v1/series", p.apiSeries)
	mux.HandleFunc("GET /api/v1/stream", p.apiStream)
}

// PipelineView is one pipeline of GET /api/v1/pipelines.
type PipelineView struct {
	PipelineInfo
	// Keys is the number of learners loaded on this instance.
	Keys  int64         `json:"keys"`
	Stats PipelineStats `json:"stats"`
}

func (p *Processor) apiPipelines(w http.ResponseWriter, _ *http.Request) {
	infos, stats := p.Pipelines(), p.Stats()
	out := struct {
		Member    string         `json:"member"`
		Time      int64          `json:"time"`
		Pipelines []PipelineView `json:"pipelines"`
	}{Member: p.id, Time: time.Now().UnixMilli(), Pipelines: make([]PipelineView, len(infos))}
	for i := range infos {
		out.Pipelines[i] = PipelineView{PipelineInfo: infos[i], Keys: stats[i].Learners, Stats: stats[i]}
	}
	writeJSON(w, http.StatusOK, out)
}

func (p *Processor) apiKeys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pl, err := p.pipeline(q.Get("pipeline"))
	if err != nil {
		apiError(w, err)
		return
	}
	limit := 200
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 {
			apiError(w, fmt.Errorf("processor: %w: limit must be a positive integer, got %q", ErrBadRequest, s))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.SnapshotTimeout)
	defer cancel()
	keys, err := p.Keys(ctx, pl.cfg.Name)
	if err != nil {
		apiError(w, err)
		return
	}
	total := len(keys)
	if s := q.Get("q"); s != "" {
		n := 0
		for _, k := range keys {
			if strings.Contains(strings.ToLower(k.Key), strings.ToLower(s)) {
				keys[n] = k
				n++
			}
		}
		keys = keys[:n]
	}
	matched := len(keys)
	keys = keys[:min(limit, len(keys))]
	if keys == nil {
		keys = []KeyInfo{}
	}
	writeJSON(w, http.StatusOK, struct {
		Pipeline string    `json:"pipeline"`
		Total    int       `json:"total"`
		Matched  int       `json:"matched"`
		MaxKeys  int       `json:"max_keys"`
		Keys     []KeyInfo `json:"keys"`
	}{pl.cfg.Name, total, matched, pl.cfg.MaxKeys, keys})
}

// watchRequest resolves ?pipeline=&key= and watches the key.
func (p *Processor) watchRequest(r *http.Request) (*pipeline, string, *keyWatch, error) {
	q := r.URL.Query()
	pl, err := p.pipeline(q.Get("pipeline"))
	if err != nil {
		return nil, "", nil, err
	}
	key := q.Get("key")
	if key == "" {
		return nil, "", nil, fmt.Errorf("processor: %w: key is required", ErrBadRequest)
	}
	if kw := p.watch.get(pl, key); kw != nil {
		kw, err := p.watch.watch(pl, key, nil) // renew
		return pl, key, kw, err
	}
	if n := ownership.PartitionOf(key, pl.cfg.Partitions); pl.parts[n].Load() == nil {
		return nil, "", nil, fmt.Errorf("processor: %w: partition %d of pipeline %s (key %q) does not run on this instance (member %s); "+
			"GET /api/v1/keys lists the keys loaded here", ErrNotFound, n, pl.cfg.Name, key, p.id)
	}
	kw, err := p.watch.watch(pl, key, p.backfill(r.Context(), pl, key))
	return pl, key, kw, err
}

func (p *Processor) apiSeries(w http.ResponseWriter, r *http.Request) {
	pl, key, kw, err := p.watchRequest(r)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p.view(pl, key, kw))
}

func (p *Processor) apiStream(w http.ResponseWriter, r *http.Request) {
	every := time.Second
	if s := r.URL.Query().Get("every"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 100*time.Millisecond || d > watchTTL/2 {
			apiError(w, fmt.Errorf("processor: %w: every must be a duration between 100ms and %s, got %q", ErrBadRequest, watchTTL/2, s))
			return
		}
		every = d
	}
	pl, key, kw, err := p.watchRequest(r)
	if err != nil {
		apiError(w, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		apiError(w, errors.New("processor: streaming is not supported by this connection"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(every)
	defer tick.Stop()
	running := p.ready.Load()
	for {
		running = running || p.ready.Load()
		b, err := json.Marshal(p.view(pl, key, kw))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: series\ndata: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		if running && !p.ready.Load() {
			return // Run is stopping: let the HTTP server shut down
		}
		if kw, err = p.watch.watch(pl, key, nil); err != nil {
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func apiError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errTooManyWatches):
		code = http.StatusTooManyRequests
	default:
		if c, e := strconv.Atoi(statusOf(err)); e == nil {
			code = c
		}
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
