package processor

import (
	"context"
	"errors"
	"reflect"
	"time"

	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/snapshot"
)

// snapJob is a snapshot handed from a worker to its snapshotter.
type snapJob struct {
	e    *entry
	snap *codec.Snapshot
	rev  uint64
	job  machine.Job
	err  error // the state could not be copied (the local tier failed): the save fails
}

type snapResult struct {
	job *snapJob
	rev uint64
	err error
	dur time.Duration
}

// jobSlots is the number of snapshot jobs a worker may have in flight.
const jobSlots = 8

// keyStore is the worker's port to the snapshot store: a key's snapshot
// and its revision, and a compare-and-set save (rev 0: create). Errors:
// snapshot.ErrNoSnapshot, ErrCorrupt, ErrConflict.
type keyStore interface {
	Load(ctx context.Context, key string) (*codec.Snapshot, uint64, error)
	Save(ctx context.Context, key string, s *codec.Snapshot, rev uint64) (uint64, error)
}

// snapshot copies e's state for job.
func (w *worker) snapshot(e *entry, job machine.Job) *snapJob {
	snap, err := w.snapshotOf(e, job.LastSeq)
	return &snapJob{
		e:    e,
		snap: snap,
		rev:  e.rev,
		job:  job,
		err:  err,
	}
}

// landed reports a snapshot result to the machine.
func (w *worker) landed(r snapResult) {
	j := r.job
	e := j.e
	name := e.pipe.cfg.Name
	w.met.snapSeconds.WithLabelValues(name).Observe(r.dur.Seconds())
	o := machine.Saved
	switch {
	case r.err == nil:
		e.rev = r.rev
		e.pipe.stats.KVWrites.Add(1)
		w.met.snapBytes.WithLabelValues(name).Observe(float64(stateBytes(j.snap)))
	case errors.Is(r.err, errFenced) || (w.owned && errors.Is(r.err, snapshot.ErrConflict)):
		// This partition no longer owns the key (a newer epoch claimed it):
		// stop writing; the partition stops and its new owner replays from
		// the checkpoint. Nothing is dropped or reloaded here.
		if errors.Is(r.err, snapshot.ErrConflict) {
			w.met.snapFailures.WithLabelValues(name, "conflict").Inc()
			w.log.Error("snapshot conflict: a newer owner claimed the key; stopping the partition", zap.String("key", e.key),
				zap.Uint64("rev", j.rev), zap.Error(r.err))
		}
		w.fence.Revoke()
		w.fenced = true
		o = machine.Fenced
	case errors.Is(r.err, snapshot.ErrConflict):
		// Someone else committed a newer snapshot of this key: we no longer
		// own it. Forget the learner; the next message reloads the newer
		// snapshot and skips what it already holds.
		w.met.snapFailures.WithLabelValues(name, "conflict").Inc()
		w.log.Error("snapshot conflict: another worker owns the key; unloading it", zap.String("key", e.key),
			zap.Uint64("rev", j.rev), zap.Error(r.err))
		o = machine.Conflict
	default:
		w.met.snapFailures.WithLabelValues(name, "error").Inc()
		w.log.Warn("snapshot failed; will retry", zap.String("key", e.key), zap.Error(r.err))
		o = machine.Failed
	}
	w.step(machine.SaveLanded{Key: e.key, Job: j.job, Outcome: o})
}

// snapshotter saves the jobs handed over by the worker until jobs is
// closed. It reads no fence: a save is a compare-and-set on the key's
// revision, which a newer owner moves when it claims the key (doc.go,
// Fenced ownership); a conflict fences the partition (landed).
func (w *worker) snapshotter(ctx context.Context) error {
	defer close(w.results)
	for j := range w.jobs {
		if j.err != nil {
			w.results <- snapResult{job: j, err: j.err}
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, w.snapshotTimeout)
		start := time.Now()
		key := snapshot.JoinKey(j.snap.Pipeline, j.snap.Key)
		rev, err := w.store.Save(sctx, key, j.snap, j.rev)
		if errors.Is(err, snapshot.ErrConflict) {
			// An ambiguous commit (a retried write whose first attempt
			// landed) looks like a conflict: adopt the stored revision if it
			// holds exactly what we saved.
			if got, grev, lerr := w.store.Load(sctx, key); lerr == nil && got.LastSeq == j.snap.LastSeq &&
				got.State != nil && got.State.Seen == j.snap.State.Seen && reflect.DeepEqual(got.State, j.snap.State) {
				rev, err = grev, nil
			}
		}
		cancel()
		w.results <- snapResult{job: j, rev: rev, err: err, dur: time.Since(start)}
	}
	return nil
}

// stateBytes is the size of a snapshot's numeric state: the learner's
// matrices and, with a classifier stage, its weights and covariance.
func stateBytes(s *codec.Snapshot) int {
	n := 0
	for _, m := range s.State.Matrices {
		n += 8 * len(m.Data)
	}
	if c := s.Classifier; c != nil {
		n += 8 * (len(c.W) + len(c.P))
	}
	return n
}
