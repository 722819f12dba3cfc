package machine

import (
	"errors"
	"time"
)

// Errors of the messages the machine refuses; the worker classifies them.
var (
	// ErrWaiting: the message waits for an earlier unapplied message of its
	// key (nak'ed, or lost in delivery).
	ErrWaiting = errors.New("processor: waiting for an earlier message of the key")
	// ErrStalled: a wait for a snapshot slot or the output stream's
	// acknowledgements did not end in time.
	ErrStalled = errors.New("processor: stalled")
	// ErrFenced: this instance no longer owns the partition.
	ErrFenced = errors.New("processor: partition fenced: ownership moved to a newer epoch or was not renewed in time")
)

// Policy is when a key's snapshot is due: after EveryMessages applied
// messages, or Every after it changed (≤ 0: off).
type Policy struct {
	EveryMessages int
	Every         time.Duration
}

// Config is a machine's fixed parameters.
type Config struct {
	Policy     Policy
	OnShutdown bool // write final snapshots when the input closes
	Quota      int  // keys loaded at most
	Slots      int  // snapshot jobs in flight (held ones included)
	Window     int  // outputs queued or in flight at most
	// KeyInFlight is how many outputs of one key may be in flight at
	// once (≤ 1: one, the next sent only when the previous one is
	// acknowledged). More needs an executor that keeps a key's outputs
	// in order in the output stream whatever fails (processor/lane.go):
	// a failure of one output means no later output of the key in flight
	// with it lands before it. See window.go.
	KeyInFlight int
	SlotWait    time.Duration // how long a load waits for a slot to unload a key
	// Loads is how many keys may be loading at once (≤ 0: one). While a
	// key loads, the worker's other keys go on (load.go).
	Loads int
	// Parked is how many inputs may wait for their keys to load, those
	// that asked for the loads included (≤ 1: one, so the input stops
	// while a key loads, as with a synchronous load). A key's inputs
	// that arrive while it loads wait behind it, in order.
	Parked   int
	BlockTTL time.Duration // how long a key waits for an unapplied message
	// Letters is how many stored dead letters are remembered, so that a
	// copy of their input delivered again is settled at once (≤ 0: 1024;
	// letters.go).
	Letters int
}

// Disp is how the worker disposes of a failed message: it classified the
// error.
type Disp int

const (
	Nak    Disp = iota + 1 // transient: nak, the message comes back
	Reject                 // bad input: dead-letter and terminate it
	Fatal                  // the worker cannot go on
)

// Fail is a failure of a message, classified by the worker.
type Fail struct {
	Disp Disp
	Err  error
}

// LoadOpts is how a key is loaded: Create a fresh learner when it has no
// snapshot (messages do, requests do not); ReplaceCorrupt replaces a
// corrupt snapshot (a reset request).
type LoadOpts struct {
	Create, ReplaceCorrupt bool
}

// Job is a snapshot handed over: the last sequence its state holds and the
// sequence it releases from the tracker when saved. ID names it.
type Job struct {
	ID                uint64
	LastSeq, DirtySeq uint64
}

// Outcome is how a save ended.
type Outcome int

const (
	Saved    Outcome = iota
	Failed           // transient: the key stays dirty and is saved again later
	Conflict         // core NATS input: a newer snapshot exists; forget the key
	Fenced           // a newer owner claimed the key: stop writing
)

