package processor

import (
	"context"
	"errors"
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The partition's ownership record: renewing it with the checkpoint,
// releasing it, and whether this member still owns it.

// stillOwned reports whether the partition's record still names this
// owner at this epoch. Records never go back in epoch, so when it does, no
// newer owner of this partition ever wrote: a snapshot with a higher
// epoch comes from another partition layout (a pipeline whose partition
// count changed) and may be claimed. The record is read from the bucket
// stream's leader (leaderGet): a KV Get, answered by a replica behind,
// named this epoch after a newer owner had taken the partition and
// written the snapshot, and a zombie claimed the key over it (issue 28,
// TestStillOwnedReadsTheLeader). When the record cannot be read it
// reports false (the caller fences itself: the safe side).
func (pt *partition) stillOwned(ctx context.Context) bool {
	v, _, err := pt.p.leaderGet(ctx, recordKey(pt.pipe.cfg, pt.num))
	if err != nil {
		return false
	}
	r, err := ownership.DecodeRecord(v)
	return err == nil && r.Owner == pt.p.id && r.Epoch == pt.epoch
}

// renewEvery is the period of ownership renewals (each also writes the
// checkpoint): lease_ttl/6, or checkpoint_every when shorter. The fence
// holds lease_ttl/2 from the last successful renewal's send, so a renewal
// due lease_ttl/6 after it leaves lease_ttl/3 for two attempts of
// renewAttempt (lease_ttl/6) each.
func (p *Processor) renewEvery() time.Duration {
	return max(min(p.cfg.LeaseTTL/6, p.cfg.CheckpointEvery), 5*time.Millisecond)
}

// renewAttempt bounds one renewal attempt: lease_ttl/6 (at most
// snapshot_timeout), so that a second attempt fits before the fence
// expires when the first is lost.
func (p *Processor) renewAttempt() time.Duration {
	return min(max(p.cfg.LeaseTTL/6, 5*time.Millisecond), p.cfg.SnapshotTimeout)
}

// renewLoop renews the ownership record until ctx ends or the fence is
// revoked. A renewal that finds the record moved revokes the fence; so
// does failing to renew for lease_ttl/2. Each renewal is due renewEvery
// after the last successful one was sent (the take's, at first), which
// is when the fence's lease_ttl/2 began; a renewal that failed is tried
// again at once, so that one lost answer does not cost the fence. Before
// (issue 28), a renewal was due lease_ttl/3 after the last one's answer
// and an attempt could take lease_ttl/4: one lost attempt alone
// (lease_ttl/3 + lease_ttl/4 > lease_ttl/2) expired the fence before the
// retry, so a single request lost with a server stopped the partition.
func (pt *partition) renewLoop(ctx context.Context) {
	every := pt.p.renewEvery()
	last := pt.taken // the send of the last successful renewal
	wait := max(every-time.Since(last), 0)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-pt.fence.Lost():
			t.Stop()
			return
		case <-t.C:
		}
		if !pt.fence.OK() {
			pt.log.Error("ownership not renewed within lease_ttl/2; stopping the partition", zap.Duration("lease_ttl", pt.p.cfg.LeaseTTL))
			pt.fence.Revoke()
			return
		}
		sent := time.Now()
		if pt.renew(ctx, sent) {
			last = sent
			wait = max(every-time.Since(last), 0)
		} else {
			wait = renewRetry
		}
	}
}

