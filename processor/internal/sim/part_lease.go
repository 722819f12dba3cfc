package sim

import (
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// The lease and the end of a partition: renewals, stops, the release
// (partition_lease.go, partition.go).

func (pt *part) renewEvery() time.Duration { return leaseTTL / 6 }

// renewLoop renews the record until stopped or fenced, each renewal due
// renewEvery after the last successful one was sent (partition.renewLoop).
func (pt *part) renewLoop() {
	if !pt.current() || pt.renewOff || pt.lease.Revoked {
		return
	}
	if !pt.ok() {
		pt.revoke("ownership not renewed within lease_ttl/2")
		return
	}
	pt.renew(func(ok bool) {
		d := max(pt.renewEvery()-pt.m.clock().Sub(pt.lease.LastOK), 0)
		if !ok {
			d = 20 * time.Millisecond // partition.renewRetry
		}
		pt.m.after(d, pt.renewLoop)
	})
}

// renew writes {owner, epoch, checkpoint} by compare-and-set on pt.rev
// (partition.renew).
func (pt *part) renew(then func(ok bool)) {
	w := pt.w()
	c := pt.track.Checkpoint()
	if c == 0 {
		c = pt.checkpoint
	}
	rec := ownership.Record{Owner: pt.m.id, Epoch: pt.epoch, Checkpoint: c}
	sent := pt.m.clock()
	attempt := min(max(leaseTTL/6, 5*time.Millisecond), snapshotTimeout) // partition.renewAttempt
	pt.renewing = true
	w.call(pt.m, svcKV, attempt, 0, func() (any, error) {
		return w.kvWrite(recordKey(pt.num), kvEntry{rec: rec}, pt.rev, false)
	}, func(v any, err error) {
		if !pt.current() {
			return
		}
		done := func(ok bool) {
			pt.renewing = false
			if then != nil {
				then(ok)
			}
			pt.maybeRelease()
		}
		if err == errConflict {
			w.call(pt.m, svcKV, attempt, 0, func() (any, error) {
				if e := w.kvRead(recordKey(pt.num)); e != nil {
					return *e, nil
				}
				return nil, errNotFound
			}, func(v any, gerr error) {
				if !pt.current() {
					return
				}
				if gerr == nil {
					if e := v.(kvEntry); e.rec.Owner == pt.m.id && e.rec.Epoch == pt.epoch {
						pt.rev = e.rev
						pt.lease.Renewed(sent)
						pt.checkpoint = c
						done(true)
						return
					}
					pt.renewing = false
					pt.revoke("ownership record moved")
					// The partition may have finished meanwhile and
					// waited for this renewal (stopRenew joins it).
					pt.maybeRelease()
					return
				}
				done(false)
			})
			return
		}
		if err == nil {
			pt.tr("renewed at %d", c)
			pt.rev = v.(uint64)
			pt.lease.Renewed(sent)
			pt.checkpoint = c
		}
		done(err == nil)
	})
}

// requestStop asks for a graceful stop: drain the consumer, finish the
// queued messages, final snapshots, release with the final checkpoint.
func (pt *part) requestStop() {
	if pt.stopping || pt.fenced || pt.done {
		return
	}
	if !pt.ok() {
		pt.fencedStop()
		return
	}
	pt.stopping = true
	pt.w().trace(pt.m.id + " p" + itoa(pt.num) + " e" + itoa(int(pt.epoch)) + " stops gracefully")
	// Drain: what the client holds still arrives; then the input closes.
	pt.m.after(pt.w().latency(), func() {
		pt.consuming = false
		pt.closeInput()
	})
}

func (pt *part) closeInput() {
	if pt.inputClosed {
		return
	}
	pt.inputClosed = true
	pt.event(func() { pt.step(machine.Stopping{}) })
}

// fencedStop stops without further writes: the consumer stops, the
// worker finishes at once, this epoch's consumer is deleted.
func (pt *part) fencedStop() {
	if pt.fenced || pt.done {
		return
	}
	pt.fenced = true
	pt.lease.Revoke()
	pt.consuming = false
	pt.renewOff = true
	if pt.current() {
		inc := pt.m.inc
		pt.w().at(0, func() {
			pt.m.deliver(inc, func() {
				pt.cancelLetter()
				pt.closeInput()
			})
		})
	}
}

// finish runs when the machine finished: wait for the saves in flight,
// then release (graceful) or just stop (fenced).
func (pt *part) finish() {
	if pt.done {
		return
	}
	if pt.saves > 0 && !pt.fenced {
		return // landed() calls work() again (fenced: the shell cancels them)
	}
	pt.done = true
	pt.renewOff = true
	pt.maybeRelease()
}

// maybeRelease releases the record once the worker finished and no
// renewal is in flight (stopRenew joins it), if the fence still holds.
func (pt *part) maybeRelease() {
	if !pt.done || pt.renewing || !pt.current() {
		return
	}
	if !pt.fenced && pt.ok() {
		pt.release()
		return
	}
	pt.gone()
}

// release writes the final checkpoint with no owner (partition.release).
func (pt *part) release() {
	w := pt.w()
	c := pt.track.Checkpoint()
	if c == 0 {
		c = pt.checkpoint
	}
	rec := ownership.Record{Epoch: pt.epoch, Checkpoint: c}
	pt.tr("release at %d", c)
	pt.done = true
	w.call(pt.m, svcKV, shutdownTimeout, 0, func() (any, error) {
		return w.kvWrite(recordKey(pt.num), kvEntry{rec: rec}, pt.rev, false)
	}, func(any, error) { pt.gone() })
}

// gone deletes this epoch's consumer (best effort) and takes the
// partition off its member.
func (pt *part) gone() {
	w := pt.w()
	if !pt.current() {
		return
	}
	name := pt.cons
	w.call(pt.m, svcStream, 2*time.Second, 0, func() (any, error) {
		if c := w.consumers[name]; c != nil && !c.deleted {
			w.deleteConsumer(c)
		}
		return nil, nil
	}, func(any, error) {})
	delete(pt.m.parts, pt.num)
	w.trace(pt.m.id + " p" + itoa(pt.num) + " e" + itoa(int(pt.epoch)) + " stopped")
	pt.m.checkLeft()
	pt.m.poke()
}
