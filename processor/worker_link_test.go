package processor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/snapshot"
)

// heldAnswerKeys lands the first save it is given and then holds it
// unanswered until its context ends: its answer was lost with the
// connection (a server restart), which the client has not noticed yet.
type heldAnswerKeys struct {
	keyStore
	once   sync.Once
	landed chan struct{}
}

func (h *heldAnswerKeys) Save(ctx context.Context, key string, s *codec.Snapshot, rev uint64) (uint64, error) {
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return h.keyStore.Save(ctx, key, s, rev)
	}
	if _, err := h.keyStore.Save(ctx, key, s, rev); err != nil {
		return 0, err
	}
	close(h.landed)
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestSaveAnswerLostWithConnection: a snapshot save that landed with its
// answer lost with the connection ends when the connection is lost (the
// partition tells its workers' link), not after snapshot_timeout, and is
// made again on the same revision: it conflicts with the one that landed,
// which is adopted (identical, this epoch), so the save succeeds with the
// stored revision. Before, it waited for the answer until
// snapshot_timeout and failed; a graceful retake after a server restart
// waited for it (TestClusterNodeLoss: 8.0 s, target ≤ 2 s). A newer
// epoch's claim meanwhile still makes it a conflict (the fence).
func TestSaveAnswerLostWithConnection(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l, err := newPCA(testLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range vectors(8, 10) {
		if err := l.Learn(x); err != nil {
			t.Fatal(err)
		}
	}
	key := snapshot.JoinKey("alink", "k")
	rev0, err := e.store.Save(ctx, key, &codec.Snapshot{Key: "k", Pipeline: "alink", LastSeq: 5, Epoch: 3, State: l.State()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, between func()) snapResult {
		held := &heldAnswerKeys{keyStore: e.store, landed: make(chan struct{})}
		w := &worker{deps: deps{epoch: 3, owned: true, log: zaptest.NewLogger(t), store: held, snapshotTimeout: 3 * time.Second},
			jobs: make(chan *snapJob), results: make(chan snapResult), link: newLink()}
		go func() { _ = w.snapshotter(ctx) }()
		t.Cleanup(func() { close(w.jobs) })
		_, rev, err := e.store.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		w.jobs <- &snapJob{e: &entry{key: "k"}, snap: &codec.Snapshot{Key: "k", Pipeline: "alink", LastSeq: 10, Epoch: 3, State: l.State()}, rev: rev}
		<-held.landed
		between()
		w.link.lost() // as partition.repullAfterReconnect at a disconnection
		return <-w.results
	}

	t.Run("adopted", func(t *testing.T) {
		r := run(t, func() {})
		if r.err != nil {
			t.Fatalf("save whose answer was lost with the connection: %v, want the landed save adopted", r.err)
		}
		got, rev, err := e.store.Load(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if rev != r.rev || got.LastSeq != 10 || got.Epoch != 3 {
			t.Errorf("stored rev %d last %d epoch %d; the save reported rev %d, want it at last 10 epoch 3", rev, got.LastSeq, got.Epoch, r.rev)
		}
		if rev == rev0 {
			t.Error("nothing was saved")
		}
	})

	t.Run("claimed by a newer epoch meanwhile", func(t *testing.T) {
		r := run(t, func() {
			got, rev, err := e.store.Load(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			got.Epoch = 4
			if _, err := e.store.Save(ctx, key, got, rev); err != nil {
				t.Fatal(err)
			}
		})
		if !errors.Is(r.err, snapshot.ErrConflict) {
			t.Fatalf("save after a newer epoch claimed the key: %v, want a conflict", r.err)
		}
		if got, _, _ := e.store.Load(ctx, key); got.Epoch != 4 {
			t.Errorf("stored epoch %d, want the newer epoch's 4", got.Epoch)
		}
	})
}
