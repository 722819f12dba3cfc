package processor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// The coordination bucket (checkpoint_bucket) holds
//
//	members.<id>               a heartbeat of each running instance, put every lease_ttl/3
//	partitions.<pipeline>.<n>  the ownership record of each partition (ownership.Record, JSON)
//
// Every instance watches the bucket, sees the members alive (a heartbeat
// written within lease_ttl: see observe) and the records, and applies
// ownership.Decide to each partition of each JetStream pipeline, among the members
// that run the pipeline (ownership.Candidates). See doc.go.

// memberValue is the JSON value of a member's heartbeat. Pipelines lists
// the pipelines the member runs; a heartbeat without the field comes from
// a version before per-pipeline membership (see ownership.Candidates).
type memberValue struct {
	ID        string                     `json:"id"`
	Host      string                     `json:"host"`
	PID       int                        `json:"pid"`
	Started   time.Time                  `json:"started"`
	Renewed   time.Time                  `json:"renewed"`
	Pipelines []ownership.MemberPipeline `json:"pipelines"`
}

// memberFrom reads a heartbeat's value; an unreadable one counts as a
// legacy member that runs nothing it does not own.
func memberFrom(id string, v []byte) ownership.Member {
	var mv memberValue
	if err := json.Unmarshal(v, &mv); err != nil {
		return ownership.Member{ID: id, Legacy: true}
	}
	return ownership.Member{ID: id, Started: mv.Started, Pipelines: mv.Pipelines, Legacy: mv.Pipelines == nil}
}

func memberKey(id string) string { return "members." + id }

func recordKey(pc PipelineConfig, n int) string { return recordKeyOf(pc.Name, n) }

func recordKeyOf(pipeline string, n int) string {
	return "partitions." + pipeline + "." + strconv.Itoa(n)
}

// seen is a member key's last revision, when it was written (on this
// instance's clock: see observe) and what its heartbeat announces.
type seen struct {
	rev  uint64
	at   time.Time
	info ownership.Member
}

// coordinator runs this instance's membership and partition ownership.
type coordinator struct {
	p       *Processor
	kv      jetstream.KeyValue
	started time.Time
	self    ownership.Member // what this member's heartbeat announces
	log     *zap.Logger

	mu      sync.Mutex
	members map[string]seen
	records map[string]ownership.View
	synced  bool            // the watcher delivered the bucket's initial values
	outside map[string]bool // pipelines whose layout here lost to another (warned once)

	kick   chan struct{}
	parts  errgroup.Group  // the partitions' goroutines, joined by run
	calls  errgroup.Group  // takes and abandons in flight, joined by run
	flying map[string]bool // record keys with a take or abandon in flight (under mu)
	fatal  chan error
}

func newCoordinator(p *Processor, kv jetstream.KeyValue) *coordinator {
	c := &coordinator{p: p, kv: kv, started: time.Now(), log: p.log.Named("coord"),
		members: map[string]seen{}, records: map[string]ownership.View{}, outside: map[string]bool{},
		flying: map[string]bool{}, kick: make(chan struct{}, 1), fatal: make(chan error, 1)}
	c.self = ownership.Member{ID: p.id, Started: c.started.UTC(), Pipelines: []ownership.MemberPipeline{}}
	for _, pl := range p.pipes {
		c.self.Pipelines = append(c.self.Pipelines, ownership.MemberPipeline{Name: pl.cfg.Name, Partitions: pl.cfg.Partitions, Layout: layoutOf(pl.cfg)})
	}
	return c
}

