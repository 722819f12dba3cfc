// Package machine is the deterministic core of one worker of a partition:
// every rule about the order of a key's messages, skipping by sequence,
// loading and unloading keys, the output window and snapshots, with no I/O,
// no goroutines and no clock of its own (etcd raft's Step/Ready/Advance).
//
// The worker (processor/worker.go) feeds it events with Step — a message
// delivered (after decoding and checking it), a key loaded, a learner
// applied, a publish acknowledged or failed, a save landed, a tick, the
// fence lost, the input closed — and executes, in order, the actions that
// Ready returns: load a key, apply a message to its learner, publish an
// output, ack / nak / dead-letter an input, copy a key's state for a
// snapshot and save it, unload a key. Advance says they were executed. The
// results of actions come back as events; a Step while a Ready is being
// executed is allowed (its actions go to the next Ready).
//
// The fence policy lives here. The shell tells the machine the fence is
// lost (FenceLost; or a save lands Fenced); from then on the machine
// emits no effect — no Load (a load claims its key, a write), Apply,
// Publish, Ack, Reject, Snapshot or SaveHeld — and gives back (Nak) every
// message it would have applied, settled or dead-lettered, so the
// partition's next owner replays it from the checkpoint. The shell
// executes Ready without asking the fence, except for one last-moment
// reading on its publish path (processor/worker_output.go, lastMoment).
// fence_test.go pins this for every kind of effect.
//
// A dead letter (Reject) is answered by DeadLettered or DeadLetterFailed
// before anything else is stepped (FenceLost and the answers of
// publishes executed meanwhile aside): the worker sends it
// synchronously. Its input's delivery hold is settled only then, so no
// checkpoint passes an input whose dead letter may still be lost, and
// nothing of the partition moves on meanwhile (deadletter_test.go). A
// copy of an input whose dead letter was stored, delivered again (its
// dead letter retried past ack_wait, its termination lost), is settled
// at once, never loaded nor dead-lettered again (letters.go).
//
// One message is applied at a time, and a key's messages are applied in
// delivery order. A key that must be loaded does not hold up the others
// (load.go): up to Config.Loads keys load at once while the machine takes
// the worker's other input; a loading key's own later messages wait
// behind it (at most Config.Parked inputs wait for loads), and go first,
// in order, once it has loaded. Outputs are pipelined:
// each key has at most one output in flight and its outputs leave in input
// order whatever fails (window.go); a full window stops the input.
//
// Its one reason to change is the rules of one partition's message flow
// (order, windows, snapshots).
package machine
