package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
)

// Version is the micro service version.
const Version = "0.1.0"

// KeyRequest is the body of the model, snapshot and reset requests.
type KeyRequest struct {
	Pipeline string `json:"pipeline"`
	Key      string `json:"key"`
}

// PipelineStats is one pipeline's entry in the stats response.
type PipelineStats struct {
	Pipeline     string `json:"pipeline"`
	In           int64  `json:"in"`
	Out          int64  `json:"out"`
	Warming      int64  `json:"warming"`
	Skipped      int64  `json:"skipped"`
	DeadLettered int64  `json:"dead_lettered"`
	Naks         int64  `json:"naks"`
	Learners     int64  `json:"learners"`
	Pending      uint64 `json:"pending"`
	Checkpoint   uint64 `json:"checkpoint"`
}

// PipelineInfo is one pipeline's entry in the pipelines response.
type PipelineInfo struct {
	Name       string `json:"name"`
	Stream     string `json:"stream,omitempty"`
	Subject    string `json:"subject"`
	Consumer   string `json:"consumer,omitempty"`
	KeyToken   int    `json:"key_token"`
	Output     string `json:"output"`
	OutputJS   bool   `json:"output_jetstream"`
	DeadLetter string `json:"dead_letter"`
	Learner    string `json:"learner"`
	Dim        int    `json:"dim"`
	Components int    `json:"components"`
	Budget     int    `json:"budget"`
	Kernel     string `json:"kernel"`
	MaxKeys    int    `json:"max_keys"`
}

// Stats returns the counters of every pipeline.
func (p *Processor) Stats() []PipelineStats {
	out := make([]PipelineStats, len(p.pipes))
	for i, pl := range p.pipes {
		s := &pl.stats
		out[i] = PipelineStats{Pipeline: pl.cfg.Name, In: s.In.Load(), Out: s.Out.Load(), Warming: s.Warming.Load(),
			Skipped: s.Skipped.Load(), DeadLettered: s.DeadLettered.Load(), Naks: s.Naks.Load(), Learners: s.Live.Load(),
			Pending: s.Pending.Load(), Checkpoint: s.Checkpoint.Load()}
	}
	return out
}

// Pipelines describes the configured pipelines.
func (p *Processor) Pipelines() []PipelineInfo {
	out := make([]PipelineInfo, len(p.pipes))
	for i, pl := range p.pipes {
		c := pl.cfg
		out[i] = PipelineInfo{Name: c.Name, Stream: c.Input.Stream, Subject: c.Input.Subject, Consumer: c.Input.Durable,
			KeyToken: *c.KeyToken, Output: c.Output.Subject, OutputJS: pl.outJS, DeadLetter: c.DeadLetter,
			Learner: c.Learner.Learner, Dim: c.Learner.Dim, Components: c.Learner.Components, Budget: c.Learner.Budget,
			Kernel: c.Learner.Kernel.Name, MaxKeys: c.MaxKeys}
	}
	return out
}

// Model returns the JSON model export (codec.EncodeModel) of a key's
// learner, loading it from its snapshot if it is not in memory.
func (p *Processor) Model(ctx context.Context, pipeline, key string) ([]byte, error) {
	r, err := p.control(ctx, "model", pipeline, key)
	return r.data, err
}

// SnapshotNow hands over a snapshot of key (or, with key "", of every
// changed key of the pipeline) and returns the number handed over. The
// saves complete asynchronously.
func (p *Processor) SnapshotNow(ctx context.Context, pipeline, key string) (int, error) {
	if key != "" {
		r, err := p.control(ctx, "snapshot", pipeline, key)
		return r.n, err
	}
	pl, err := p.pipeline(pipeline)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, w := range p.workers {
		r, err := p.send(ctx, w, &control{op: "snapshot", pipe: pl, reply: make(chan controlReply, 1)})
		if err != nil {
			return n, err
		}
		n += r.n
	}
	return n, nil
}

// Reset replaces key's learner by a fresh one and snapshots it, keeping the
// key's last applied sequence (so a replay does not apply older messages).
func (p *Processor) Reset(ctx context.Context, pipeline, key string) error {
	_, err := p.control(ctx, "reset", pipeline, key)
	return err
}

func (p *Processor) pipeline(name string) (*pipeline, error) {
	for _, pl := range p.pipes {
		if pl.cfg.Name == name {
			return pl, nil
		}
	}
	return nil, fmt.Errorf("processor: unknown pipeline %q", name)
}

func (p *Processor) control(ctx context.Context, op, pipeline, key string) (controlReply, error) {
	pl, err := p.pipeline(pipeline)
	if err != nil {
		return controlReply{}, err
	}
	if key == "" {
		return controlReply{}, errors.New("processor: key is required")
	}
	return p.send(ctx, p.workers[p.owner(key)], &control{op: op, pipe: pl, key: key, reply: make(chan controlReply, 1)})
}