// renew writes the record {owner, epoch, checkpoint} by compare-and-set on
// pt.rev, and reports whether it did; the fence counts it from sent.
func (pt *partition) renew(ctx context.Context, sent time.Time) bool {
	p := pt.p
	c := pt.track.Checkpoint()
	if c == 0 {
		c = pt.checkpoint.Load()
	}
	// The fence is checked after the checkpoint is read: a checkpoint read
	// after a revocation (whatever a fenced worker did to the tracker
	// since) is never written.
	if !pt.fence.OK() {
		return false
	}
	rec := ownership.Record{Owner: p.id, Epoch: pt.epoch, Checkpoint: c, Renewed: time.Now().UTC()}
	// An attempt may take up to renewAttempt: the fence counts from when
	// it was sent, so a slow success still extends it, and a second
	// attempt fits before the fence expires.
	attempt := p.renewAttempt()
	rctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	rev, err := p.coord.kv.Update(rctx, recordKey(pt.pipe.cfg, pt.num), rec.Encode(), pt.rev)
	if err != nil && isRevisionMismatch(err) {
		// A renewal whose reply was lost may have landed: adopt it if the
		// record still names us at our epoch.
		gctx, gcancel := context.WithTimeout(ctx, attempt)
		defer gcancel()
		e, gerr := p.coord.kv.Get(gctx, recordKey(pt.pipe.cfg, pt.num))
		if gerr == nil {
			if r, derr := ownership.DecodeRecord(e.Value()); derr == nil && r.Owner == p.id && r.Epoch == pt.epoch {
				rev, err = e.Revision(), nil
			} else {
				pt.log.Warn("ownership record moved; stopping the partition without further writes",
					zap.String("now_owner", r.Owner), zap.Uint64("now_epoch", r.Epoch))
				pt.fence.Revoke()
				return false
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil && !pt.renewFailing {
			// Once per streak: a failed renewal is retried every
			// renewRetry until the fence expires.
			pt.log.Warn("renew ownership; retrying", zap.Error(err))
		}
		pt.renewFailing = true
		return false
	}
	pt.rev, pt.renewFailing = rev, false
	pt.fence.Renewed(sent)
	if c != pt.checkpoint.Load() {
		pt.checkpoint.Store(c)
		p.met.checkpoint.WithLabelValues(pt.pipe.cfg.Name).Set(float64(pt.pipe.minCheckpoint()))
	}
	return true
}

// release writes the final checkpoint with no owner, so the member the
// partition is assigned to takes it at once, and deletes this epoch's
// consumer — if the fence still holds; else it only deletes the
// consumer. Called after the workers stopped, with the renewals stopped.
func (pt *partition) release() {
	p := pt.p
	c := pt.track.Checkpoint()
	if c == 0 {
		c = pt.checkpoint.Load()
	}
	// Read after the checkpoint, as in renew.
	if !pt.fence.OK() {
		pt.deleteConsumer()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	rec := ownership.Record{Owner: "", Epoch: pt.epoch, Checkpoint: c, Renewed: time.Now().UTC()}
	if _, err := p.coord.kv.Update(ctx, recordKey(pt.pipe.cfg, pt.num), rec.Encode(), pt.rev); err != nil {
		pt.log.Warn("release partition (another member takes it over after lease_ttl)", zap.Error(err))
		return
	}
	pt.checkpoint.Store(c)
	pt.log.Info("partition released", zap.Uint64("checkpoint", c))
	pt.deleteConsumer()
}

// deleteConsumer deletes this epoch's consumer, best effort: after a
// release, or after a fenced stop (it is this epoch's own consumer, never
// a newer owner's; a consumer left behind expires after its inactive
// threshold, or is deleted by the partition's next owner).
//
// The delete runs beside the partition's end, joined with the partitions
// when the member leaves, never before it: a consumer lost with its server
// is deleted without an answer (the server that would give it is gone),
// and waiting for it held the partition's end — and its next take, by
// this member or after the release — for the call's 2 s (issue 28).
func (pt *partition) deleteConsumer() {
	del := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), min(pt.p.cfg.ShutdownTimeout, 2*time.Second))
		defer cancel()
		err := pt.p.js.DeleteConsumer(ctx, pt.pipe.cfg.inputStream(pt.num), consumerName(pt.pipe.cfg, pt.num, pt.epoch))
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			pt.log.Debug("delete consumer", zap.Error(err))
		}
		return nil
	}
	if c := pt.p.coord; c != nil {
		c.parts.Go(del)
		return
	}
	_ = del()
}

func isRevisionMismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
