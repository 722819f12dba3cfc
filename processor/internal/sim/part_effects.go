package sim

import (
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/machine"
)

// The effects a partition's worker executes for its machine: loads,
// dead letters, publishes and saves (worker_load.go, deadletter.go,
// worker_output.go, worker_save.go).

// claimAttempts and claimPause are the worker's: a load reads and claims
// a key up to five times while the claim conflicts, pausing attempt × 20
// ms before each new read (worker_load.go).
const (
	claimAttempts = 5
	claimPause    = 20 * time.Millisecond
)

// load reads key's snapshot and claims it for this epoch (worker.load,
// read and claim): every snapshot read is claimed, by compare-and-set on
// the revision read, whatever its epoch — a read that a replica behind
// the leader answered conflicts, and is read again after a pause. A
// snapshot of a newer epoch is claimed only if the partition's record,
// read (stillOwned), still names this member at this epoch.
func (pt *part) load(key string) {
	pt.loadAttempt(key, 1)
}

func (pt *part) loadAttempt(key string, attempt int) {
	w := pt.w()
	fail := func(err error) {
		pt.event(func() { pt.step(machine.Loaded{Key: key, Fail: &machine.Fail{Disp: machine.Nak, Err: err}}) })
	}
	w.storeLoad(pt.m, key, snapshotTimeout, func(v any, err error) {
		if !pt.current() || pt.done {
			return
		}
		var s snapEntry
		switch {
		case err == errNotFound:
		case err == errCorrupt && w.resetCorrupt:
			// on_corrupt_snapshot: reset: a fresh learner, claimed on the
			// corrupt entry's revision (worker.read).
			pt.tr("corrupt snapshot of %s (rev %d) replaced by a fresh learner", key, v.(snapEntry).rev)
			pt.claim(key, snapEntry{rev: v.(snapEntry).rev}, attempt, fail)
			return
		case err != nil:
			fail(err)
			return
		default:
			s = v.(snapEntry)
		}
		pt.tr("loaded %s: snapshot to %d epoch %d rev %d", key, s.last, s.epoch, s.rev)
		if s.epoch > pt.epoch {
			pt.stillOwned(func(ok bool) {
				if !ok {
					pt.revoke("a newer epoch wrote a snapshot")
					fail(errFenced)
					return
				}
				pt.claim(key, s, attempt, fail)
			})
			return
		}
		pt.claim(key, s, attempt, fail)
	})
}

// stillOwned reads the partition's record (partition.stillOwned): does it
// name this member at this epoch? A failed read says no. It is read from
// the bucket stream's leader (processor.leaderGet), never behind: read
// by a KV Get, answered by a replica behind, it let a zombie's claim land
// over a newer epoch's snapshot.
func (pt *part) stillOwned(then func(bool)) {
	w := pt.w()
	w.call(pt.m, svcKV, snapshotTimeout, 0, func() (any, error) {
		if e := w.kv[recordKey(pt.num)]; e != nil {
			return *e, nil
		}
		return nil, errNotFound
	}, func(v any, err error) {
		if !pt.current() || pt.done {
			return
		}
		ok := err == nil && v.(kvEntry).rec.Owner == pt.m.id && v.(kvEntry).rec.Epoch == pt.epoch
		pt.tr("still owned: %v", ok)
		then(ok)
	})
}

// claim writes s back with this epoch by compare-and-set on its revision
// (worker.claim): no reading of the fence, the compare-and-set is its
// fence (checked where it lands, world.snapSave).
func (pt *part) claim(key string, s snapEntry, attempt int, fail func(error)) {
	w := pt.w()
	l := &loaded{st: s.st, rev: s.rev}
	claim := snapEntry{st: s.st, last: s.last, epoch: pt.epoch}
	w.storeSave(pt.m, key, claim, s.rev, snapshotTimeout, 0, func(v any, err error) {
		if !pt.current() || pt.done {
			return
		}
		if err == errConflict && attempt < claimAttempts {
			pt.tr("claim of %s conflicts (rev %d): read again", key, s.rev)
			pt.m.after(time.Duration(attempt)*claimPause, func() {
				if pt.current() && !pt.done {
					pt.loadAttempt(key, attempt+1)
				}
			})
			return
		}
		if err != nil {
			fail(err)
			return
		}
		l.rev = v.(uint64)
		pt.keys[key] = l
		pt.event(func() { pt.step(machine.Loaded{Key: key, LastSeq: s.last}) })
	})
}

