package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Core publishes on core NATS (a *nats.Conn): done when written to the
// connection.
type Core interface {
	PublishMsg(m *nats.Msg) error
}

// Sync publishes with JetStream and waits for the PubAck
// (jetstream.JetStream).
type Sync interface {
	PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Async publishes with JetStream and returns a future of the PubAck
// (jetstream.JetStream).
type Async interface {
	PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

// Finder looks streams up (jetstream.JetStream).
type Finder interface {
	StreamNameBySubject(ctx context.Context, subject string) (string, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// DefaultAttempt bounds a JetStream attempt of an Out without Attempt.
const DefaultAttempt = 5 * time.Second

// Find returns the name of the stream that captures every subject of the
// pattern subjects, or "" when none does: messages to them then go out on
// core NATS. A stream whose subjects only overlap the pattern does not
// count (publishing with JetStream would fail for the others).
func Find(ctx context.Context, js Finder, subjects string) (string, error) {
	name, err := js.StreamNameBySubject(ctx, subjects)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(st.CachedInfo().Config.Subjects, func(f string) bool { return Covers(f, subjects) }) {
		return "", nil
	}
	return name, nil
}

// Covers reports whether the subject filter f matches every subject of
// the pattern subj.
func Covers(f, subj string) bool {
	ft, st := strings.Split(f, "."), strings.Split(subj, ".")
	for i, t := range ft {
		if t == ">" {
			return i < len(st)
		}
		if i >= len(st) {
			return false
		}
		if st[i] == ">" || (t != "*" && t != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

// Out is where messages of one kind go: a stream, with JetStream, when
// JetStream is set (a stream captures their subjects: Find), else core
// NATS. Core is needed for core NATS, Sync for Publish and Retry with
// JetStream, Async for Send with JetStream.
type Out struct {
	Core      Core
	Sync      Sync
	Async     Async
	JetStream bool
	// Attempt bounds one JetStream attempt of Publish and Retry; 0:
	// DefaultAttempt.
	Attempt time.Duration
}

func (o *Out) attempt() time.Duration {
	if o.Attempt > 0 {
		return o.Attempt
	}
	return DefaultAttempt
}

// Publish publishes m and waits: on core NATS until it is written to the
// connection, with JetStream until the stream acknowledged it (one
// attempt, bounded by Attempt).
func (o *Out) Publish(ctx context.Context, m *nats.Msg) error {
	if !o.JetStream {
		return o.Core.PublishMsg(m)
	}
	pctx, cancel := context.WithTimeout(ctx, o.attempt())
	defer cancel()
	_, err := o.Sync.PublishMsg(pctx, m)
	return err
}

// Retry is Publish, with a JetStream attempt whose failure is transient
// retried until deadline, as long as ctx lasts and go (when not nil)
// returns nil — else it returns go's error. go is asked right before each
// retry, after the pause between attempts: a process paused there (past
// a lease, say) sends nothing on a reading taken before the pause. A
// retry is safe when m has a Nats-Msg-Id: the stream drops a duplicate
// and acknowledges it.
func (o *Out) Retry(ctx context.Context, m *nats.Msg, deadline time.Time, goOn func() error) error {
	if !o.JetStream {
		return o.Core.PublishMsg(m)
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, min(o.attempt(), max(time.Until(deadline), time.Millisecond)))
		_, err := o.Sync.PublishMsg(pctx, m)
		cancel()
		if err == nil || !Transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if goOn != nil {
			if gerr := goOn(); gerr != nil {
				return gerr
			}
		}
	}
}

// Send publishes m without waiting for the stream: on core NATS it is done
// (f nil) when written to the connection; with JetStream f resolves with
// the PubAck or an error.
func (o *Out) Send(m *nats.Msg, opts ...jetstream.PublishOpt) (f jetstream.PubAckFuture, err error) {
	if !o.JetStream {
		return nil, o.Core.PublishMsg(m)
	}
	return o.Async.PublishMsgAsync(m, opts...)
}

// Transient reports whether a JetStream call — a publish, or any other —
// may succeed if retried: timeouts, no responders, a connection being
// re-established, and the server's temporary unavailability (no JetStream
// leader while a node is down, an offline stream, peers not yet known).
func Transient(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return true
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable
			10009, // cluster can not handle request (no leader yet)
			10004, // incomplete results
			10023, // insufficient resources (peers not known yet)
			10118, // stream offline
			10119, // consumer offline
			10163, // expected last sequence per subject temporarily unavailable
			10076, // JetStream not enabled (yet: a server still starting)
			10039: // JetStream not enabled for the account (yet)
			return true
		}
	}
	return false
}

// Call runs f, each attempt with a context bounded by attempt, until it
// succeeds, fails for good, or ctx ends: a Transient error is tried again
// after a pause (100 ms, doubling to 2 s) once retried(attempt, err) has
// been told; any other error is returned at once. A JetStream request is
// answered at most once, so a request sent while the cluster elects a
// leader can go unanswered: only a fresh attempt gets an answer.
func Call(ctx context.Context, attempt time.Duration, f func(context.Context) error, retried func(n int, err error)) error {
	wait := 100 * time.Millisecond
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err == nil || !Transient(err) {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			// The caller's context ended during the attempt (or while the
			// wait below lost a tie with it): say so, as after the wait.
			if errors.Is(err, cerr) {
				return err
			}
			return fmt.Errorf("%w (gave up: %w)", err, cerr)
		}
		if retried != nil {
			retried(n, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
