package processor

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errLinkLost: the connection to the server was lost while a call waited
// for its answer. The request may have landed or not; its answer will
// not come (the connection it would come back on is gone).
var errLinkLost = errors.New("processor: the connection to the server was lost while the call waited for its answer")

// link tells the snapshot store calls of a partition's workers that the
// connection was lost (partition.repullAfterReconnect calls lost at a
// disconnection). A save or load whose answer was lost with the
// connection waited the whole snapshot_timeout, and a graceful retake
// after a server restart waited for it (TestClusterNodeLoss: 8.0 s
// instead of ≤ 2 s): now the call ends at once, and is made again — a
// save on the same revision, so that one that landed is found by its
// conflict and adopted (worker.ambiguous: identical, same epoch). A nil
// link (a core NATS input, tests) never reports a loss.
type link struct {
	mu     sync.Mutex
	ctx    context.Context // done when the connection is lost; then replaced
	cancel context.CancelFunc
}

func newLink() *link {
	l := &link{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// lost reports a lost connection to the calls waiting now.
func (l *link) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel()
	l.ctx, l.cancel = context.WithCancel(context.Background())
}

// current is done once the connection is lost from now on.
func (l *link) current() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx
}

// call returns ctx bounded by timeout, and cancelled with errLinkLost as
// its cause when the connection is lost meanwhile.
func (w *worker) call(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	if w.link == nil {
		return cctx, cancel
	}
	lctx, lcancel := context.WithCancelCause(cctx)
	stop := context.AfterFunc(w.link.current(), func() { lcancel(errLinkLost) })
	return lctx, func() {
		stop()
		lcancel(nil)
		cancel()
	}
}

// linkLost reports whether ctx (from call) was cancelled by a lost
// connection.
func linkLost(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errLinkLost) }