func (p *Processor) send(ctx context.Context, w *worker, c *control) (controlReply, error) {
	if err := func() error {
		p.inMu.RLock()
		defer p.inMu.RUnlock()
		if !p.ready.Load() || p.inClosed {
			return errors.New("processor: not running")
		}
		select {
		case w.in <- item{ctl: c}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}(); err != nil {
		return controlReply{}, err
	}
	select {
	case r := <-c.reply:
		return r, r.err
	case <-ctx.Done():
		return controlReply{}, ctx.Err()
	}
}

// control runs a control request on the worker goroutine.
func (w *worker) control(ctx context.Context, c *control) {
	var r controlReply
	switch {
	case c.op == "snapshot" && c.key == "":
		for _, e := range w.keys {
			if e.pipe == c.pipe && e.dirty && len(e.unsent) == 0 {
				w.saveSoon(e)
				r.n++
			}
		}
	default:
		e, err := w.entry(ctx, c.pipe, c.key)
		if err != nil {
			r.err = err
			break
		}
		switch c.op {
		case "model":
			m, err := e.l.Model()
			if err == nil {
				r.data, err = codec.EncodeModel(m)
			}
			r.err = err
		case "snapshot":
			if e.dirty && len(e.unsent) == 0 {
				w.saveSoon(e)
				r.n = 1
			}
		case "reset":
			l, err := w.p.newLearner(c.pipe.cfg.Learner)
			if err != nil {
				r.err = err
				break
			}
			e.l = l
			if !e.dirty {
				e.dirty, e.dirtyAt = true, time.Now()
			}
			if e.pipe.track != nil && e.dirtySeq == 0 && e.lastSeq > 0 {
				e.dirtySeq = e.lastSeq
				e.pipe.track.hold(e.lastSeq)
			}
			e.unsent = nil
			w.saveSoon(e)
			w.log.Info("key reset", zap.String("pipeline", c.pipe.cfg.Name), zap.String("key", c.key))
		}
	}
	c.reply <- r
}

// saveSoon hands e's snapshot over now or, when a save of e is already in
// flight, as soon as it lands (a reset during a save must not wait for the
// snapshot policy).
func (w *worker) saveSoon(e *entry) {
	e.saveNow = true
	if !e.saving {
		w.handoffWait(e)
	}
}

// startService adds the micro service with endpoints stats, pipelines,
// model, snapshot and reset under the subject prefix "<service_name>.".
func (p *Processor) startService(ctx context.Context) (micro.Service, error) {
	svc, err := micro.AddService(p.conn, micro.Config{
		Name: p.cfg.ServiceName, Version: Version,
		Description:  "online kernel PCA stream processor",
		StatsHandler: func(*micro.Endpoint) any { return p.Stats() },
	})
	if err != nil {
		return nil, fmt.Errorf("processor: micro service: %w", err)
	}
	g := svc.AddGroup(p.cfg.ServiceName)
	withKey := func(f func(context.Context, KeyRequest) (any, error)) micro.Handler {
		return micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) {
			var kr KeyRequest
			if len(req.Data()) > 0 {
				if err := json.Unmarshal(req.Data(), &kr); err != nil {
					_ = req.Error("400", "bad request: "+err.Error(), nil)
					return
				}
			}
			ctx, cancel := context.WithTimeout(ctx, p.cfg.SnapshotTimeout)
			defer cancel()
			v, err := f(ctx, kr)
			if err != nil {
				_ = req.Error("500", err.Error(), nil)
				return
			}
			if b, ok := v.([]byte); ok {
				_ = req.Respond(b)
				return
			}
			_ = req.RespondJSON(v)
		})
	}
	eps := []struct {
		name string
		h    func(context.Context, KeyRequest) (any, error)
	}{
		{"stats", func(context.Context, KeyRequest) (any, error) { return p.Stats(), nil }},
		{"pipelines", func(context.Context, KeyRequest) (any, error) { return p.Pipelines(), nil }},
		{"model", func(ctx context.Context, kr KeyRequest) (any, error) { return p.Model(ctx, kr.Pipeline, kr.Key) }},
		{"snapshot", func(ctx context.Context, kr KeyRequest) (any, error) {
			n, err := p.SnapshotNow(ctx, kr.Pipeline, kr.Key)
			return map[string]int{"snapshots": n}, err
		}},
		{"reset", func(ctx context.Context, kr KeyRequest) (any, error) {
			return map[string]bool{"reset": true}, p.Reset(ctx, kr.Pipeline, kr.Key)
		}},
	}
	for _, ep := range eps {
		if err := g.AddEndpoint(ep.name, withKey(ep.h)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("processor: micro endpoint %s: %w", ep.name, err)
		}
	}
	return svc, nil
}

// Handler serves /metrics (Prometheus), /healthz (200 while the process
// runs) and /readyz (200 only while connected and consuming, else 503).
func (p *Processor) Handler() http.Handler {
	mux := http.NewServeMux()
	if p.gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(p.gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
