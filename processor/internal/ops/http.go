package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// Handler serves /metrics (Prometheus), /healthz (200 while the process
// runs), /readyz (200 only while connected and consuming, else 503), and
// the live page /ui/ with its JSON API /api/v1/ (routes).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.Gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	s.routes(mux)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.v.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

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

// routes adds the page and the API to mux.
func (s *Server) routes(mux *http.ServeMux) {
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
	mux.HandleFunc("GET /api/v1/pipelines", s.apiPipelines)
	mux.HandleFunc("GET /api/v1/keys", s.apiKeys)
	mux.HandleFunc("GET /api/v1/series", s.apiSeries)
	mux.HandleFunc("GET /api/v1/stream", s.apiStream)
}

func (s *Server) apiPipelines(w http.ResponseWriter, _ *http.Request) {
	infos, stats := s.v.Pipelines(), s.v.Stats()
	out := struct {
		Member    string         `json:"member"`
		Time      int64          `json:"time"`
		Pipelines []PipelineView `json:"pipelines"`
	}{Member: s.v.Member(), Time: time.Now().UnixMilli(), Pipelines: make([]PipelineView, len(infos))}
	for i := range infos {
		out.Pipelines[i] = PipelineView{PipelineInfo: infos[i], Keys: stats[i].Learners, Stats: stats[i]}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) apiKeys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pl, err := s.v.Pipeline(q.Get("pipeline"))
	if err != nil {
		apiError(w, err)
		return
	}
	limit := 200
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			apiError(w, fmt.Errorf("processor: %w: limit must be a positive integer, got %q", ErrBadRequest, v))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	keys, err := s.v.Keys(ctx, pl.Name)
	if err != nil {
		apiError(w, err)
		return
	}
	total := len(keys)
	if v := q.Get("q"); v != "" {
		n := 0
		for _, k := range keys {
			if strings.Contains(strings.ToLower(k.Key), strings.ToLower(v)) {
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
	}{pl.Name, total, matched, pl.MaxKeys, keys})
}

// watchRequest resolves ?pipeline=&key= and watches the key.
func (s *Server) watchRequest(r *http.Request) (Pipeline, string, *Watch, error) {
	q := r.URL.Query()
	pl, err := s.v.Pipeline(q.Get("pipeline"))
	if err != nil {
		return Pipeline{}, "", nil, err
	}
	key := q.Get("key")
	if key == "" {
		return Pipeline{}, "", nil, fmt.Errorf("processor: %w: key is required", ErrBadRequest)
	}
	if kw := s.watch.Get(pl.Name, key); kw != nil {
		kw, err := s.watch.Start(pl.Name, key, nil) // renew
		return pl, key, kw, err
	}
	if n := ownership.PartitionOf(key, pl.Partitions); !s.v.Runs(pl.Name, n) {
		return Pipeline{}, "", nil, fmt.Errorf("processor: %w: partition %d of pipeline %s (key %q) does not run on this instance (member %s); "+
			"GET /api/v1/keys lists the keys loaded here", ErrNotFound, n, pl.Name, key, s.v.Member())
	}
	kw, err := s.watch.Start(pl.Name, key, s.backfill(r.Context(), pl, key))
	return pl, key, kw, err
}

func (s *Server) apiSeries(w http.ResponseWriter, r *http.Request) {
	pl, key, kw, err := s.watchRequest(r)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(pl, key, kw))
}

func (s *Server) apiStream(w http.ResponseWriter, r *http.Request) {
	every := time.Second
	if v := r.URL.Query().Get("every"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > WatchTTL/2 {
			apiError(w, fmt.Errorf("processor: %w: every must be a duration between 100ms and %s, got %q", ErrBadRequest, WatchTTL/2, v))
			return
		}
		every = d
	}
	pl, key, kw, err := s.watchRequest(r)
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
	running := s.v.Running()
	for {
		running = running || s.v.Running()
		b, err := json.Marshal(s.view(pl, key, kw))
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
		if running && !s.v.Running() {
			return // Run is stopping: let the HTTP server shut down
		}
		if kw, err = s.watch.Start(pl.Name, key, nil); err != nil {
			return
		}
	}
}

// view returns the key view of a watched key's record.
func (s *Server) view(pl Pipeline, key string, kw *Watch) *kpcaview.KeyView {
	v := kw.View()
	lc := pl.Learner
	return &kpcaview.KeyView{Pipeline: pl.Name, Key: key, Member: s.v.Member(), Time: time.Now().UnixMilli(),
		Learner: lc.Learner, Dim: lc.Dim, Components: lc.Components, Budget: lc.Budget,
		WatchTTL: WatchTTL.Milliseconds(), View: v}
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
		if c, e := strconv.Atoi(StatusOf(err)); e == nil {
			code = c
		}
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
