package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"
	"golang.org/x/sync/errgroup"

	"github.com/kpcastream/kpcastream/internal/buildinfo"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Control runs a request on the worker of key: here when its partition
// runs here, else — with forward — forwarded to the member that owns the
// key's partition (for a pipeline configured only on other members too,
// found from their heartbeats).
func (s *Server) Control(ctx context.Context, op Op, pipeline, key string, forward bool) (Reply, error) {
	members := s.v.Members()
	pl, err := s.v.Pipeline(pipeline)
	if err != nil {
		if forward && members != nil {
			return s.controlElsewhere(ctx, members, op, pipeline, key, err)
		}
		return Reply{}, err
	}
	if key == "" {
		return Reply{}, fmt.Errorf("processor: %w: key is required", ErrBadRequest)
	}
	n := ownership.PartitionOf(key, pl.Partitions)
	if r, ran, err := s.c.Run(ctx, op, pipeline, key, n); ran {
		return r, err
	}
	if forward && members != nil {
		if owner := members.Owner(pipeline, n); owner != "" && owner != s.v.Member() {
			return s.forward(ctx, owner, op, KeyRequest{Pipeline: pipeline, Key: key})
		}
	}
	return Reply{}, noOwner(n, pipeline, key)
}

func noOwner(n int, pipeline, key string) error {
	return fmt.Errorf("processor: %w: partition %d of pipeline %s (key %q) has no running owner at the moment; retry",
		ErrUnavailable, n, pipeline, key)
}

// controlElsewhere forwards a key request for a pipeline not configured
// here to the member owning the key's partition, found from the
// heartbeats of the members that run the pipeline (its partition count)
// and the partition's record; notHere when no live member runs it.
func (s *Server) controlElsewhere(ctx context.Context, members Members, op Op, pipeline, key string, notHere error) (Reply, error) {
	ids, parts := members.Runners(pipeline)
	if len(ids) == 0 {
		return Reply{}, notHere
	}
	if key == "" {
		return Reply{}, fmt.Errorf("processor: %w: key is required", ErrBadRequest)
	}
	n := ownership.PartitionOf(key, parts)
	owner := members.Owner(pipeline, n)
	if owner == "" {
		return Reply{}, noOwner(n, pipeline, key)
	}
	return s.forward(ctx, owner, op, KeyRequest{Pipeline: pipeline, Key: key})
}

// instanceSubject is the subject of op on member id's own endpoints.
func (s *Server) instanceSubject(id, op string) string {
	return s.cfg.Service + ".i." + id + "." + op
}

