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
		if ce := w.log.Check(zap.DebugLevel, "snapshot saved"); ce != nil {
			var seen int64
			if j.snap.State != nil {
				seen = j.snap.State.Seen
			}
			ce.Write(zap.String("key", e.key), zap.Uint64("last_seq", j.snap.LastSeq), zap.Int64("seen", seen),
				zap.Uint64("rev", r.rev), zap.Uint64("from_rev", j.rev))
		}
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
		rev, err := w.save(sctx, snapshot.JoinKey(j.snap.Pipeline, j.snap.Key), j)
		cancel()
		w.results <- snapResult{job: j, rev: rev, err: err, dur: time.Since(start)}
	}
	return nil
}

// save saves j by compare-and-set on its revision, within ctx. An attempt
// whose answer was lost with the connection (worker_link.go) is made
// again at once, on the same revision: if the lost one landed, the new
// one conflicts with it, and ambiguous adopts it (identical, same epoch);
// if not, the new one lands. Waiting for the lost answer held the save —
// and a graceful stop, which waits for its saves — for snapshot_timeout.
func (w *worker) save(ctx context.Context, key string, j *snapJob) (uint64, error) {
	for {
		actx, cancel := w.call(ctx, w.snapshotTimeout)
		rev, err := w.store.Save(actx, key, j.snap, j.rev)
		if errors.Is(err, snapshot.ErrConflict) {
			rev, err = w.ambiguous(actx, key, j, rev, err)
		}
		lost := err != nil && linkLost(actx)
		cancel()
		if !lost || ctx.Err() != nil {
			return rev, err
		}
		w.log.Info("snapshot save's answer lost with the connection; saving again on the same revision (if it landed, it is adopted)",
			zap.String("key", j.e.key), zap.Uint64("rev", j.rev))
	}
}

// ambiguous looks at the stored snapshot after j's save conflicted. An
// ambiguous commit looks like a conflict: a retried write whose first
// attempt landed (its stored revision is adopted when it holds exactly
// what j saves, under j's epoch: a newer owner's claim of the same state
// is a conflict), or an earlier save of this worker that landed with its
// answer lost (a connection cut, a timeout), after which the key was
// handed over again, newer, on the revision before it. The latter is
// written by this partition's epoch, which no other worker writes for
// the key (a newer owner claims it with a higher epoch before applying
// anything), and holds no more than j: j is saved again on its revision.
// Issue 28: taken for a newer owner, it fenced the partition, which then
// stopped without its final snapshots. Anything else stays a conflict.
func (w *worker) ambiguous(ctx context.Context, key string, j *snapJob, rev uint64, err error) (uint64, error) {
	got, grev, lerr := w.store.Load(ctx, key)
	switch {
	case lerr != nil || got.State == nil:
		return rev, err
	case got.Epoch == j.snap.Epoch && got.LastSeq == j.snap.LastSeq && got.State.Seen == j.snap.State.Seen && reflect.DeepEqual(got.State, j.snap.State):
		return grev, nil
	case w.owned && got.Epoch == j.snap.Epoch && got.LastSeq <= j.snap.LastSeq && grev != j.rev:
		w.log.Info("snapshot conflict with this worker's own earlier save (landed, its answer lost); saving again on its revision",
			zap.String("key", j.e.key), zap.Uint64("rev", j.rev), zap.Uint64("stored_rev", grev), zap.Uint64("stored_last_seq", got.LastSeq))
		return w.store.Save(ctx, key, j.snap, grev)
	}
	return rev, err
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
