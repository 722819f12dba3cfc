//go:build linux

package e2e

import (
	"syscall"
	"time"
)

// sleepPrecise sleeps for d in a nanosleep system call: ≈ 0.05–0.1 ms
// late on Linux, where time.Sleep of less than a millisecond in an idle
// process wakes ≈ 1.1 ms later (the runtime's poller waits in whole
// milliseconds), which would double a simulated 1 ms round trip. The
// thread blocks in the kernel meanwhile; the runtime hands its P to other
// goroutines when they need it.
func sleepPrecise(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