// errBadInput is the worker's classification of a bad input.
var errBadInput = simErr("bad input")

// deadLetter dead-letters msg (worker.reject): the last-moment reading of
// the fence, then attempts on the dead-letter stream (the output
// stream's servers), each bounded by publish_attempt and retried after a
// transient failure (a pause, then a reading of the fence: publish.Retry)
// while the fence holds, until snapshot_timeout — then
// the shell logs the failure and terminates the input all the same. It
// is synchronous: the worker does nothing else until it ends. A fenced
// stop cancels the worker's context, and with it the attempt in flight.
func (pt *part) deadLetter(msg inMsg) {
	w := pt.w()
	if !pt.ok() {
		pt.tr("fence expired at dead letter %d", msg.seq)
		pt.fencedStop()
		pt.letterEnded(msg, letterFailed)
		return
	}
	pt.busy, pt.inLetter = true, msg
	pt.letter++
	id := pt.letter
	deadline := pt.m.clock().Add(snapshotTimeout)
	var attempt func()
	attempt = func() {
		if !pt.current() || !pt.busy || pt.letter != id {
			return
		}
		pt.checkEpoch("dead letter")
		timeout := min(publishAttempt, max(deadline.Sub(pt.m.clock()), time.Millisecond))
		w.call(pt.m, svcOut, pt.m.real(timeout), 0, func() (any, error) {
			w.storeDead(msg.seq)
			return nil, nil
		}, func(_ any, err error) {
			if !pt.current() || !pt.busy || pt.letter != id {
				return
			}
			switch {
			case err == nil:
				pt.tr("dead-lettered %s %d", msg.key, msg.seq)
				pt.letterEnded(msg, letterStored)
			case pt.m.clock().After(deadline):
				w.note("%s p%d e%d: dead letter of %d given up after snapshot_timeout; input terminated", pt.m.id, pt.num, pt.epoch, msg.seq)
				w.deadGaveUp[msg.seq] = true
				pt.letterEnded(msg, letterStored)
			default:
				// publish.Retry: the pause, then the reading, then the
				// next attempt.
				pt.m.after(20*time.Millisecond, func() {
					if !pt.current() || !pt.busy || pt.letter != id {
						return
					}
					if !pt.ok() {
						pt.tr("fence expired between dead-letter attempts of %d", msg.seq)
						pt.fencedStop()
						pt.letterEnded(msg, letterFailed)
						return
					}
					attempt()
				})
			}
		})
	}
	attempt()
}

// letterEnd is how a dead letter ended for the shell.
type letterEnd int

const (
	letterStored    letterEnd = iota // acknowledged (or given up): the input is terminated
	letterFailed                     // the fence stopped it: the input goes back
	letterCancelled                  // the worker's context was cancelled (a fenced stop)
)

// letterEnded ends the dead letter of msg, tells the machine how
// (worker.reject) and resumes the worker: a stored dead letter's input is
// terminated, one the fence or a cancelled context stopped goes back (the
// machine's Nak).
func (pt *part) letterEnded(msg inMsg, how letterEnd) {
	wasBusy := pt.busy
	pt.busy = false
	if how == letterStored {
		pt.settle(msg.seq, false)
		pt.step(machine.DeadLettered{Key: msg.key, Seq: msg.seq})
	} else {
		pt.step(machine.DeadLetterFailed{Key: msg.key, Seq: msg.seq, Err: errFenced})
	}
	if wasBusy {
		pt.work()
	}
}

// cancelLetter: the worker's context is cancelled (a fenced stop) while a
// dead letter is in flight: its attempt returns at once.
func (pt *part) cancelLetter() {
	if !pt.busy {
		return
	}
	pt.tr("dead letter of %d cancelled by the fenced stop", pt.inLetter.seq)
	pt.letterEnded(pt.inLetter, letterCancelled)
}