func (c *coordinator) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run heartbeats, watches the bucket and takes, releases and abandons
// partitions until ctx ends; then it leaves: it removes its heartbeat,
// stops every partition it runs gracefully (final snapshots, record
// released) and releases any record that still names it. A partition's
// fatal error (invalid learner configuration) is returned.
//
// The heartbeat has a goroutine of its own, and each take or abandon of
// a record runs on a goroutine of its own with a short deadline
// (takeTimeout), so that no coordination call holds up the others: a
// bucket without a leader delays each partition by one attempt, not the
// member's every take in turn (issue 28).
func (c *coordinator) run(ctx context.Context) error {
	p := c.p
	// The first heartbeat lands before the watcher starts: its server
	// timestamp dates the watcher's initial values (observeInitial).
	c.heartbeat(ctx)
	var bg errgroup.Group
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	bg.Go(func() error { c.watch(wctx); return nil })
	hctx, cancelBeat := context.WithCancel(ctx)
	defer cancelBeat()
	var beat errgroup.Group
	beat.Go(func() error { c.heartbeatLoop(hctx); return nil })

	gc := time.NewTicker(max(p.cfg.LeaseTTL/3, 5*time.Millisecond))
	defer gc.Stop()
	tick := time.NewTicker(max(p.cfg.LeaseTTL/10, 5*time.Millisecond))
	defer tick.Stop()
	var fatal error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case fatal = <-c.fatal:
			break loop
		case <-gc.C:
			c.collect(ctx)
		case <-tick.C:
			c.evaluate(ctx)
		case <-c.kick:
			c.evaluate(ctx)
		}
	}
	// Leave: stop heartbeating and remove the heartbeat first, so the
	// others assign this member's partitions elsewhere and take each one as
	// soon as it is released; then stop every partition (graceful unless
	// fenced), and release what the records still say this member owns (a
	// take that landed as the stop began, a partition that could not start).
	cancelBeat()
	_ = beat.Wait()
	// Takes in flight end within takeTimeout; one that lands now sees ctx
	// cancelled and releases its record instead of starting.
	_ = c.calls.Wait()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout)
	if err := c.kv.Delete(dctx, memberKey(p.id)); err != nil {
		c.log.Warn("remove heartbeat", zap.Error(err))
	}
	cancel()
	for _, pl := range p.pipes {
		for i := range pl.parts {
			if pt := pl.parts[i].Load(); pt != nil {
				pt.requestStop()
			}
		}
	}
	_ = c.parts.Wait()
	c.releaseOwned(context.WithoutCancel(ctx))
	cancelWatch()
	_ = bg.Wait()
	if fatal == nil {
		select {
		case fatal = <-c.fatal:
		default:
		}
	}
	return fatal
}

// heartbeatLoop puts this member's heartbeat every lease_ttl/3 until ctx
// ends. Each put is bounded by lease_ttl/3, so a slow one never delays the
// next by more than that.
func (c *coordinator) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(max(c.p.cfg.LeaseTTL/3, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.heartbeat(ctx)
		}
	}
}

// heartbeat puts this member's key.
func (c *coordinator) heartbeat(ctx context.Context) {
	p := c.p
	host, _ := os.Hostname()
	v, _ := json.Marshal(memberValue{ID: p.id, Host: host, PID: os.Getpid(), Started: c.self.Started, Renewed: time.Now().UTC(),
		Pipelines: c.self.Pipelines})
	hctx, cancel := context.WithTimeout(ctx, min(p.cfg.SnapshotTimeout, max(p.cfg.LeaseTTL/3, 100*time.Millisecond)))
	defer cancel()
	if _, err := c.kv.Put(hctx, memberKey(p.id), v); err != nil && ctx.Err() == nil {
		c.log.Warn("heartbeat", zap.Error(err))
	}
}

// releaseOwned releases every record of this member's pipelines that still
// names it, read from the bucket stream's leader (not the watcher, which
// may lag, nor a KV Get, which a replica behind answers: its last write
// of a record may be the one the replica lacks, and the record was left
// naming a member that left — TestReleaseOwnedReadsTheLeader), by
// compare-and-set with the record's own checkpoint — which a renewal only
// ever moves to a sequence whose effects are saved, so the next owner
// replays from a safe place. Called when leaving, after every partition
// stopped, so nothing of this member writes any more; bounded by
// shutdown_timeout in all.
func (c *coordinator) releaseOwned(ctx context.Context) {
	p := c.p
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ShutdownTimeout)
	defer cancel()
	for _, pl := range p.pipes {
		if pl.cfg.Input.Stream == "" {
			continue
		}
		for n := range pl.parts {
			key := recordKey(pl.cfg, n)
			v, rev, err := p.leaderGet(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				c.log.Warn("read partition record when leaving", zap.String("pipeline", pl.cfg.Name), zap.Int("partition", n), zap.Error(err))
				continue
			}
			r, err := ownership.DecodeRecord(v)
			if err != nil || r.Owner != p.id {
				continue
			}
			if err := c.releaseRecord(ctx, key, r, rev); err != nil {
				c.log.Warn("release partition when leaving (another member takes it over after lease_ttl)",
					zap.String("pipeline", pl.cfg.Name), zap.Int("partition", n), zap.Error(err))
				continue
			}
			c.log.Info("released a partition record left naming this member", zap.String("pipeline", pl.cfg.Name), zap.Int("partition", n),
				zap.Uint64("epoch", r.Epoch), zap.Uint64("checkpoint", r.Checkpoint))
		}
	}
}