// Events: the argument of Step.
type (
	// Event is one of the types below.
	Event interface{ event() }
	// Delivered is an input message of Key, decoded and checked by the
	// worker; Fail set when the worker refused it before its key (bad
	// input, or the fence lost).
	Delivered[M any] struct {
		Msg  M
		Key  string
		Seq  uint64
		Fail *Fail
	}
	// Request asks for Key loaded (without creating it) to serve Ref
	// (a control request): answered by a Serve action.
	Request struct {
		Key            string
		ReplaceCorrupt bool
		Ref            any
	}
	// Loaded answers a Load action: the key's snapshot (or fresh learner)
	// holds everything up to LastSeq; Fail set when it could not be loaded.
	Loaded struct {
		Key     string
		LastSeq uint64
		Fail    *Fail
	}
	// Applied answers an Apply action. Changed: the learner changed (also
	// when Fail is set: a batch that failed after learning some of its
	// observations counts as applied). Outs are the message's outputs,
	// published in order; Result labels the input's ack.
	Applied[O any] struct {
		Key     string
		Changed bool
		Outs    []O
		Result  string
		Fail    *Fail
	}
	// Published answers a Publish action: Err nil when the output stream
	// acknowledged it; Refused when retries may not cure Err. Ord is the
	// action's Ord (checked only with KeyInFlight > 1: an acknowledgement
	// of any other than the key's oldest output in flight counts as a
	// failure).
	Published struct {
		Key     string
		Ord     uint64
		Err     error
		Refused bool
	}
	// DeadLettered answers a Reject action: the dead-letter stream
	// acknowledged the dead letter (or the shell gave it up after its
	// retries and terminated the input all the same, its documented
	// policy); the input's delivery hold is settled now, not when the
	// Reject was emitted.
	DeadLettered struct {
		Key string
		Seq uint64
	}
	// DeadLetterFailed answers a Reject action whose dead letter was not
	// stored: the fence stopped it (or the worker's context ended). The
	// machine gives the input back (Nak), keeping its delivery hold, so
	// the partition's next owner dead-letters it.
	DeadLetterFailed struct {
		Key string
		Seq uint64
		Err error
	}
	// SaveLanded answers a Snapshot or SaveHeld action.
	SaveLanded struct {
		Key     string
		Job     Job
		Outcome Outcome
	}
	// Reset says the worker changed Key's state outside a message (a
	// fresh learner, an accepted regime): dirty, and saved soon.
	Reset struct{ Key string }
	// SaveNow asks for Key's snapshot as soon as possible.
	SaveNow struct{ Key string }
	// Tick passes time: snapshots due by time, retries due, blocks expired,
	// deadlines.
	Tick struct{}
	// FenceLost: the partition may no longer write.
	FenceLost struct{}
	// Stopping: the partition is stopping; take what is queued even with a
	// full window.
	Stopping struct{}
	// Close: the input ended; finish by Deadline (outputs, final
	// snapshots). Stepped again with an earlier deadline, it finishes
	// sooner.
	Close struct{ Deadline time.Time }
)

func (Delivered[M]) event()     {}
func (Request) event()          {}
func (Loaded) event()           {}
func (Applied[O]) event()       {}
func (Published) event()        {}
func (SaveLanded) event()       {}
func (DeadLettered) event()     {}
func (DeadLetterFailed) event() {}
func (Reset) event()            {}
func (SaveNow) event()          {}
func (Tick) event()             {}
func (FenceLost) event()        {}
func (Stopping) event()         {}
func (Close) event()            {}

// Kind is what an action asks the worker to do.
type Kind int

const (
	ActLoad     Kind = iota + 1 // load Key (Load opts); answer with Loaded
	ActApply                    // apply Msg to Key's learner; answer with Applied
	ActPublish                  // publish Out (Key's next output, of input Seq, ordinal Ord); answer with Published
	ActRetry                    // Key's output (of input Seq) failed Attempt times with Err: log and meter it
	ActAck                      // ack Msg (Result)
	ActNak                      // nak Msg (Err)
	ActReject                   // dead-letter and terminate Msg (Err); answer with DeadLettered or DeadLetterFailed before stepping anything but FenceLost or Published
	ActSnapshot                 // copy Key's state as Job; save it now unless Held (then SaveHeld comes later)
	ActSaveHeld                 // save the copy of Job made earlier
	ActUnload                   // forget Key's learner (its metrics with it)
	ActLive                     // Key counts as live (Delta +1) or not (-1)
	ActServe                    // serve request Ref on Key (loaded), or answer it with Err
	ActGaveUp                   // Key stopped waiting for Seq after Waited
	ActFinished                 // the input closed and the machine finished; Pending outputs were not acknowledged
	ActFatal                    // stop the worker with Err
)

// Action is one thing to do; which fields are set depends on Kind.
type Action[M, O any] struct {
	Kind    Kind
	Key     string
	Msg     M
	Out     O
	Result  string
	Err     error
	Job     Job
	Held    bool
	Load    LoadOpts
	Ref     any
	Seq     uint64
	Ord     uint64
	Attempt int
	Delta   int
	Waited  time.Duration
	Pending int
}

// Ready is the actions to execute, in order.
type Ready[M, O any] struct {
	Actions []Action[M, O]
}
