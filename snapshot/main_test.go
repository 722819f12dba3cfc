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

// leakedGoroutines returns the stacks of all goroutines except this one
// and those the runtime and the testing package keep (signal handling of
// the fuzzing engine).
func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || strings.Contains(g, "os/signal.") || strings.TrimSpace(g) == "" {
			continue
		}
		leaked = append(leaked, g)
	}
	return leaked
}