// releaseRecord writes r with no owner by compare-and-set on rev.
func (c *coordinator) releaseRecord(ctx context.Context, key string, r ownership.Record, rev uint64) error {
	r.Owner, r.Renewed = "", time.Now().UTC()
	_, err := c.kv.Update(ctx, key, r.Encode(), rev)
	return err
}

// watch follows the bucket's members and records until ctx ends; the
// watcher (an ordered consumer) recovers from disconnections by itself.
func (c *coordinator) watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := c.kv.WatchFiltered(ctx, []string{"members.>", "partitions.>"})
		if err != nil {
			c.log.Warn("watch coordination bucket; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		// This member's own heartbeat comes through every lease_ttl/3: a
		// watcher silent for lease_ttl is stale (its consumer is still
		// recovering from a lost server, say) and is made anew, which
		// delivers every current value again.
		stale := time.NewTimer(c.p.cfg.LeaseTTL)
		var initial []jetstream.KeyValueEntry
		inInitial := true
	updates:
		for {
			select {
			case <-ctx.Done():
				stale.Stop()
				_ = w.Stop()
				return
			case <-stale.C:
				c.log.Info("coordination watcher silent for lease_ttl; watching anew")
				break updates
			case e, ok := <-w.Updates():
				if !ok {
					break updates
				}
				switch {
				case inInitial && e != nil:
					initial = append(initial, e)
				case inInitial:
					c.observeInitial(initial)
					initial, inInitial = nil, false
				default:
					c.observe(e, time.Now(), false)
				}
				c.poke()
				if !stale.Stop() {
					select {
					case <-stale.C:
					default:
					}
				}
				stale.Reset(c.p.cfg.LeaseTTL)
			}
		}
		stale.Stop()
		_ = w.Stop()
		if len(initial) > 0 {
			c.observeInitial(initial)
		}
	}
}

// observeInitial records a watcher's initial values (the bucket as it
// stands) and marks the view synced. A value is dated by its own server
// timestamp relative to the latest of them (ownership.Backdate), not by when it
// arrived here: a crashed member's heartbeat, or a record its owner
// stopped renewing, is as old to a newcomer as to everyone else, so the
// newcomer neither counts a dead member alive nor restarts the wait for
// its partitions. Later updates are fresh puts, dated on arrival.
func (c *coordinator) observeInitial(es []jetstream.KeyValueEntry) {
	now := time.Now()
	var ref time.Time
	for _, e := range es {
		if t := e.Created(); t.After(ref) {
			ref = t
		}
	}
	for _, e := range es {
		c.observe(e, ownership.Backdate(now, ref, e.Created()), false)
	}
	c.mu.Lock()
	c.synced = true
	c.mu.Unlock()
}

