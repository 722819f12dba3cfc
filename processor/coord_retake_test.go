package processor

import (
	"context"
	"testing"
	"time"
)

// TestStaleTakeOfRunningPartition (issue 28): evaluate reads which
// partitions run here before it hands a take (or an abandon) to async,
// and a take of the same record can end in between — its partition
// started, the record (seen through the watcher) naming this member.
// Under stress the stale decision took the running partition again: its
// own member fenced epoch 1 eight milliseconds after it started, with no
// line saying why (a kept log of TestOwnSaveAnswerLost). Here the stale
// decisions are made by hand, through async as evaluate makes them: the
// running epoch must stay, its record untouched.
func TestStaleTakeOfRunningPartition(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("retake")
	pc.Partitions = 1
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1, LeaseTTL: time.Minute, CheckpointEvery: time.Minute})
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	pl := r.p.pipes[0]
	c := r.p.coord
	key := recordKey(pl.cfg, 0)
	waitFor(t, 10*time.Second, "partition 0 running, its record seen", func() bool {
		pt := pl.parts[0].Load()
		v := c.view(key)
		return pt != nil && v.Exists && v.Rec.Owner == r.p.id && v.Rec.Epoch == pt.epoch
	})
	pt := pl.parts[0].Load()
	// A context of the test's: a partition wrongly started here stops
	// with the test.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, what := range []string{"take", "abandon"} {
		v := c.view(key)
		done := make(chan struct{})
		c.async(ctx, key, func() {
			defer close(done)
			if what == "take" {
				c.take(ctx, pl, 0, v)
			} else {
				c.abandon(ctx, pl, 0, v)
			}
		})
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the stale %s did not end", what)
		}
		if now := pl.parts[0].Load(); now != pt {
			t.Fatalf("after a stale %s: partition 0 runs epoch %d, want epoch %d still", what, now.epoch, pt.epoch)
		}
		rec := e.records(t, pc)[0]
		if rec.Owner != r.p.id || rec.Epoch != pt.epoch {
			t.Fatalf("after a stale %s: record {%q, epoch %d}, want {%q, epoch %d}", what, rec.Owner, rec.Epoch, r.p.id, pt.epoch)
		}
	}
	select {
	case <-pt.fence.Lost():
		t.Error("the running epoch's fence was lost")
	default:
	}
}