// forward sends a key request to member id's own endpoint.
func (s *Server) forward(ctx context.Context, id string, op Op, kr KeyRequest) (Reply, error) {
	body, _ := json.Marshal(kr)
	msg, err := s.cfg.Conn.RequestWithContext(ctx, s.instanceSubject(id, op.String()), body)
	if err != nil {
		return Reply{}, fmt.Errorf("processor: %w: forward %s to member %s: %w", ErrUnavailable, op, id, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		desc := msg.Header.Get(micro.ErrorHeader)
		switch code {
		case "404":
			return Reply{}, fmt.Errorf("%w: %s", ErrNotFound, desc)
		case "400":
			return Reply{}, fmt.Errorf("%w: %s", ErrBadRequest, desc)
		case "409":
			return Reply{}, fmt.Errorf("%w: %s", snapshot.ErrConflict, desc)
		case "503":
			return Reply{}, fmt.Errorf("%w: %s", ErrUnavailable, desc)
		}
		return Reply{}, fmt.Errorf("processor: member %s: %s %s", id, code, desc)
	}
	r := Reply{Data: msg.Data}
	if op == OpSnapshot {
		var v map[string]int
		if json.Unmarshal(msg.Data, &v) == nil {
			r.N = v["snapshots"]
		}
	}
	return r, nil
}

// askTimeout bounds the requests to the other members of one stats or
// pipelines request: min(snapshot_timeout, 2s).
func (s *Server) askTimeout() time.Duration { return min(s.cfg.Timeout, 2*time.Second) }

// clusterStats sums, per pipeline, the stats of every live member of the
// coordination bucket (asked on its own endpoint; those that do not answer
// within the request's time are left out) with this instance's: every
// pipeline any of them runs, each summed over the members that run it, so
// that the answer does not depend on which member took the request (two
// deployments sharing a bucket and a service name see each other's
// pipelines, never one's counters under the other's name). With pipeline
// set, only that pipeline's entry (ErrNotFound when no member runs it).
func (s *Server) clusterStats(ctx context.Context, pipeline string) ([]PipelineStats, error) {
	out := s.v.Stats()
	own := len(out)
	if members := s.v.Members(); members != nil {
		ctx, cancel := context.WithTimeout(ctx, s.askTimeout())
		defer cancel()
		// One goroutine per member, joined before the answer.
		var mu sync.Mutex
		var g errgroup.Group
		for _, m := range members.Others() {
			g.Go(func() error {
				var st []PipelineStats
				if s.askMember(ctx, m.ID, "stats", nil, &st) != nil {
					return nil // left out
				}
				mu.Lock()
				out = mergeStats(out, st)
				mu.Unlock()
				return nil
			})
		}
		_ = g.Wait()
	}
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
func (s *Server) clusterPipelines(ctx context.Context, name string) ([]PipelineInfo, error) {
	out := s.v.Pipelines()
	if members := s.v.Members(); members != nil {
		ctx, cancel := context.WithTimeout(ctx, s.askTimeout())
		defer cancel()
		elsewhere := map[string][]string{}
		for _, m := range members.Others() {
			for _, mp := range m.Pipelines {
				if _, err := s.v.Pipeline(mp.Name); err != nil && (name == "" || name == mp.Name) {
					elsewhere[mp.Name] = append(elsewhere[mp.Name], m.ID)
				}
			}
		}
		for _, pipe := range slices.Sorted(maps.Keys(elsewhere)) {
			for _, id := range elsewhere[pipe] {
				var infos []PipelineInfo
				if s.askMember(ctx, id, "pipelines", nil, &infos) != nil {
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
func (s *Server) clusterSnapshot(ctx context.Context, pipeline string) (int, error) {
	n, err := s.c.SnapshotAll(ctx, pipeline)
	here := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return n, err
	}
	members := s.v.Members()
	if members == nil {
		return n, err
	}
	ids, _ := members.Runners(pipeline)
	if len(ids) == 0 && !here {
		return 0, err
	}
	body, _ := json.Marshal(KeyRequest{Pipeline: pipeline})
	for _, id := range ids {
		var v map[string]int
		if err := s.askMember(ctx, id, OpSnapshot.String(), body, &v); err != nil {
			return n, err
		}
		n += v["snapshots"]
	}
	return n, nil
}

// askMember sends a request to member id's own endpoint op and decodes
// its JSON answer into v.
func (s *Server) askMember(ctx context.Context, id, op string, body []byte, v any) error {
	msg, err := s.cfg.Conn.RequestWithContext(ctx, s.instanceSubject(id, op), body)
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

// Start adds the micro service; the caller stops it. Its group
// "<service_name>" has the endpoints stats (summed over the live
// members), pipelines, model, snapshot, reset and accept, served by any
// instance (one queue group): a key request is forwarded to the member
// that owns the key's partition. The group "<service_name>.i.<member>"
// has the same endpoints for this instance alone (stats: its own
// counters; key requests: answered only for partitions it runs). Errors
// carry Nats-Service-Error-Code 400 (bad request), 404 (unknown pipeline
// or key), 409 (conflict), 503 (partition moving or instance stopping:
// retry) or 500. The handlers run on the connection's goroutines, each
// request bounded by Timeout and by ctx; Stop stops the service and waits
// for them.
func (s *Server) Start(ctx context.Context) (micro.Service, error) {
	// The counters are served by the stats endpoints, not as every
	// endpoint's stats data (which "nats micro info" would print under
	// each of them).
	bi := buildinfo.Read()
	member := s.v.Member()
	svc, err := micro.AddService(s.cfg.Conn, micro.Config{
		Name: s.cfg.Service, Version: s.cfg.Version,
		Description: "online kernel PCA stream processor",
		Metadata:    map[string]string{"member": member, "build": bi.Version, "revision": bi.Revision, "go": bi.GoVersion},
	})
	if err != nil {
		return nil, fmt.Errorf("processor: micro service: %w", err)
	}
	handler := func(f func(context.Context, KeyRequest) (any, error)) micro.Handler {
		return micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) {
			if !s.enter() {
				err := fmt.Errorf("processor: %w: member %s is stopping", ErrUnavailable, member)
				_ = req.Error(StatusOf(err), err.Error(), nil)
				return
			}
			defer s.leave()
			kr, err := parseKeyRequest(req.Data())
			if err != nil {
				_ = req.Error(StatusOf(err), err.Error(), nil)
				return
			}
			ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			defer cancel()
			v, err := f(ctx, kr)
			if err != nil {
				_ = req.Error(StatusOf(err), err.Error(), nil)
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
			{OpModel.String(), "the key's model export (kpcastream.model/v1); " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				r, err := s.Control(ctx, OpModel, kr.Pipeline, kr.Key, forward)
				return r.Data, err
			}},
			{OpSnapshot.String(), "save the key's snapshot now (no key: every key of the pipeline); " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				if kr.Key == "" && forward {
					n, err := s.clusterSnapshot(ctx, kr.Pipeline)
					return map[string]int{"snapshots": n}, err
				}
				if kr.Key == "" {
					n, err := s.c.SnapshotAll(ctx, kr.Pipeline)
					return map[string]int{"snapshots": n}, err
				}
				r, err := s.Control(ctx, OpSnapshot, kr.Pipeline, kr.Key, forward)
				return map[string]int{"snapshots": r.N}, err
			}},
			{OpReset.String(), "replace the key's learner and snapshot by a fresh one; " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				_, err := s.Control(ctx, OpReset, kr.Pipeline, kr.Key, forward)
				return map[string]bool{"reset": true}, err
			}},
			{OpAccept.String(), "accept the key's current regime: its control limits start a new warm-up (monitor:); " + scope, func(ctx context.Context, kr KeyRequest) (any, error) {
				_, err := s.Control(ctx, OpAccept, kr.Pipeline, kr.Key, forward)
				return map[string]bool{"accepted": true}, err
			}},
		}
	}
	shared := append([]endpoint{
		{"stats", "counters of every member, summed", func(ctx context.Context, kr KeyRequest) (any, error) { return s.clusterStats(ctx, kr.Pipeline) }},
		{"pipelines", "the pipelines' settings and the keys of every member", func(ctx context.Context, kr KeyRequest) (any, error) { return s.clusterPipelines(ctx, kr.Pipeline) }},
	}, keyOps(true)...)
	own := append([]endpoint{
		{"stats", "this member's counters", func(context.Context, KeyRequest) (any, error) { return s.v.Stats(), nil }},
		{"pipelines", "the pipelines' settings and this member's keys", func(context.Context, KeyRequest) (any, error) { return s.v.Pipelines(), nil }},
	}, keyOps(false)...)
	// The member's own endpoints are named "member-<op>" (their subjects
	// are <service>.i.<member>.<op>, as before), so that each name is
	// listed once by "nats micro info".
	for _, grp := range []struct {
		prefix, name, scope string
		eps                 []endpoint
	}{{s.cfg.Service, "", "cluster", shared}, {s.cfg.Service + ".i." + member, "member-", "member", own}} {
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

// enter counts a request in flight; false once Stop has begun.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.inflight++
	return true
}

// leave ends a request counted by enter.
func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight--; s.inflight == 0 {
		s.idle.Broadcast()
	}
}

// Stop stops svc (the service Start returned), refuses the requests it
// still delivers (503: stopping) and waits for those in flight, each
// bounded by Timeout and by Start's ctx: once it returns, no handler of
// the service runs.
func (s *Server) Stop(svc micro.Service) error {
	err := svc.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for s.inflight > 0 {
		s.idle.Wait()
	}
	return err
}
