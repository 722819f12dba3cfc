package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/kpcastream/kpcastream/internal/buildinfo"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// The operations — the micro service, the live page and its API, the
// watched keys — live in package processor/internal/ops, which does not
// import this one: it declares the Views and Controls it needs, which
// views (read-only copies of counters and settings) and controls
// (requests that the workers answer on their own goroutines) below
// implement.

// Version is the micro service version: the binary's own (internal/buildinfo,
// as kpcastream_build_info and "kpcastream version" report it) as a
// semantic version, "0.0.0-devel+<revision>" for an untagged build.
var Version = buildinfo.Read().SemVer()

// The JSON of the micro endpoints and the HTTP API (package ops).
type (
	// KeyRequest is the body of the model, snapshot and reset requests.
	KeyRequest = ops.KeyRequest
	// PipelineStats is one pipeline's entry in the stats response. From
	// Processor.Stats the counters are this instance's; from the stats
	// endpoint they are summed over every member that answered
	// (Instances), and Partitions lists every partition run by one of them.
	PipelineStats = ops.PipelineStats
	// PartitionStats describes one partition run by a member.
	PartitionStats = ops.PartitionStats
	// PipelineInfo is one pipeline's entry in the pipelines response.
	PipelineInfo = ops.PipelineInfo
	// KeyInfo describes a key loaded on this instance (GET /api/v1/keys).
	KeyInfo = ops.KeyInfo
	// PipelineView is one pipeline of GET /api/v1/pipelines.
	PipelineView = ops.PipelineView
)

// Errors of the control requests, matched with errors.Is; the micro
// endpoints answer them with the Nats-Service-Error-Code in parentheses.
var (
	// ErrNotFound: unknown pipeline, or a key with no learner (404).
	ErrNotFound = ops.ErrNotFound
	// ErrBadRequest: a malformed request (400).
	ErrBadRequest = ops.ErrBadRequest
	// ErrUnavailable: the key's partition has no owner at the moment (it
	// is moving), or this instance is not running (503). Retry.
	ErrUnavailable = ops.ErrUnavailable
)

// Stats returns this instance's counters of every pipeline.
func (p *Processor) Stats() []PipelineStats {
	out := make([]PipelineStats, len(p.pipes))
	for i, pl := range p.pipes {
		s := &pl.stats
		ps := PipelineStats{Pipeline: pl.cfg.Name, In: s.In.Load(), Out: s.Out.Load(), Warming: s.Warming.Load(),
			Skipped: s.Skipped.Load(), DeadLettered: s.DeadLettered.Load(), Naks: s.Naks.Load(), Learners: s.Live.Load(),
			Instances: 1, MemoryUsed: s.Memory.Load(), Evictions: s.Evictions.Load(),
			KVWrites: s.KVWrites.Load(), LocalKeys: s.LocalKeys.Load(), LocalBytes: s.LocalBytes.Load()}
		for _, a := range []string{learners.AdviceOK, learners.AdviceTight, learners.AdviceTooSmall} {
			if n := pl.adviceCount(a).Load(); n != 0 {
				if ps.Budget == nil {
					ps.Budget = map[string]int64{}
				}
				ps.Budget[a] = n
			}
		}
		for n := range pl.parts {
			pt := pl.parts[n].Load()
			if pt == nil {
				continue
			}
			c := pt.checkpoint.Load()
			ps.Partitions = append(ps.Partitions, PartitionStats{Partition: n, Member: p.id, Epoch: pt.epoch, Checkpoint: c, Pending: pt.pending.Load()})
			ps.Pending += pt.pending.Load()
			if c != 0 && (ps.Checkpoint == 0 || c < ps.Checkpoint) {
				ps.Checkpoint = c
			}
		}
		out[i] = ps
	}
	return out
}

