package snapshot

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if goroutines started by the tests (servers,
// connections, stores) are still alive a few seconds after the last test.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		leaked := leakedGoroutines()
		for len(leaked) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			leaked = leakedGoroutines()
		}
		if len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "snapshot: %d goroutines leaked:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of all goroutines except this one,
// those the runtime and the testing package keep (signal handling of the
// fuzzing engine) and one known nats.go goroutine (see below).
func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		// nats.go's async-publish status watcher reads its channel under a
		// lock after starting; when the connection closes first, it finds a
		// nil channel and blocks for good (nats.go v1.55.0 jetstream/publish.go,
		// resetPendingAcksOnReconnect). It is not ours to fix here.
		if i == 0 || strings.Contains(g, "os/signal.") || strings.TrimSpace(g) == "" ||
			strings.Contains(g, "jetstream.(*jetStream).resetPendingAcksOnReconnect") {
			continue
		}
		leaked = append(leaked, g)
	}
	return leaked
}
