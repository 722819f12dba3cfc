package processor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/kpcastream/kpcastream/processor/internal/machine"
)

// TestLaneSubscribeFailEndsSnapshotter: a worker whose output lane cannot
// subscribe to its answers — its connection closed while the partition
// was being taken — returns the error, and its snapshotter ends with it
// (run closes jobs). Left waiting for jobs, the snapshotter held the
// partition's end, and the Processor's, forever (a stressed
// TestJoinAfterKill leaked a killed member's partitions this way). The
// port is a real connection, closed.
func TestLaneSubscribeFailEndsSnapshotter(t *testing.T) {
	e := newEnv(t)
	nc, err := nats.Connect(e.url)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	w := &worker{deps: deps{log: zaptest.NewLogger(t), laneSub: nc},
		lane: newLane(nc, nats.NewInbox(), time.Second), laneIn: make(chan *nats.Msg, 1),
		m:    machine.New[inMsg, *nats.Msg](machine.Config{}, nil),
		jobs: make(chan *snapJob, 1), results: make(chan snapResult, 1), stopped: make(chan struct{})}
	ctx := context.Background()
	snapDone := make(chan error, 1)
	go func() { snapDone <- w.snapshotter(ctx) }()
	if err := w.run(ctx); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("run: %v, want the lane's subscribe failure (connection closed)", err)
	}
	select {
	case <-snapDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshotter still waits for jobs after its worker returned: the partition's end would wait for it forever")
	}
}
