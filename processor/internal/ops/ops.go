package ops

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Views are the read-only views the operations need of the processor:
// copies, never pointers into live state. Package processor implements
// them; their methods are safe for concurrent use.
type Views interface {
	// Member is this instance's member id.
	Member() string
	// Running reports whether Run is between its setup and its stop.
	Running() bool
	// Ready reports whether the instance runs and is connected (/readyz).
	Ready() bool
	// Stats are this instance's counters of every configured pipeline.
	Stats() []PipelineStats
	// Pipelines describes the configured pipelines.
	Pipelines() []PipelineInfo
	// Pipeline returns a configured pipeline, or an error matching
	// ErrNotFound.
	Pipeline(name string) (Pipeline, error)
	// Keys lists the keys of pipeline loaded on this instance, sorted.
	Keys(ctx context.Context, pipeline string) ([]KeyInfo, error)
	// Runs reports whether partition n of pipeline runs here.
	Runs(pipeline string, n int) bool
	// OutputSubject is the output subject of key in pipeline.
	OutputSubject(pipeline, key string) string
	// Members is the coordination bucket as this instance sees it, nil
	// without one (no JetStream pipeline).
	Members() Members
}

// Controls are the requests that change the processor's keys, which its
// workers answer on their own goroutines. Package processor implements
// them; their methods are safe for concurrent use.
type Controls interface {
	// Run runs op on the worker that owns key in partition n of
	// pipeline. ran is false when that partition does not run here.
	Run(ctx context.Context, op Op, pipeline, key string, n int) (r Reply, ran bool, err error)
	// SnapshotAll hands over a snapshot of every changed key of pipeline
	// that this instance runs and returns how many.
	SnapshotAll(ctx context.Context, pipeline string) (int, error)
}

// Op is a control operation on one key.
type Op uint8

const (
	// OpModel answers the key's model export.
	OpModel Op = iota + 1
	// OpSnapshot saves the key's snapshot now.
	OpSnapshot
	// OpReset replaces the key's model and snapshot by a fresh one.
	OpReset
	// OpAccept makes the key's monitor accept its current regime.
	OpAccept
)

// String is op's name: its micro endpoint ("model", "snapshot", "reset",
// "accept"), the last token of its subjects.
func (op Op) String() string {
	switch op {
	case OpModel:
		return "model"
	case OpSnapshot:
		return "snapshot"
	case OpReset:
		return "reset"
	case OpAccept:
		return "accept"
	}
	return "op(" + strconv.Itoa(int(op)) + ")"
}

// Members is this instance's view of the coordination bucket.
type Members interface {
	// Owner is the member named by the record of partition n of
	// pipeline ("" when released or unknown).
	Owner(pipeline string, n int) string
	// Others are the live members other than this one.
	Others() []ownership.Member
	// Runners are the live members other than this one that announce
	// pipeline, and the partition count announced by the one that has run
	// it longest (0 when none does).
	Runners(pipeline string) (ids []string, partitions int)
}

// Pipeline is a read-only copy of what the operations need of a
// configured pipeline.
type Pipeline struct {
	Name       string
	Partitions int
	MaxKeys    int
	Learner    learners.Config
	// OutputStream is the stream that captures the outputs ("" without one).
	OutputStream string
	// OutputStreamOf, when set, is the stream that captures key's outputs
	// (one per shard of the input: processor/shards.go).
	OutputStreamOf func(key string) string
}

// Reply is a worker's answer to a control request: the model export, or
// the number of snapshots handed over.
type Reply struct {
	Data []byte
	N    int
}

// Config configures a Server.
type Config struct {
	// Service is the micro service name (service_name).
	Service string
	// Version is the micro service version.
	Version string
	// Timeout bounds one request (snapshot_timeout).
	Timeout time.Duration
	// Conn serves the micro service and forwards requests to other members.
	Conn *nats.Conn
	// JS reads a watched key's outputs back; nil: no backfill.
	JS jetstream.JetStream
	// Gatherer serves /metrics; nil: no /metrics.
	Gatherer prometheus.Gatherer
	// Log receives the debug lines of backfill.
	Log *zap.Logger
}

// Server serves the operations of one processor: the micro service
// (Start), the HTTP handler (Handler) and the watched keys (Watches).
type Server struct {
	cfg   Config
	v     Views
	c     Controls
	watch *Watches

	// The micro handlers in flight, which run on the connection's
	// goroutines: Stop waits for them.
	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to 0
	inflight int
	stopped  bool
}

// New returns a Server over the processor's views v and controls c;
// watches is the set of watched keys, whose hook its workers call.
func New(cfg Config, v Views, c Controls, watches *Watches) *Server {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	s := &Server{cfg: cfg, v: v, c: c, watch: watches}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// Errors of the control requests, matched with errors.Is; the micro
// endpoints answer them with the Nats-Service-Error-Code in parentheses
// (StatusOf).
var (
	// ErrNotFound: unknown pipeline, or a key with no learner (404).
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: a malformed request (400).
	ErrBadRequest = errors.New("bad request")
	// ErrUnavailable: the key's partition has no owner at the moment (it
	// is moving), or this instance is not running (503). Retry.
	ErrUnavailable = errors.New("unavailable")
)

// errTooManyWatches: a watch refused at MaxWatched (429 on the HTTP API).
var errTooManyWatches = errors.New("too many watched keys")

// StatusOf maps a control error to its service error code. The backend
// makes its own errors match these sentinels (errors.Is) without changing
// their text.
func StatusOf(err error) string {
	switch {
	case errors.Is(err, ErrNotFound):
		return "404"
	case errors.Is(err, ErrBadRequest):
		return "400"
	case errors.Is(err, snapshot.ErrConflict):
		return "409"
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return "503"
	}
	return "500"
}

// Mark returns err, with its text unchanged, made to match code as well
// (one of the sentinels above): the backend marks its own errors so, e.g.
// a key with no learner as ErrNotFound, a fenced partition as
// ErrUnavailable. Mark(nil, code) is nil.
func Mark(err, code error) error {
	if err == nil || errors.Is(err, code) {
		return err
	}
	return marked{err, code}
}

type marked struct{ err, code error }

func (m marked) Error() string   { return m.err.Error() }
func (m marked) Unwrap() []error { return []error{m.err, m.code} }
