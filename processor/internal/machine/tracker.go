package machine

import (
	"sync"
)

// Tracker computes a JetStream pipeline's replay checkpoint: the lowest
// stream sequence whose effect is not yet durable. A sequence is held
//
//   - from delivery until the worker settles it (applied, skipped,
//     dead-lettered); a nak'd sequence stays held until it is redelivered
//     and settled;
//   - as a key's first applied sequence since its last snapshot, until a
//     snapshot containing it is saved.
//
// The checkpoint is the smallest held sequence, or the highest delivered
// one plus one when none is held. Every message below it is either in a
// saved snapshot of its key or needs no state, so a restart that replays
// the stream from the checkpoint, skipping per key what its snapshot
// already contains, rebuilds exactly the state of an uninterrupted run.
// It is safe for concurrent use.
type Tracker struct {
	mu     sync.Mutex
	held   map[uint64]int
	naked  map[uint64]bool
	maxSeq uint64
}

func NewTracker() *Tracker {
	return &Tracker{held: map[uint64]int{}, naked: map[uint64]bool{}}
}

// Deliver holds seq for a delivered message.
func (t *Tracker) Deliver(seq uint64) {
	t.mu.Lock()
	if t.naked[seq] {
		delete(t.naked, seq) // the nak's hold carries over
	} else {
		t.held[seq]++
	}
	t.maxSeq = max(t.maxSeq, seq)
	t.mu.Unlock()
}

// Nak keeps the delivery hold of seq until its redelivery.
func (t *Tracker) Nak(seq uint64) {
	t.mu.Lock()
	if t.naked[seq] {
		t.release0(seq) // a second outstanding delivery: drop its hold
	} else {
		t.naked[seq] = true
	}
	t.mu.Unlock()
}

// Max returns the highest delivered sequence.
func (t *Tracker) Max() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxSeq
}

// Hold adds a hold on seq (a key's first unsnapshotted sequence).
func (t *Tracker) Hold(seq uint64) {
	t.mu.Lock()
	t.held[seq]++
	t.mu.Unlock()
}

// Release drops one hold on seq.
func (t *Tracker) Release(seq uint64) {
	t.mu.Lock()
	t.release0(seq)
	t.mu.Unlock()
}

func (t *Tracker) release0(seq uint64) {
	if n := t.held[seq]; n > 1 {
		t.held[seq] = n - 1
	} else {
		delete(t.held, seq)
	}
}

// Checkpoint returns the replay sequence, or 0 if nothing was delivered.
// Its cost is linear in the number of held sequences (at most the
// deliveries in flight plus one per dirty key).
func (t *Tracker) Checkpoint() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.maxSeq == 0 {
		return 0
	}
	low := t.maxSeq + 1
	for s := range t.held {
		low = min(low, s)
	}
	return low
}
