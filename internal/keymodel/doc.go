// Package keymodel is one key's model: its learner, its classifier stage
// (an online classifier on the learner's dictionary coordinates), its
// monitor (control limits and alarms) and its preprocessing (the
// monitor's running standardisation), built, restored, applied, saved,
// reset and exported together, in one place. It has one reason to change:
// what a key's model is and how a message steps it. It does no I/O and
// reads no clock; the caller (the processor's worker, a replay, a bench)
// decodes the observations, publishes the outputs and stores the
// snapshots, and counts what it wants through a Meter.
//
// The model's state is a snapshot's (State: the learner's, the
// classifier's and the monitor's, as codec.Snapshot holds them), so a key
// saved before this package existed restores unchanged. A Model is not
// safe for concurrent use: one goroutine (the key's worker) owns it.
// Errors: ErrIncompatible (a snapshot of another learner configuration),
// ErrLabel (a label that is no class: the message changed nothing),
// ErrNoMonitor, and the learners' (learners.ErrState, ErrConfig,
// ErrNumerical: a numerical failure after part of a batch was learned).
//
// It is internal: a Go program reaches it through the processor and the
// replay, whose snapshot and model export formats are the interfaces.
package keymodel