// Pipelines describes the configured pipelines.
func (p *Processor) Pipelines() []PipelineInfo {
	out := make([]PipelineInfo, len(p.pipes))
	for i, pl := range p.pipes {
		c := pl.cfg
		out[i] = PipelineInfo{Name: c.Name, Stream: c.Input.Stream, Subject: c.Input.Subject, Consumer: c.Input.Durable,
			Partitions: c.Partitions, KeyToken: *c.KeyToken, Output: c.Output.Subject, OutputJS: pl.io[0].outJS, DeadLetter: c.DeadLetter,
			Learner: c.Learner.Learner, Dim: c.Learner.Dim, Components: c.Learner.Components, Budget: c.Learner.Budget,
			Kernel: c.Learner.Kernel.Name, MaxKeys: c.MaxKeys, MemoryBudget: c.MemoryBudget, KeyBytes: pl.kb,
			LiveMax: p.liveMax(pl)}
		if c.Input.Shards > 1 {
			out[i].Streams = c.InputStreams()
		}
		if c.Input.Stream != "" && p.coord != nil {
			for n := range c.Partitions {
				o, _ := p.coord.owner(c, n)
				out[i].Owners = append(out[i].Owners, o)
			}
		}
	}
	return out
}

// Model returns the JSON model export (codec.EncodeModel) of a key's
// learner, loading it from its snapshot if it is not in memory, on the
// instance that owns the key's partition. A key with no learner and no
// snapshot gives an error matching ErrNotFound.
func (p *Processor) Model(ctx context.Context, pipeline, key string) ([]byte, error) {
	r, err := p.srv.Control(ctx, ops.OpModel, pipeline, key, true)
	return r.Data, err
}

// SnapshotNow hands over a snapshot of key (or, with key "", of every
// changed key of the pipeline that this instance runs) and returns the
// number handed over. The saves complete asynchronously.
func (p *Processor) SnapshotNow(ctx context.Context, pipeline, key string) (int, error) {
	if key != "" {
		r, err := p.srv.Control(ctx, ops.OpSnapshot, pipeline, key, true)
		return r.N, err
	}
	return controls{p}.SnapshotAll(ctx, pipeline)
}

// Reset replaces key's learner by a fresh one and snapshots it, keeping the
// key's last applied sequence (so a replay does not apply older messages).
// A key with no learner and no snapshot gives an error matching ErrNotFound.
func (p *Processor) Reset(ctx context.Context, pipeline, key string) error {
	_, err := p.srv.Control(ctx, ops.OpReset, pipeline, key, true)
	return err
}

// Accept makes key's monitor accept the current regime: its control
// limits are cleared and a new warm-up begins, in which every observation
// is learned (the pipeline's monitor: learn: normal otherwise refuses a
// new regime until accept_after consecutive alarms). The key is
// snapshotted. A pipeline without monitor: gives an error matching
// ErrBadRequest; a key with no learner, ErrNotFound.
func (p *Processor) Accept(ctx context.Context, pipeline, key string) error {
	_, err := p.srv.Control(ctx, ops.OpAccept, pipeline, key, true)
	return err
}

