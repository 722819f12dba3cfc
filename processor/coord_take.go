package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// Taking partitions: which this member should run (evaluate), each take
// on a goroutine of its own with a short deadline (async, take), and the
// layout a record was taken under.

// evaluate applies ownership.Decide to every partition.
func (c *coordinator) evaluate(ctx context.Context) {
	p := c.p
	c.mu.Lock()
	if !c.synced {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	alive := c.alive(now)
	c.mu.Unlock()
	for _, pl := range p.pipes {
		if pl.cfg.Input.Stream == "" {
			continue
		}
		views := make([]ownership.View, len(pl.parts))
		owners := make([]string, len(pl.parts))
		for n := range pl.parts {
			views[n] = c.view(recordKey(pl.cfg, n))
			if views[n].Exists {
				owners[n] = views[n].Rec.Owner
			}
			if pl.parts[n].Load() != nil {
				owners[n] = p.id
			}
		}
		cands, layout := ownership.Candidates(alive, pl.cfg.Name, owners)
		c.warnOutside(pl.cfg, cands, layout)
		targets := ownership.AssignTargets(cands, pl.cfg.Name, owners)
		for n := range pl.parts {
			key := recordKey(pl.cfg, n)
			v := views[n]
			pt := pl.parts[n].Load()
			switch ownership.Decide(p.id, targets[n], v, pt != nil, now, p.cfg.LeaseTTL) {
			case ownership.Take:
				c.async(ctx, key, func() { c.take(ctx, pl, n, v) })
			case ownership.Release:
				// Once per handover: evaluate runs again (every tick, every
				// watched update) until the partition has stopped.
				if pt.requestStop() {
					c.log.Info("partition assigned to another member; releasing it", zap.String("pipeline", pl.cfg.Name), zap.Int("partition", n),
						zap.String("to", targets[n]))
				}
			case ownership.Abandon:
				c.async(ctx, key, func() { c.abandon(ctx, pl, n, v) })
			}
		}
	}
}

// async runs f, a take or an abandon of the record key, on a goroutine
// of its own unless one of key is in flight; evaluate runs again when it
// ends.
func (c *coordinator) async(ctx context.Context, key string, f func()) {
	c.mu.Lock()
	if c.flying[key] || ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	c.flying[key] = true
	c.mu.Unlock()
	c.calls.Go(func() error {
		f()
		c.mu.Lock()
		delete(c.flying, key)
		c.mu.Unlock()
		c.poke()
		return nil
	})
}

// takeTimeout bounds one take, abandon or release of a record: a quarter
// of lease_ttl (at most snapshot_timeout), so that one lost answer costs
// a partition that much, not snapshot_timeout; a write that landed with
// its answer lost is seen by refresh and taken again under a new epoch.
func (p *Processor) takeTimeout() time.Duration {
	return min(max(p.cfg.LeaseTTL/4, 100*time.Millisecond), p.cfg.SnapshotTimeout)
}

// warnOutside logs, once per change, that this member's layout of pc lost
// to the one the members sharing its partitions run (ownership.Candidates): it runs
// none of them until those members have left.
func (c *coordinator) warnOutside(pc PipelineConfig, cands []string, layout string) {
	out := !slices.Contains(cands, c.p.id)
	c.mu.Lock()
	was := c.outside[pc.Name]
	c.outside[pc.Name] = out
	c.mu.Unlock()
	if out && !was {
		c.log.Warn("other members run this pipeline with another partition layout (input stream, subject, key token or partitions); "+
			"this member takes none of its partitions until they have left", zap.String("pipeline", pc.Name),
			zap.String("layout", layoutOf(pc)), zap.String("their_layout", layout), zap.Strings("members", cands))
	}
}

// runsAlready reports whether partition n of pl runs here, though
// evaluate decided to take or abandon it on a reading that said it did
// not. evaluate reads the partitions before it hands the take or abandon
// to async, and a take of the same record that ended in between (async
// runs one per record at a time) started it: the record, seen through the
// watcher, names this member at the new epoch. Taken again, the running
// epoch was fenced by its own member 8 ms after it started (issue 28, a
// stressed TestOwnSaveAnswerLost); abandoned, its next renewal found the
// record moved. Read here, inside async's turn for the record, the
// reading is current: a take stores its partition before its turn ends.
func runsAlready(pl *pipeline, n int) bool { return pl.parts[n].Load() != nil }

// abandon releases a record that names this member, which does not run
// its partition and is not its target.
func (c *coordinator) abandon(ctx context.Context, pl *pipeline, n int, v ownership.View) {
	if runsAlready(pl, n) {
		return
	}
	key := recordKey(pl.cfg, n)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.p.takeTimeout())
	defer cancel()
	if err := c.releaseRecord(uctx, key, v.Rec, v.Rev); err != nil {
		if !isRevisionMismatch(err) {
			c.log.Warn("abandon partition", zap.String("pipeline", pl.cfg.Name), zap.Int("partition", n), zap.Error(err))
		}
		c.refresh(uctx, key)
	}
}