// checkEpoch checks that an output is sent under the partition's current
// epoch: no output of an ended epoch. (Snapshot writes are checked where
// they land, world.snapSave: their compare-and-set is their fence.)
func (pt *part) checkEpoch(what string) {
	w := pt.w()
	if e := w.kv[recordKey(pt.num)]; e != nil && (e.rec.Epoch != pt.epoch || e.rec.Owner != pt.m.id) {
		w.violate("%s p%d: %s sent under epoch %d while the record is %s at epoch %d", pt.m.id, pt.num, what, pt.epoch, e.rec.Owner, e.rec.Epoch)
	}
}

// publish publishes an output after the last-moment fence check
// (worker.publish and lastMoment: the shell's one reading of the fence).
func (pt *part) publish(key string, o output) {
	w := pt.w()
	if !pt.ok() {
		pt.tr("fence expired at publish")
		pt.fencedStop() // revokes: the step below is preceded by FenceLost
		pt.step(machine.Published{Key: key, Err: errFenced, Refused: true})
		return
	}
	pt.checkEpoch("output")
	w.call(pt.m, svcOut, publishAttempt, 0, func() (any, error) {
		w.publishOut(o)
		return nil, nil
	}, func(_ any, err error) {
		if !pt.current() || pt.done {
			return
		}
		var e error
		if err != nil {
			e = err
		}
		pt.event(func() { pt.step(machine.Published{Key: key, Err: e}) })
	})
}

// save saves a snapshot job (worker.snapshotter) and reports how it
// landed (worker.landed). (The shell makes a save whose answer was lost
// with its connection again at once, on the same revision, and adopts
// the one that landed through ambiguous (worker_link.go); the model has
// no connections: a lost answer waits for snapshot_timeout, the slower
// path to the same outcomes.)
func (pt *part) save(j snapJob) {
	w := pt.w()
	pt.saves++
	landed := func(o machine.Outcome) {
		if !pt.current() {
			pt.saves--
			return
		}
		pt.event(func() {
			pt.saves--
			pt.step(machine.SaveLanded{Key: j.key, Job: j.job, Outcome: o})
		})
	}
	// No reading of the fence: the save's compare-and-set is its fence
	// (worker.snapshotter; checked where it lands, world.snapSave).
	slow := time.Duration(0)
	if w.lossy && w.chance(0.1) {
		slow = w.between(100*time.Millisecond, 3*time.Second) // a slow disk
	}
	deadline := w.now + snapshotTimeout // one context for the save and what ambiguous does
	result := func(v any, err error) {
		switch {
		case err == nil:
			pt.tr("saved %s to %d", j.key, j.snap.last)
			if k := pt.keys[j.key]; k != nil {
				k.rev = v.(uint64)
			}
			landed(machine.Saved)
		case err == errConflict:
			pt.revoke("snapshot conflict")
			landed(machine.Fenced)
		default:
			landed(machine.Failed)
		}
	}
	w.storeSave(pt.m, j.key, j.snap, j.rev, snapshotTimeout, slow, func(v any, err error) {
		if err == errConflict {
			pt.ambiguous(j, deadline, result)
			return
		}
		result(v, err)
	})
}

// ambiguous is worker.ambiguous, after j's save conflicted: it loads the
// stored snapshot; one of j's epoch that holds exactly j's state and
// last sequence (a retried write whose first attempt landed) is adopted; one written by
// this epoch that holds no more than j (this worker's earlier save that
// landed with its answer lost) is saved over again on its revision;
// anything else, or a failed load, stays a conflict.
func (pt *part) ambiguous(j snapJob, deadline time.Duration, result func(any, error)) {
	w := pt.w()
	left := func() time.Duration { return max(deadline-w.now, time.Millisecond) }
	w.storeLoad(pt.m, j.key, left(), func(v any, err error) {
		if err != nil {
			result(nil, errConflict)
			return
		}
		got := v.(snapEntry)
		switch {
		case got.epoch == j.snap.epoch && got.st == j.snap.st && got.last == j.snap.last:
			result(got.rev, nil)
		case got.epoch == j.snap.epoch && got.last <= j.snap.last && got.rev != j.rev:
			w.res.OwnSaveRetried++
			pt.tr("snapshot conflict with its own earlier save of %s (rev %d, stored %d at %d): saved again", j.key, j.rev, got.rev, got.last)
			w.storeSave(pt.m, j.key, j.snap, got.rev, left(), 0, result)
		default:
			result(nil, errConflict)
		}
	})
}