// Keys returns the keys of pipeline loaded on this instance, sorted.
func (p *Processor) Keys(ctx context.Context, pipeline string) ([]KeyInfo, error) {
	pl, err := p.pipeline(pipeline)
	if err != nil {
		return nil, err
	}
	var out []KeyInfo
	err = pl.eachWorker(ctx, control{list: true}, func(r controlReply) error {
		var ks []KeyInfo
		if err := json.Unmarshal(r.data, &ks); err != nil {
			return err
		}
		out = append(out, ks...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Watched = p.watch.Watched(pl.cfg.Name, out[i].Key)
	}
	slices.SortFunc(out, func(a, b KeyInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Handler serves /metrics (Prometheus), /healthz (200 while the process
// runs), /readyz (200 only while connected and consuming, else 503), and
// the live page /ui/ with its JSON API /api/v1/ (package ops).
func (p *Processor) Handler() http.Handler { return p.srv.Handler() }

func (p *Processor) pipeline(name string) (*pipeline, error) {
	for _, pl := range p.pipes {
		if pl.cfg.Name == name {
			return pl, nil
		}
	}
	return nil, fmt.Errorf("processor: %w: unknown pipeline %q", ErrNotFound, name)
}

// send hands a control request to w and waits for its answer.
func (pt *partition) send(ctx context.Context, w *worker, c *control) (controlReply, error) {
	if err := func() error {
		pt.inMu.RLock()
		defer pt.inMu.RUnlock()
		if !pt.p.ready.Load() || pt.inClosed {
			return fmt.Errorf("processor: %w: partition %d of pipeline %s is stopping", ErrUnavailable, pt.num, pt.pipe.cfg.Name)
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

// views are the processor's read-only views, as package ops sees them
// (ops.Views).
type views struct{ p *Processor }

func (b views) Member() string            { return b.p.id }
func (b views) Running() bool             { return b.p.ready.Load() }
func (b views) Ready() bool               { return b.p.Ready() }
func (b views) Stats() []PipelineStats    { return b.p.Stats() }
func (b views) Pipelines() []PipelineInfo { return b.p.Pipelines() }
func (b views) OutputSubject(pipeline, key string) string {
	pl, err := b.p.pipeline(pipeline)
	if err != nil {
		return ""
	}
	return expandShard(pl.cfg.Output.Subject, pl.cfg.Name, key, pl.cfg.shardOfKey(key))
}

func (b views) Keys(ctx context.Context, pipeline string) ([]KeyInfo, error) {
	return b.p.Keys(ctx, pipeline)
}

func (b views) Pipeline(name string) (ops.Pipeline, error) {
	pl, err := b.p.pipeline(name)
	if err != nil {
		return ops.Pipeline{}, err
	}
	c := pl.cfg
	return ops.Pipeline{Name: c.Name, Partitions: c.Partitions, MaxKeys: c.MaxKeys, Learner: c.Learner, OutputStream: pl.io[0].outStream,
		OutputStreamOf: func(key string) string { return pl.io[c.shardOfKey(key)].outStream }}, nil
}

func (b views) Runs(pipeline string, n int) bool {
	pl, err := b.p.pipeline(pipeline)
	return err == nil && n >= 0 && n < len(pl.parts) && pl.parts[n].Load() != nil
}

// controls are the requests the processor's workers answer, as package
// ops sees them (ops.Controls).
type controls struct{ p *Processor }

// Run runs op on the worker of key when partition n runs here. The
// shell's own errors are marked with the operations' codes: a key with no
// learner is ErrNotFound, a fenced partition ErrUnavailable.
func (b controls) Run(ctx context.Context, op ops.Op, pipeline, key string, n int) (ops.Reply, bool, error) {
	pl, err := b.p.pipeline(pipeline)
	if err != nil {
		return ops.Reply{}, false, err
	}
	pt := pl.parts[n].Load()
	if pt == nil {
		return ops.Reply{}, false, nil
	}
	r, err := pt.send(ctx, pt.workers[pt.owner(key)], &control{op: op, pipe: pl, key: key, reply: make(chan controlReply, 1)})
	switch {
	case errors.Is(err, errNoKey):
		err = ops.Mark(err, ErrNotFound)
	case errors.Is(err, errFenced):
		err = ops.Mark(err, ErrUnavailable)
	}
	return ops.Reply{Data: r.data, N: r.n}, true, err
}

// SnapshotAll hands over a snapshot of every changed key of pipeline run
// here.
func (b controls) SnapshotAll(ctx context.Context, pipeline string) (int, error) {
	pl, err := b.p.pipeline(pipeline)
	if err != nil {
		return 0, err
	}
	n := 0
	err = pl.eachWorker(ctx, control{op: ops.OpSnapshot}, func(r controlReply) error { n += r.n; return nil })
	return n, err
}

// eachWorker sends the control request c (of no key) to each worker of
// the partitions of pl run here, in turn, and passes its answer to f; it
// stops at the first error.
func (pl *pipeline) eachWorker(ctx context.Context, c control, f func(controlReply) error) error {
	for i := range pl.parts {
		pt := pl.parts[i].Load()
		if pt == nil {
			continue
		}
		for _, w := range pt.workers {
			r, err := pt.send(ctx, w, &control{op: c.op, list: c.list, pipe: pl, reply: make(chan controlReply, 1)})
			if err != nil {
				return err
			}
			if err := f(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b views) Members() ops.Members {
	if b.p.coord == nil {
		return nil
	}
	return members{b.p.coord}
}

// members is the coordinator as package ops sees it (ops.Members).
type members struct{ c *coordinator }

func (m members) Owner(pipeline string, n int) string {
	if v := m.c.view(recordKeyOf(pipeline, n)); v.Exists {
		return v.Rec.Owner
	}
	return ""
}

func (m members) Others() []ownership.Member { return m.c.others() }

func (m members) Runners(pipeline string) ([]string, int) { return m.c.runners(pipeline) }
