package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kpcastream/kpcastream/internal/buildinfo"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Version is the micro service version: the binary's own (internal/buildinfo,
// as kpcastream_build_info and "kpcastream version" report it) as a
// semantic version, "0.0.0-devel+<revision>" for an untagged build.
var Version = buildinfo.Read().SemVer()

// KeyRequest is the body of the model, snapshot and reset requests.
type KeyRequest struct {
	Pipeline string `json:"pipeline"`
	Key      string `json:"key"`
}

// maxRequest bounds a control request's body.
const maxRequest = 64 << 10

// parseKeyRequest decodes a control request's body: empty, or one JSON
// object {"pipeline": …, "key": …} (other fields are ignored, as micro
// clients may add their own). Anything else is an ErrBadRequest naming
// what was wrong.
func parseKeyRequest(data []byte) (KeyRequest, error) {
	var kr KeyRequest
	if len(data) == 0 {
		return kr, nil
	}
	if len(data) > maxRequest {
		return kr, fmt.Errorf("processor: %w: body of %d bytes, at most %d", ErrBadRequest, len(data), maxRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&kr); err != nil {
		return KeyRequest{}, fmt.Errorf("processor: %w: body is not a JSON object {\"pipeline\":…,\"key\":…}: %v", ErrBadRequest, err)
	}
	if rest := bytes.Trim(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 { // JSON whitespace only
		return KeyRequest{}, fmt.Errorf("processor: %w: %d bytes of trailing data after the JSON object", ErrBadRequest, len(rest))
	}
	if !utf8.ValidString(kr.Pipeline) || !utf8.ValidString(kr.Key) {
		return KeyRequest{}, fmt.Errorf("processor: %w: pipeline and key must be valid UTF-8", ErrBadRequest)
	}
	return kr, nil
}

// PipelineStats is one pipeline's entry in the stats response. From
// Processor.Stats the counters are this instance's; from the stats
// endpoint they are summed over every member that answered (Instances),
// and Partitions lists every partition run by one of them.
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
	// Checkpoint is the lowest checkpoint of the partitions listed (the
	// sequence from which a restart of all of them would replay).
	Checkpoint uint64           `json:"checkpoint"`
	Instances  int              `json:"instances"`
	Partitions []PartitionStats `json:"partitions,omitempty"`
	// Budget counts the loaded learners by the budget advice of their last
	// message ("ok", "tight", "too_small"; see learners.BudgetAdvice).
	Budget map[string]int64 `json:"budget,omitempty"`
}

// PartitionStats describes one partition run by a member.
type PartitionStats struct {
	Partition  int    `json:"partition"`
	Member     string `json:"member"`
	Epoch      uint64 `json:"epoch,omitempty"`
	Checkpoint uint64 `json:"checkpoint,omitempty"`
	Pending    uint64 `json:"pending"`
}

// PipelineInfo is one pipeline's entry in the pipelines response.
type PipelineInfo struct {
	Name       string `json:"name"`
	Stream     string `json:"stream,omitempty"`
	Subject    string `json:"subject"`
	Consumer   string `json:"consumer,omitempty"` // prefix of the partitions' consumers: <consumer>-p<n>-e<epoch>
	Partitions int    `json:"partitions"`
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
	// Owners are the members owning each partition, as this instance last
	// saw the coordination bucket ("" while a partition moves).
	Owners []string `json:"owners,omitempty"`
}

// Stats returns this instance's counters of every pipeline.
func (p *Processor) Stats() []PipelineStats {
	out := make([]PipelineStats, len(p.pipes))
	for i, pl := range p.pipes {
		s := &pl.stats
		ps := PipelineStats{Pipeline: pl.cfg.Name, In: s.In.Load(), Out: s.Out.Load(), Warming: s.Warming.Load(),
			Skipped: s.Skipped.Load(), DeadLettered: s.DeadLettered.Load(), Naks: s.Naks.Load(), Learners: s.Live.Load(),
			Instances: 1}
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

// mergeStats adds b's counters and partitions to a's entries of the same
// pipelines, appends the pipelines a lacks, and returns a.
func mergeStats(a, b []PipelineStats) []PipelineStats {
	for _, y := range b {
		i := slices.IndexFunc(a, func(x PipelineStats) bool { return x.Pipeline == y.Pipeline })
		if i < 0 {
			a = append(a, y)
			continue
		}
		x := &a[i]
		x.In += y.In
		x.Out += y.Out
		x.Warming += y.Warming
		x.Skipped += y.Skipped
		x.DeadLettered += y.DeadLettered
		x.Naks += y.Naks
		x.Learners += y.Learners
		x.Pending += y.Pending
		x.Instances += y.Instances
		if y.Checkpoint != 0 && (x.Checkpoint == 0 || y.Checkpoint < x.Checkpoint) {
			x.Checkpoint = y.Checkpoint
		}
		x.Partitions = append(x.Partitions, y.Partitions...)
		for a, n := range y.Budget {
			if x.Budget == nil {
				x.Budget = map[string]int64{}
			}
			x.Budget[a] += n
		}
	}
	return a
}

// Pipelines describes the configured pipelines.
func (p *Processor) Pipelines() []PipelineInfo {
	out := make([]PipelineInfo, len(p.pipes))
	for i, pl := range p.pipes {
		c := pl.cfg
		out[i] = PipelineInfo{Name: c.Name, Stream: c.Input.Stream, Subject: c.Input.Subject, Consumer: c.Input.Durable,
			Partitions: c.Partitions, KeyToken: *c.KeyToken, Output: c.Output.Subject, OutputJS: pl.outJS, DeadLetter: c.DeadLetter,
			Learner: c.Learner.Learner, Dim: c.Learner.Dim, Components: c.Learner.Components, Budget: c.Learner.Budget,
			Kernel: c.Learner.Kernel.Name, MaxKeys: c.MaxKeys}
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
	r, err := p.control(ctx, "model", pipeline, key)
	return r.data, err
}

// SnapshotNow hands over a snapshot of key (or, with key "", of every
// changed key of the pipeline that this instance runs) and returns the
// number handed over. The saves complete asynchronously.
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
	for i := range pl.parts {
		pt := pl.parts[i].Load()
		if pt == nil {
			continue
		}
		for _, w := range pt.workers {
			r, err := pt.send(ctx, w, &control{op: "snapshot", pipe: pl, reply: make(chan controlReply, 1)})
			if err != nil {
				return n, err
			}
			n += r.n
		}
	}
	return n, nil
}

// Reset replaces key's learner by a fresh one and snapshots it, keeping the
// key's last applied sequence (so a replay does not apply older messages).
// A key with no learner and no snapshot gives an error matching ErrNotFound.
func (p *Processor) Reset(ctx context.Context, pipeline, key string) error {
	_, err := p.control(ctx, "reset", pipeline, key)
	return err
}

// Accept makes key's monitor accept the current regime: its control
// limits are cleared and a new warm-up begins, in which every observation
// is learned (the pipeline's monitor: learn: normal otherwise refuses a
// new regime until accept_after consecutive alarms). The key is
// snapshotted. A pipeline without monitor: gives an error matching
// ErrBadRequest; a key with no learner, ErrNotFound.
func (p *Processor) Accept(ctx context.Context, pipeline, key string) error {
	_, err := p.control(ctx, "accept", pipeline, key)
	return err
}

// Errors of the control requests, matched with errors.Is; the micro
// endpoints answer them with the Nats-Service-Error-Code in parentheses.
var (
	// ErrNotFound: unknown pipeline, or a key with no learner (404).
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: a malformed request (400).
	ErrBadRequest = errors.New("bad request")
	// ErrUnavailable: the key's partition has no owner at the moment (it
	// is moving), or this instance is not running (503). Retry.
	ErrUnavailable = errors.New("unavailable")
)

// statusOf maps a control error to its service error code.
func statusOf(err error) string {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errNoKey):
		return "404"
	case errors.Is(err, ErrBadRequest):
		return "400"
	case errors.Is(err, snapshot.ErrConflict):
		return "409"
	case errors.Is(err, ErrUnavailable), errors.Is(err, errFenced), errors.Is(err, context.DeadlineExceeded):
		return "503"
	}
	return "500"
}

func (p *Processor) pipeline(name string) (*pipeline, error) {
	for _, pl := range p.pipes {
		if pl.cfg.Name == name {
			return pl, nil
		}
	}
	return nil, fmt.Errorf("processor: %w: unknown pipeline %q", ErrNotFound, name)
}

// control runs a request on the worker of key, here or, forwarded, on the
// member that owns the key's partition.
func (p *Processor) control(ctx context.Context, op, pipeline, key string) (controlReply, error) {
	return p.controlAt(ctx, op, pipeline, key, true)
}

func (p *Processor) controlAt(ctx context.Context, op, pipeline, key string, forward bool) (controlReply, error) {
	pl, err := p.pipeline(pipeline)
	if err != nil {
		if forward && p.coord != nil {
			return p.controlElsewhere(ctx, op, pipeline, key, err)
		}
		return controlReply{}, err
	}
	if key == "" {
		return controlReply{}, fmt.Errorf("processor: %w: key is required", ErrBadRequest)
	}
	n := ownership.PartitionOf(key, pl.cfg.Partitions)
	if pt := pl.parts[n].Load(); pt != nil {
		return pt.send(ctx, pt.workers[pt.owner(key)], &control{op: op, pipe: pl, key: key, reply: make(chan controlReply, 1)})
	}
	if forward && p.coord != nil {
		if owner, _ := p.coord.owner(pl.cfg, n); owner != "" && owner != p.id {
			return p.forward(ctx, owner, op, KeyRequest{Pipeline: pipeline, Key: key})
		}
	}
	return controlReply{}, fmt.Errorf("processor: %w: partition %d of pipeline %s (key %q) has no running owner at the moment; retry",
		ErrUnavailable, n, pipeline, key)
}

// controlElsewhere forwards a key request for a pipeline not configured
// here to the member owning the key's partition, found from the
// heartbeats of the members that run the pipeline (its partition count)
// and the partition's record; notHere when no live member runs it.
func (p *Processor) controlElsewhere(ctx context.Context, op, pipeline, key string, notHere error) (controlReply, error) {
	ids, parts := p.coord.runners(pipeline)
	if len(ids) == 0 {
		return controlReply{}, notHere
	}
	if key == "" {
		return controlReply{}, fmt.Errorf("processor: %w: key is required", ErrBadRequest)
	}
	n := ownership.PartitionOf(key, parts)
	owner := ""
	if v := p.coord.view(recordKeyOf(pipeline, n)); v.Exists {
		owner = v.Rec.Owner
	}
	if owner == "" {
		return controlReply{}, fmt.Errorf("processor: %w: partition %d of pipeline %s (key %q) has no running owner at the moment; retry",
			ErrUnavailable, n, pipeline, key)
	}
	return p.forward(ctx, owner, op, KeyRequest{Pipeline: pipeline, Key: key})
}

// instanceSubject is the subject of op on member id's own endpoints.
func (p *Processor) instanceSubject(id, op string) string {
	return p.cfg.ServiceName + ".i." + id + "." + op
}

// forward sends a key request to member id's own endpoint.
func (p *Processor) forward(ctx context.Context, id, op string, kr KeyRequest) (controlReply, error) {
	body, _ := json.Marshal(kr)
	msg, err := p.conn.RequestWithContext(ctx, p.instanceSubject(id, op), body)
	if err != nil {
		return controlReply{}, fmt.Errorf("processor: %w: forward %s to member %s: %w", ErrUnavailable, op, id, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		switch code {
		case "404":
			return controlReply{}, fmt.Errorf("%w: %s", ErrNotFound, desc)
		case "400":
			return controlReply{}, fmt.Errorf("%w: %s", ErrBadRequest, desc)
		case "409":
			return controlReply{}, fmt.Errorf("%w: %s", snapshot.ErrConflict, desc)
		case "503":
			return controlReply{}, fmt.Errorf("%w: %s", ErrUnavailable, desc)
		}
		return controlReply{}, fmt.Errorf("processor: member %s: %s %s", id, code, desc)
	}
	r := controlReply{data: msg.Data}
	if op == "snapshot" {
		var v map[string]int
		if json.Unmarshal(msg.Data, &v) == nil {
			r.n = v["snapshots"]
		}
	}
	return r, nil
}

// clusterStats sums, per pipeline, the stats of every live member of the
// coordination bucket (asked on its own endpoint; those that do not answer
// within the request's time are left out) with this instance's: every
// pipeline any of them runs, each summed over the members that run it, so
// that the answer does not depend on which member took the request (two
// deployments sharing a bucket and a service name see each other's
// pipelines, never one's counters under the other's name). With pipeline
// set, only that pipeline's entry (ErrNotFound when no member runs it).
func (p *Processor) clusterStats(ctx context.Context, pipeline string) ([]PipelineStats, error) {
	out := p.Stats()
	if p.coord != nil {
		ctx, cancel := context.WithTimeout(ctx, min(p.cfg.SnapshotTimeout, 2*time.Second))
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, m := range p.coord.others() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var st []PipelineStats
				if p.askMember(ctx, m.ID, "stats", nil, &st) != nil {
					return
				}
				mu.Lock()
				out = mergeStats(out, st)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	own := len(p.pipes)
	slices.SortFunc(out[own:], func(a, b PipelineStats) int { return strings.Compare(a.Pipeline, b.Pipeline) })
	for i := range out {
		slices.SortFunc(out[i].Partitions, func(a, b PartitionStats) int { return a.Partition - b.Partition })
	}
	if pipeline == "" {
		return out, nil
	}
	if i := slices.IndexFunc(out, func(s PipelineStats) bool { return s.Pipeline == pipeline }); i >= 0 {
		return out[i : i+1], nil
	}
	return nil, fmt.Errorf("processor: %w: no member runs pipeline %q", ErrNotFound, pipeline)
}

// clusterPipelines describes the pipelines configured here and those that
// only other live members run (each asked of one member that runs it), so
// that any member gives the same list; with name set, only that one
// (ErrNotFound when no member runs it).
func (p *Processor) clusterPipelines(ctx context.Context, name string) ([]PipelineInfo, error) {
	out := p.Pipelines()
	if p.coord != nil {
		ctx, cancel := context.WithTimeout(ctx, min(p.cfg.SnapshotTimeout, 2*time.Second))
		defer cancel()
		elsewhere := map[string][]string{}
		for _, m := range p.coord.others() {
			for _, mp := range m.Pipelines {
				if _, err := p.pipeline(mp.Name); err != nil && (name == "" || name == mp.Name) {
					elsewhere[mp.Name] = append(elsewhere[mp.Name], m.ID)
				}
			}
		}
		for _, pipe := range slices.Sorted(maps.Keys(elsewhere)) {
			for _, id := range elsewhere[pipe] {
				var infos []PipelineInfo
				if p.askMember(ctx, id, "pipelines", nil, &infos) != nil {
					continue
				}
				if i := slices.IndexFunc(infos, func(pi PipelineInfo) bool { return pi.Name == pipe }); i >= 0 {
					out = append(out, infos[i])
					break
				}
			}
		}
	}
	if name == "" {
		return out, nil
	}
	if i := slices.IndexFunc(out, func(pi PipelineInfo) bool { return pi.Name == name }); i >= 0 {
		return out[i : i+1], nil
	}
	return nil, fmt.Errorf("processor: %w: no member runs pipeline %q", ErrNotFound, name)
}

// clusterSnapshot hands over a snapshot of every changed key of pipeline
// on every member that runs it, and returns the number handed over.
func (p *Processor) clusterSnapshot(ctx context.Context, pipeline string) (int, error) {
	n, err := p.SnapshotNow(ctx, pipeline, "")
	here := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return n, err
	}
	if p.coord == nil {
		return n, err
	}
	ids, _ := p.coord.runners(pipeline)
	if len(ids) == 0 && !here {
		return 0, err
	}
	body, _ := json.Marshal(KeyRequest{Pipeline: pipeline})
	for _, id := range ids {
		var v map[string]int
		if err := p.askMember(ctx, id, "snapshot", body, &v); err != nil {
			return n, err
		}
		n += v["snapshots"]
	}
	return n, nil
}

// askMember sends a request to member id's own endpoint op and decodes
// its JSON answer into v.
func (p *Processor) askMember(ctx context.Context, id, op string, body []byte, v any) error {
	msg, err := p.conn.RequestWithContext(ctx, p.instanceSubject(id, op), body)
	if err != nil {
		return fmt.Errorf("processor: %w: %s of member %s: %w", ErrUnavailable, op, id, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return fmt.Errorf("processor: member %s: %s %s", id, code, msg.Header.Get(micro.ErrorHeader))
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		return fmt.Errorf("processor: %s of member %s: %w", op, id, err)
	}
	return nil
}

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

// startService adds the micro service. Its group "<service_name>" has the
// endpoints stats (summed over the live members), pipelines, model,
// snapshot and reset, served by any instance (one queue group): a key
// request is forwarded to the member that owns the key's partition. The
// group "<service_name>.i.<member>" has the same endpoints for this
// instance alone (stats: its own counters; key requests: answered only
// for partitions it runs). Errors carry Nats-Service-Error-Code 400 (bad
// request), 404 (unknown pipeline or key), 409 (conflict), 503 (partition
// moving or instance stopping: retry) or 500.
func (p *Processor) startService(ctx context.Context) (micro.Service, error) {
	// The counters are served by the stats endpoints, not as every
	// endpoint's stats data (which "nats micro info" would print under
	// each of them).
	bi := buildinfo.Read()
	svc, err := micro.AddService(p.conn, micro.Config{
		Name: p.cfg.ServiceName, Version: Version,
		Description: "online kernel PCA stream processor",
		Metadata:    map[string]string{"member": p.id, "build": bi.Version, "revision": bi.Revision, "go": bi.GoVersion},
	})
	if err != nil {
		return nil, fmt.Errorf("processor: micro service: %w", err)
	}
	handler := func(f func(context.Context, KeyRequest) (any, error)) micro.Handler {
		return micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) {
			kr, err := parseKeyRequest(req.Data())
			if err != nil {
				_ = req.Error(statusOf(err), err.Error(), nil)
				return
			}
			ctx, cancel := context.WithTimeout(ctx, p.cfg.SnapshotTimeout)
			defer cancel()
			v, err := f(ctx, kr)
			if err != nil {
				_ = req.Error(statusOf(err), err.Error(), nil)
				return
			}
			if b, ok := v.([]byte); ok {
				_ = req.Respond(b)
				return
			}
			_ = req.RespondJSON(v)
		})
	}
	type endpoint struct {
		name string
		desc string // the endpoint's metadata "description"
		h    func(context.Context, KeyRequest) (any, error)
	}
	keyOps := func(forward bool) []endpoint {
		scope := "the key's owner answers (forwarded)"
		if !forward {
			scope = "answered only for a partition this member runs"
		}
		return []endpoint{
			{"model", "the key's model export (kpcastream.model/v1); " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				r, err := p.controlAt(ctx, "model", kr.Pipeline, kr.Key, forward)
				return r.data, err
			}},
			{"snapshot", "save the key's snapshot now (no key: every key of the pipeline); " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				if kr.Key == "" && forward {
					n, err := p.clusterSnapshot(ctx, kr.Pipeline)
					return map[string]int{"snapshots": n}, err
				}
				if kr.Key == "" {
					n, err := p.SnapshotNow(ctx, kr.Pipeline, "")
					return map[string]int{"snapshots": n}, err
				}
				r, err := p.controlAt(ctx, "snapshot", kr.Pipeline, kr.Key, forward)
				return map[string]int{"snapshots": r.n}, err
			}},
			{"reset", "replace the key's learner and snapshot by a fresh one; " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				_, err := p.controlAt(ctx, "reset", kr.Pipeline, kr.Key, forward)
				return map[string]bool{"reset": true}, err
			}},
			{"accept", "accept the key's current regime: its control limits start a new warm-up (monitor:); " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				_, err := p.controlAt(ctx, "accept", kr.Pipeline, kr.Key, forward)
				return map[string]bool{"accepted": true}, err
			}},
		}
	}
	shared := append([]endpoint{
		{"stats", "counters of every member, summed", func(ctx context.Context, kr KeyRequest) (any, error) { return p.clusterStats(ctx, kr.Pipeline) }},
		{"pipelines", "the pipelines' settings and the keys of every member", func(ctx context.Context, kr KeyRequest) (any, error) { return p.clusterPipelines(ctx, kr.Pipeline) }},
	}, keyOps(true)...)
	own := append([]endpoint{
		{"stats", "this member's counters", func(context.Context, KeyRequest) (any, error) { return p.Stats(), nil }},
		{"pipelines", "the pipelines' settings and this member's keys", func(context.Context, KeyRequest) (any, error) { return p.Pipelines(), nil }},
	}, keyOps(false)...)
	// The member's own endpoints are named "member-<op>" (their subjects
	// are <service>.i.<member>.<op>, as before), so that each name is
	// listed once by "nats micro info".
	for _, grp := range []struct {
		prefix, name, scope string
		eps                 []endpoint
	}{{p.cfg.ServiceName, "", "cluster", shared}, {p.cfg.ServiceName + ".i." + p.id, "member-", "member", own}} {
		g := svc.AddGroup(grp.prefix)
		for _, ep := range grp.eps {
			md := map[string]string{"scope": grp.scope, "description": ep.desc, "request": `{"pipeline": "P", "key": "K"} (both optional where one is implied)`}
			if err := g.AddEndpoint(grp.name+ep.name, handler(ep.h), micro.WithEndpointSubject(ep.name), micro.WithEndpointMetadata(md)); err != nil {
				_ = svc.Stop()
				return nil, fmt.Errorf("processor: micro endpoint %s.%s: %w", grp.prefix, ep.name, err)
			}
		}
	}
	return svc, nil
}

// Handler serves /metrics (Prometheus), /healthz (200 while the process
// runs), /readyz (200 only while connected and consuming, else 503), and
// the live page /ui/ with its JSON API /api/v1/ (ui.go).
func (p *Processor) Handler() http.Handler {
	mux := http.NewServeMux()
	if p.gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(p.gatherer, promhttp.HandlerOpts{}))
	}
	p.uiRoutes(mux)
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