// take writes the record {self, epoch+1, checkpoint} by compare-and-set on
// the revision seen, and starts the partition. The write survives ctx's
// cancellation (bounded by takeTimeout): a take that lands after the
// stop began is released at once, never left naming a member that exits.
func (c *coordinator) take(ctx context.Context, pl *pipeline, n int, v ownership.View) {
	if runsAlready(pl, n) {
		return
	}
	p := c.p
	pc := pl.cfg
	key := recordKey(pc, n)
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.takeTimeout())
	defer cancel()
	rec := ownership.Record{Owner: p.id, Epoch: 1, Checkpoint: 1}
	prev := "nobody"
	if v.Exists {
		rec.Epoch, rec.Checkpoint = v.Rec.Epoch+1, max(v.Rec.Checkpoint, 1)
		if v.Rec.Owner != "" {
			prev = v.Rec.Owner
		}
	} else if pc.Partitions == 1 {
		// Migration: the checkpoint of versions before partitions.
		if cp, err := p.legacyCheckpoint(tctx, pc); err != nil {
			c.log.Warn("read the checkpoint of an earlier version; not taking the partition yet", zap.String("pipeline", pc.Name), zap.Error(err))
			return
		} else if cp > 0 {
			rec.Checkpoint = cp
		}
	}
	rec.Renewed = time.Now().UTC()
	granted := time.Now()
	var rev uint64
	var err error
	if v.Exists || v.Rev != 0 {
		rev, err = c.kv.Update(tctx, key, rec.Encode(), v.Rev)
	} else {
		rev, err = c.kv.Create(tctx, key, rec.Encode())
	}
	if err != nil {
		if !isRevisionMismatch(err) && p.conn.IsConnected() {
			c.log.Warn("take partition", zap.String("pipeline", pc.Name), zap.Int("partition", n), zap.Error(err))
		}
		c.refresh(tctx, key)
		return
	}
	if ctx.Err() != nil {
		if err := c.releaseRecord(tctx, key, rec, rev); err != nil {
			c.log.Warn("release a partition taken as the stop began", zap.String("pipeline", pc.Name), zap.Int("partition", n), zap.Error(err))
		}
		return
	}
	if prev != "nobody" && prev != p.id {
		p.met.takeovers.WithLabelValues(pc.Name).Inc()
		c.log.Warn("partition taken over from a member that stopped renewing it", zap.String("pipeline", pc.Name),
			zap.Int("partition", n), zap.String("from", prev), zap.Uint64("epoch", rec.Epoch))
	} else {
		c.log.Info("partition taken", zap.String("pipeline", pc.Name), zap.Int("partition", n), zap.Uint64("epoch", rec.Epoch),
			zap.Uint64("checkpoint", rec.Checkpoint))
	}
	pt := p.newPartition(pl, n, rec.Epoch, rev, rec.Checkpoint, granted)
	pl.parts[n].Store(pt)
	c.parts.Go(func() error {
		err := pt.run(ctx)
		pl.parts[n].CompareAndSwap(pt, nil)
		if err != nil {
			if classifyAction(err) == actFatal {
				select {
				case c.fatal <- err:
				default:
				}
			} else if !errors.Is(err, errFenced) {
				c.log.Warn("partition stopped", zap.String("pipeline", pc.Name), zap.Int("partition", n), zap.Error(err))
			}
		}
		c.poke()
		return nil // reported above: the partition's error is its own
	})
}

// legacyCheckpoint returns the replay checkpoint written by versions
// before partitions for pc's durable consumer (0 when there is none).
func (p *Processor) legacyCheckpoint(ctx context.Context, pc PipelineConfig) (uint64, error) {
	for _, key := range []string{"checkpoint." + pc.Input.Stream + "." + pc.Input.Durable, pc.Name} {
		e, err := p.coord.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil || v == 0 {
			return 0, fmt.Errorf("processor: pipeline %s: checkpoint %s holds %q, not a stream sequence", pc.Name, key, e.Value())
		}
		return v, nil
	}
	return 0, nil
}

// layoutOf is the fingerprint of pc's partition layout (ownership.Layout).
// With several shards the stream is the list of the shard streams, so
// members that spread the partitions over other streams never share them;
// with one, the fingerprint is the one of versions before shards.
func layoutOf(pc PipelineConfig) string {
	kt := 0
	if pc.KeyToken != nil {
		kt = *pc.KeyToken
	}
	return ownership.Layout(strings.Join(pc.InputStreams(), ","), pc.Input.Subject, kt, pc.Partitions)
}
