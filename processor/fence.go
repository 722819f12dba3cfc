package processor

import (
	"sync"
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// fence is a JetStream partition's ownership.Lease on this process's
// monotonic clock, shared by the renewing goroutine and the workers, with
// a channel closed when it is revoked. Its clock is read by the
// partition's lifecycle (renewals, which revoke an expired lease; the
// release; starting the consumer) and by each worker once, at the last
// moment before a message goes out (worker.lastMoment); the workers'
// machines learn of a revocation from Lost and decide the rest. Saves and
// claims are fenced by their own compare-and-set (doc.go, Fenced
// ownership). A nil fence (core NATS input) is always ok.
type fence struct {
	mu    sync.Mutex
	base  time.Time // the monotonic origin of the lease's times
	lease ownership.Lease
	lost  chan struct{} // closed by revoke
	once  sync.Once
}

func newFence(ttl time.Duration, grantedAt time.Time) *fence {
	f := &fence{base: time.Now(), lost: make(chan struct{})}
	// The lease's times are the base plus monotonic durations, so wall
	// clock steps never enter.
	f.lease = ownership.NewLease(ttl, f.at(grantedAt))
	return f
}

// at is t on the lease's clock.
func (f *fence) at(t time.Time) time.Time { return f.base.Add(t.Sub(f.base)) }

// OK reports whether the partition may still write. The first call that
// finds the lease expired revokes it for good.
func (f *fence) OK() bool {
	if f == nil {
		return true
	}
	f.mu.Lock()
	ok := f.lease.OK(f.at(time.Now()))
	f.mu.Unlock()
	if !ok {
		f.Revoke()
	}
	return ok
}

// Renewed records a successful renewal sent at t.
func (f *fence) Renewed(t time.Time) {
	f.mu.Lock()
	f.lease.Renewed(f.at(t))
	f.mu.Unlock()
}

// Revoke stops every later write and wakes the partition's run loop.
func (f *fence) Revoke() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.lease.Revoke()
	f.mu.Unlock()
	f.once.Do(func() { close(f.lost) })
}

// Lost is closed when the fence is revoked (nil fence: never).
func (f *fence) Lost() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.lost
}
