package snapshot

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if goroutines started by the tests (servers,
// connections, stores) are still alive after the last test (goleak
// retries for a few seconds before it reports).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// nats.go's async-publish status watcher reads its channel under a
		// lock after starting; when the connection closes first it finds a
		// nil channel and blocks for good (nats.go v1.55.0
		// jetstream/publish.go, resetPendingAcksOnReconnect). Not ours.
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	)
}
