package processor

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/snapshot"
)

// action is what the worker does with a message whose processing failed.
type action int

const (
	// actTerm: bad input. Dead-letter the payload, Term the message, count it;
	// the learner state is untouched.
	actTerm action = iota + 1
	// actNak: transient failure (or a key refused for a corrupt snapshot).
	// NakWithDelay; the message comes back later.
	actNak
	// actFatal: the processor cannot go on (invalid learner configuration);
	// Run returns the error.
	actFatal
	// actHold: a stream the pipeline writes to is missing (no server
	// answers for its subject: deleted, or never created). Retries do
	// not cure it; the operator does. The message is given back (nak)
	// and kept — redelivered after nak_delay, its key's later messages
	// waiting for it — until the stream is there again, and each refusal
	// is logged as an error naming the subject. For a dead letter
	// (deadletter.go) this replaces the policy of terminating the input
	// after snapshot_timeout: terminated, every bad input would be lost
	// while the stream is missing, stored nowhere.
	actHold
)

// errPanic marks a panic recovered while processing a message.
var errPanic = errors.New("processor: panic while processing message")

// errWaiting marks a message that waits for an earlier unapplied message
// of its key.
var errWaiting = machine.ErrWaiting

// errFenced marks a write refused because this instance no longer owns the
// partition: its ownership record moved to a newer epoch, a snapshot of a
// newer epoch exists, or it failed to renew its ownership within
// lease_ttl/2. The partition stops; its messages come back to the owner.
var errFenced = machine.ErrFenced

// errNoStream marks a publish that no stream stored because none answers
// for its subject (actHold).
var errNoStream = errors.New("processor: no stream stores the subject")

// errNoKey marks a read-only request for a key that has no learner.
var errNoKey = errors.New("processor: no such key")

func classifyAction(err error) action { a, _ := classify(err); return a }

// classify sorts a processing error into an action and a short reason,
// used in the Kpcastream-Error header and in metric labels.
func classify(err error) (action, string) {
	switch {
	// First: a corrupt snapshot wraps the codec error that found it.
	case errors.Is(err, snapshot.ErrCorrupt), errors.Is(err, learners.ErrState), errors.Is(err, errIncompatible):
		return actNak, "corrupt_snapshot"
	case errors.Is(err, codec.ErrTooManyValues), errors.Is(err, learners.ErrDimension):
		// More values than the pipeline's dimension is a wrong dimension,
		// not a large payload (the decoder stops counting at d + 1).
		return actTerm, "dimension"
	case errors.Is(err, codec.ErrTooLarge):
		return actTerm, "too_large"
	case errors.Is(err, codec.ErrVersion):
		return actTerm, "version"
	case errors.Is(err, codec.ErrMalformed):
		return actTerm, "malformed"
	case errors.Is(err, errLabel):
		return actTerm, "label"
	case errors.Is(err, learners.ErrDimension):
		return actTerm, "dimension"
	case errors.Is(err, learners.ErrNonFinite), errors.Is(err, codec.ErrNonFinite):
		return actTerm, "non_finite"
	case errors.Is(err, learners.ErrNumerical):
		return actTerm, "numerical"
	case errors.Is(err, errPanic):
		return actTerm, "panic"
	case errors.Is(err, learners.ErrConfig):
		return actFatal, "config"
	case errors.Is(err, errWaiting):
		return actNak, "waiting"
	case errors.Is(err, errFenced):
		return actNak, "fenced"
	case errors.Is(err, errNoStream), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrStreamNotFound):
		// JetStream's publish answers "no response from stream" when no
		// server answered for the subject, after its own retries of "no
		// responders" (which ride through a leader election; a bare "no
		// responders" stays transient).
		return actHold, "no_stream"
	}
	return actNak, "transient"
}
