package sim

import (
	"fmt"
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// part is one partition run by a member: its consumer, replay tracker,
// intake, lease and one worker (a real machine.Machine) — modelled on
// processor/partition.go and worker.go.
type part struct {
	m      *member
	inc    int
	num    int
	epoch  uint64
	rev    uint64
	start  uint64
	cons   string
	track  *machine.Tracker
	intake *machine.Intake
	lease  ownership.Lease
	mach   *machine.Machine[inMsg, output]

	checkpoint uint64 // last checkpoint written to the record
	keys       map[string]*loaded
	held       map[uint64]snapJob

	queue       []item // the worker's input channel
	gapped      bool   // deliveries were lost: nothing more is handed over
	consuming   bool   // the consumer runs (created, not stopped)
	inputClosed bool
	closeSent   bool
	stopping    bool // graceful stop requested
	lostSeen    bool // the worker saw the fence lost
	fenced      bool // the partition stops without further writes
	renewing    bool
	renewOff    bool
	saves       int // saves in flight
	// A dead letter in flight (worker.reject, synchronous): the worker
	// executes nothing else — the rest of its Ready (rd from ri) and the
	// events that arrive (deferred) wait until it ends. letter counts the
	// dead letters begun, so that a cancelled one's late answer is
	// ignored.
	busy      bool
	rd        machine.Ready[inMsg, output]
	ri        int
	deferred  []func()
	letter    int
	copies    int   // the machine's LetterCopies counted in the result
	inLetter  inMsg // the input of the dead letter in flight
	tickAt    time.Duration
	done      bool
	failStart time.Time // first failed pull of the current streak
}

type item struct {
	msg inMsg
}

type delivery struct {
	cons uint64
	msg  inMsg
}

type loaded struct {
	st  keyState
	rev uint64
}

type snapJob struct {
	key  string
	snap snapEntry
	rev  uint64
	job  machine.Job
}

func newPart(m *member, n int, epoch, rev, start uint64, granted time.Time) *part {
	start = max(start, 1)
	pt := &part{m: m, inc: m.inc, num: n, epoch: epoch, rev: rev, start: start,
		cons:  "c-p" + itoa(n) + "-e" + itoa(int(epoch)),
		track: machine.NewTracker(), intake: machine.NewIntake(), lease: ownership.NewLease(leaseTTL, granted),
		checkpoint: start, keys: map[string]*loaded{}, held: map[uint64]snapJob{}}
	pt.mach = machine.New[inMsg, output](machine.Config{
		Policy:     machine.Policy{EveryMessages: 4, Every: time.Second},
		OnShutdown: true, Quota: 2, Slots: 2, Window: 6, KeyInFlight: 1,
		SlotWait: snapshotTimeout, BlockTTL: max(3*ackWait, time.Minute),
		// Loads run asynchronously, as in the worker (loadSlots, queue_size),
		// scaled to this quota.
		Loads: 2, Parked: 4,
	}, pt.track)
	return pt
}

func (pt *part) w() *world { return pt.m.w }

func (pt *part) tr(format string, a ...any) {
	if pt.m.w.opt.Trace != nil {
		pt.m.w.trace(fmt.Sprintf("%s p%d e%d ", pt.m.id, pt.num, pt.epoch) + fmt.Sprintf(format, a...))
	}
}

func (pt *part) current() bool { return pt.m.parts[pt.num] == pt && pt.m.inc == pt.inc }

func (pt *part) ok() bool { return pt.lease.OK(pt.m.clock()) }

// revoke revokes the fence and wakes the run loop (fenced stop).
func (pt *part) revoke(why string) {
	if !pt.lease.Revoked {
		pt.w().trace(pt.m.id + " p" + itoa(pt.num) + " e" + itoa(int(pt.epoch)) + " fence revoked: " + why)
	}
	pt.lease.Revoke()
	pt.fencedStop()
}

// run removes the consumers of earlier epochs and creates its own at the
// checkpoint (partition.consume), renewing meanwhile; a consume that
// cannot start within 30 s gives the epoch up.
func (pt *part) run() {
	w := pt.w()
	pt.m.after(max(pt.renewEvery()-pt.m.clock().Sub(pt.lease.LastOK), 0), pt.renewLoop)
	pt.m.after(time.Second, pt.tickLoop)
	deadline := pt.m.clock().Add(30 * time.Second)
	var create func()
	var del func()
	giveUp := func() {
		// Nothing was consumed: release the record (its checkpoint
		// stands) if the fence holds, else just stop.
		pt.renewOff, pt.done = true, true
		if !pt.ok() {
			pt.fenced = true
		}
		pt.maybeRelease()
		pt.lease.Revoke()
	}
	retry := func(f func()) {
		if pt.m.clock().After(deadline) {
			giveUp()
			return
		}
		pt.m.after(100*time.Millisecond, f)
	}
	del = func() {
		pt.tr("delete old consumers")
		if !pt.current() || pt.fenced || pt.stopping {
			giveUp()
			return
		}
		if !pt.ok() {
			giveUp()
			return
		}
		w.call(pt.m, svcStream, callTimeout, 0, func() (any, error) {
			w.deleteConsumers(pt.num, pt.epoch)
			return nil, nil
		}, func(_ any, err error) {
			if err != nil {
				retry(del)
				return
			}
			if !pt.ok() {
				giveUp()
				return
			}
			create()
		})
	}
	create = func() {
		w.call(pt.m, svcStream, callTimeout, 0, func() (any, error) {
			w.createConsumer(pt.cons, pt.num, pt.epoch, pt.start)
			return nil, nil
		}, func(_ any, err error) {
			if err != nil {
				retry(create)
				return
			}
			if pt.fenced || pt.stopping {
				pt.fencedStop()
				return
			}
			pt.consuming = true
			pt.tr("consuming from %d", pt.start)
			w.pull(pt.cons, pt)
			pt.m.after(pullHeartbeat, pt.healthLoop)
		})
	}
	del()
}

const pullHeartbeat = leaseTTL / 4

// healthLoop is the consume's error handler: pulls that fail for
// lease_ttl (the stream unreachable) revoke the fence, and the partition
// is taken again with a new consumer.
func (pt *part) healthLoop() {
	if !pt.current() || pt.fenced || pt.inputClosed {
		return
	}
	now := pt.m.clock()
	if pt.w().isDown(svcStream) {
		if pt.failStart.IsZero() {
			pt.failStart = now
		}
		if now.Sub(pt.failStart) >= leaseTTL {
			pt.revoke("consumer unreachable for lease_ttl")
			return
		}
	} else {
		pt.failStart = time.Time{}
	}
	pt.m.after(pullHeartbeat, pt.healthLoop)
}

// onDelivery is the consume callback (serial): at a gap in the consumer
// sequence it hands nothing more over and the partition is taken again
// under a new epoch (partition.consume, machine.Intake).
func (pt *part) onDelivery(cons string, cs uint64, msg inMsg) {
	if !pt.current() || cons != pt.cons || !pt.consuming || pt.fenced {
		return // stopped consuming: the message stays pending at the server
	}
	pt.tr("delivery %d: %s %d", cs, msg.key, msg.seq)
	if gap, _ := pt.intake.Delivery(cs); gap || pt.gapped {
		if !pt.gapped {
			pt.gapped = true
			pt.tr("gap: taking the partition again")
			pt.requestStop()
		}
		return
	}
	pt.handOver(delivery{cons: cs, msg: msg})
}

func (pt *part) handOver(d delivery) {
	pt.track.Deliver(d.msg.seq)
	pt.dispatch(item{msg: d.msg})
}

// dispatch hands an item to the worker; once its input is closed a
// message is nak'ed for redelivery.
func (pt *part) dispatch(it item) {
	if pt.inputClosed {
		pt.settle(it.msg.seq, true)
		return
	}
	pt.queue = append(pt.queue, it)
	pt.work()
}

// settle acks or naks seq at the consumer.
func (pt *part) settle(seq uint64, nak bool) {
	w := pt.w()
	name := pt.cons
	if w.lost() {
		return
	}
	w.at(pt.m.fifo(&pt.m.outNext, w.latency()), func() { w.ackArrives(name, seq, nak) })
}

// step steps the machine at the member's clock, a revocation first
// (worker.step: FenceLost before any event that follows it).
func (pt *part) step(ev machine.Event) {
	if pt.fenced && !pt.lostSeen {
		pt.lostSeen = true
		if err := pt.mach.Step(pt.m.clock(), machine.FenceLost{}); err != nil {
			pt.w().violate("%s p%d: the worker broke its machine's protocol: %v", pt.m.id, pt.num, err)
		}
	}
	if err := pt.mach.Step(pt.m.clock(), ev); err != nil {
		pt.w().violate("%s p%d: the worker broke its machine's protocol: %v", pt.m.id, pt.num, err)
	}
}

// work is the worker's loop: execute Ready, step the events that waited
// for a dead letter, take the next input while the machine accepts, close
// when the input is closed and drained.
func (pt *part) work() {
	if !pt.current() || pt.done || pt.busy {
		return
	}
	for {
		if pt.execReady() {
			return // a dead letter in flight: resumed when it ends
		}
		if pt.mach.Done() {
			if len(pt.deferred) > 0 {
				// What came during a dead letter that ended as the machine
				// finished — a save's landing — is taken: the worker's
				// finish reads the snapshotter's results still queued
				// (the machine ignores anything else once done). Left
				// deferred, finish waited for that save for ever (seed
				// 75841: a dead letter retried through a rolling outage).
				fn := pt.deferred[0]
				pt.deferred = pt.deferred[1:]
				fn()
				continue
			}
			pt.finish()
			return
		}
		if pt.fenced && !pt.lostSeen {
			pt.lostSeen = true
			pt.step(machine.FenceLost{})
			continue
		}
		if len(pt.deferred) > 0 {
			fn := pt.deferred[0]
			pt.deferred = pt.deferred[1:]
			fn()
			continue
		}
		if !pt.mach.Accepting() {
			break
		}
		if len(pt.queue) > 0 {
			it := pt.queue[0]
			pt.queue = pt.queue[1:]
			pt.deliver(it.msg)
			continue
		}
		if pt.inputClosed && !pt.closeSent {
			pt.closeSent = true
			d := pt.m.clock().Add(shutdownTimeout)
			if pt.fenced {
				d = pt.m.clock()
			}
			pt.step(machine.Close{Deadline: d})
			continue
		}
		break
	}
	if at := pt.mach.Wake(); !at.IsZero() {
		// At least a millisecond: the worker's load is synchronous, the
		// model's is not, and a deadline passed while it is in progress
		// must not spin at one instant.
		d := max(at.Sub(pt.m.clock()), time.Millisecond)
		if sim := pt.w().now + pt.m.real(d); pt.tickAt == 0 || sim < pt.tickAt || pt.tickAt <= pt.w().now {
			pt.tickAt = sim
			pt.m.after(d, func() { pt.tickAt = 0; pt.tick() })
		}
	}
}

// execReady executes the machine's Ready (worker.drain), resuming one
// that a dead letter interrupted; it reports whether a dead letter is in
// flight (the worker waits for it before anything else).
func (pt *part) execReady() bool {
	for {
		if pt.ri < len(pt.rd.Actions) {
			a := &pt.rd.Actions[pt.ri]
			pt.ri++
			pt.exec(a)
			if pt.busy {
				return true
			}
			continue
		}
		if pt.rd.Actions != nil {
			pt.mach.Advance(pt.rd)
			pt.rd, pt.ri = machine.Ready[inMsg, output]{}, 0
		}
		if !pt.mach.HasReady() {
			return false
		}
		pt.rd, pt.ri = pt.mach.Ready(), 0
	}
}

// event steps what fn steps and goes on working — after the dead letter
// in flight, if there is one (the worker reads its channels only between
// actions).
func (pt *part) event(fn func()) {
	if pt.busy {
		pt.deferred = append(pt.deferred, fn)
		return
	}
	fn()
	pt.work()
}

func (pt *part) tick() {
	if pt.current() && !pt.done && !pt.busy { // a ticker's tick is dropped while the worker is busy
		pt.step(machine.Tick{})
		pt.work()
	}
}

func (pt *part) tickLoop() {
	if !pt.current() || pt.done {
		return
	}
	pt.tick()
	pt.m.after(500*time.Millisecond, pt.tickLoop)
}

// deliver steps the machine with a message (worker.deliver: the fence is
// the machine's to apply, told by FenceLost in work).
func (pt *part) deliver(msg inMsg) {
	d := machine.Delivered[inMsg]{Msg: msg, Key: msg.key, Seq: msg.seq}
	if msg.bad == badDecode {
		d.Fail = &machine.Fail{Disp: machine.Reject, Err: errBadInput}
	}
	pt.step(d)
}

// exec executes one action (worker.exec).
func (pt *part) exec(a *machine.Action[inMsg, output]) {
	w := pt.w()
	switch a.Kind {
	case machine.ActLoad:
		pt.load(a.Key)
	case machine.ActApply:
		pt.tr("apply %s %d", a.Key, a.Msg.seq)
		k := pt.keys[a.Key]
		switch a.Msg.bad {
		case badLearner: // refused before learning: the learner is untouched
			pt.step(machine.Applied[output]{Key: a.Key, Fail: &machine.Fail{Disp: machine.Reject, Err: errBadInput}})
			return
		case badNumeric: // learned part of its batch, then failed: counts as applied
			k.st = k.st.apply(a.Msg.seq, a.Msg.val)
			pt.step(machine.Applied[output]{Key: a.Key, Changed: true, Fail: &machine.Fail{Disp: machine.Reject, Err: errBadInput}})
			return
		}
		k.st = k.st.apply(a.Msg.seq, a.Msg.val)
		o := output{key: a.Key, seq: a.Msg.seq, hash: k.st.hash, epoch: pt.epoch}
		pt.step(machine.Applied[output]{Key: a.Key, Changed: true, Outs: []output{o}, Result: "ok"})
	case machine.ActPublish:
		pt.publish(a.Key, a.Out)
	case machine.ActAck:
		pt.tr("ack %s %d %s", a.Key, a.Msg.seq, a.Result)
		if n := pt.mach.LetterCopies(); n != pt.copies {
			w.res.LetterCopies += n - pt.copies
			pt.copies = n
		}
		pt.settle(a.Msg.seq, false)
	case machine.ActNak:
		pt.tr("nak %s %d: %v", a.Key, a.Msg.seq, a.Err)
		pt.settle(a.Msg.seq, true)
	case machine.ActReject:
		if a.Msg.bad == good {
			w.violate("%s p%d: message %d of key %s dead-lettered: %v", pt.m.id, pt.num, a.Msg.seq, a.Key, a.Err)
		}
		pt.deadLetter(a.Msg)
	case machine.ActSnapshot:
		k := pt.keys[a.Key]
		j := snapJob{key: a.Key, snap: snapEntry{st: k.st, last: a.Job.LastSeq, epoch: pt.epoch}, rev: k.rev, job: a.Job}
		if a.Held {
			pt.held[a.Job.ID] = j
		} else {
			pt.save(j)
		}
	case machine.ActSaveHeld:
		j := pt.held[a.Job.ID]
		delete(pt.held, a.Job.ID)
		pt.save(j)
	case machine.ActUnload:
		delete(pt.keys, a.Key)
	case machine.ActGaveUp:
		w.note("%s p%d e%d: gave up waiting for message %d of key %s after %v", pt.m.id, pt.num, pt.epoch, a.Seq, a.Key, a.Waited)
	case machine.ActFatal:
		w.violate("%s p%d: fatal: %v", pt.m.id, pt.num, a.Err)
	}
}