// observe records one watcher update, written at at on this member's
// clock; read: a read's answer (refresh), dropped when older than the view.
func (c *coordinator) observe(e jetstream.KeyValueEntry, at time.Time, read bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	del := e.Operation() != jetstream.KeyValuePut
	switch k := e.Key(); {
	case strings.HasPrefix(k, "members."):
		id := strings.TrimPrefix(k, "members.")
		if del {
			delete(c.members, id)
		} else if s, ok := c.members[id]; !ok || s.rev != e.Revision() {
			c.members[id] = seen{rev: e.Revision(), at: at, info: memberFrom(id, e.Value())}
		}
	case strings.HasPrefix(k, "partitions."):
		v := c.records[k]
		if v.Rev == e.Revision() || (read && v.Rev > e.Revision()) {
			return
		}
		v = ownership.View{Rev: e.Revision(), SeenAt: at}
		if !del {
			r, err := ownership.DecodeRecord(e.Value())
			if err != nil {
				c.log.Error("unreadable partition record; treated as released", zap.String("key", k), zap.Error(err))
			} else {
				v.Exists, v.Rec = true, r
			}
		}
		c.records[k] = v
	}
}

// memberGC is how long, in lease_ttls, a member's heartbeat may stand
// still before any member deletes it.
const memberGC = 10

// collect deletes the heartbeats of members gone for memberGC·lease_ttl
// (crashed: a graceful leave deletes its own), so that the bucket and
// every member's view stay bounded by the members alive, not by how many
// instances ever ran. The delete is conditional on the revision seen: a
// member that comes back meanwhile keeps its key.
func (c *coordinator) collect(ctx context.Context) {
	now := time.Now()
	c.mu.Lock()
	var gone []string
	var revs []uint64
	for id, s := range c.members {
		if id != c.p.id && now.Sub(s.at) >= memberGC*c.p.cfg.LeaseTTL {
			gone, revs = append(gone, id), append(revs, s.rev)
		}
	}
	c.mu.Unlock()
	for i, id := range gone {
		dctx, cancel := context.WithTimeout(ctx, c.p.cfg.SnapshotTimeout)
		err := c.kv.Delete(dctx, memberKey(id), jetstream.LastRevision(revs[i]))
		cancel()
		if err == nil {
			c.log.Info("removed the heartbeat of a member gone for 10 × lease_ttl", zap.String("member", id))
		}
	}
}

// refresh reads a record directly after a compare-and-set on it failed:
// the watcher may not have delivered its latest revision yet (a write
// whose reply was lost with a server, say). A read older than the view
// is dropped: a KV Get is a direct get, which a replica behind answers,
// and a view set back to an older record, that no write corrected, left
// a partition never taken again (issue 28, sim seed 10955:
// TestRefreshKeepsTheNewerView).
func (c *coordinator) refresh(ctx context.Context, key string) {
	e, err := c.kv.Get(ctx, key)
	if err == nil {
		c.observe(e, time.Now(), true)
	}
}

// alive returns the members whose heartbeat was written within lease_ttl,
// and this member, sorted by id. Call with c.mu held.
func (c *coordinator) alive(now time.Time) []ownership.Member {
	out := []ownership.Member{c.self}
	for id, s := range c.members {
		if id != c.p.id && now.Sub(s.at) < c.p.cfg.LeaseTTL {
			out = append(out, s.info)
		}
	}
	slices.SortFunc(out, func(a, b ownership.Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// others returns the live members other than this one.
func (c *coordinator) others() []ownership.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ownership.Member
	for _, m := range c.alive(time.Now()) {
		if m.ID != c.p.id {
			out = append(out, m)
		}
	}
	return out
}

// runners returns the live members other than this one whose heartbeats
// announce pipeline, and the partition count announced by the one that
// has run it longest (0 when none does).
func (c *coordinator) runners(pipeline string) ([]string, int) {
	var ids []string
	var first *ownership.Member
	parts := 0
	for _, m := range c.others() {
		for _, mp := range m.Pipelines {
			if mp.Name != pipeline {
				continue
			}
			ids = append(ids, m.ID)
			if first == nil || m.Started.Before(first.Started) {
				first, parts = &m, mp.Partitions
			}
		}
	}
	return ids, parts
}

// view returns this member's view of a record.
func (c *coordinator) view(key string) ownership.View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records[key]
}

// Owner returns the owner named by a partition's record as this member
// last saw it ("" when released or unknown).
func (c *coordinator) owner(pc PipelineConfig, n int) (string, uint64) {
	v := c.view(recordKey(pc, n))
	if !v.Exists {
		return "", 0
	}
	return v.Rec.Owner, v.Rec.Epoch
}
