package natsembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/internal/natsconn"
)

// Options configures the embedded server.
type Options struct {
	// Host is the listen address. Default 127.0.0.1.
	Host string
	// Port is the client port; -1 picks a free port. Default 4222.
	Port int
	// StoreDir is the JetStream store directory (created if missing).
	// Required.
	StoreDir string
	// Name is the server name. Default "kpcastream".
	Name string
	// Logger receives the server's logs (named "nats-server"). Default: none.
	Logger *zap.Logger
}

// StartEmbedded starts a nats-server with JetStream and waits until it
// accepts connections (bounded by ctx, and by 10 s); a start that fails (the
// port is in use, the store cannot be opened) is an error at once, with the
// server's reason. Its logs go to Options.Logger with URL secrets
// redacted. It returns the server
// and its client URL; the caller stops it with Shutdown and WaitForShutdown.
func StartEmbedded(ctx context.Context, opts Options) (*server.Server, string, error) {
	if opts.StoreDir == "" {
		return nil, "", fmt.Errorf("natsembed: store dir is required")
	}
	if err := os.MkdirAll(opts.StoreDir, 0o750); err != nil {
		return nil, "", fmt.Errorf("natsembed: %w", err)
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = 4222
	}
	if opts.Name == "" {
		opts.Name = "kpcastream"
	}
	so := &server.Options{
		ServerName: opts.Name,
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      false, // the adapter below always receives the logs (Fatalf reports a failed start)
	}
	s, err := server.NewServer(so)
	if err != nil {
		return nil, "", fmt.Errorf("natsembed: %w", err)
	}
	// The server reports a failure to start (the port is in use, the store
	// cannot be opened) with Fatalf and keeps going; the adapter hands it to
	// us so that a failed start is an error at once, not a 10 s timeout.
	lg := opts.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	fatal := make(chan string, 1)
	s.SetLoggerV2(zapLogger{s: lg.Named("nats-server").Sugar(), fatal: fatal}, false, false, false)
	go s.Start()
	wait := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d))
	}
	deadline := time.Now().Add(wait)
	for !s.ReadyForConnections(20 * time.Millisecond) {
		var why error
		select {
		case msg := <-fatal:
			why = errors.New(msg)
		case <-ctx.Done():
			why = ctx.Err()
		default:
			if time.Now().After(deadline) {
				why = fmt.Errorf("not ready after %v (port in use?)", wait)
			}
		}
		if why != nil {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, "", fmt.Errorf("natsembed: server on %s:%d: %w", opts.Host, opts.Port, why)
		}
	}
	return s, s.ClientURL(), nil
}

// Logger returns a server.Logger that writes the server's logs to log
// (named "nats-server"), with any URL's secrets redacted.
func Logger(log *zap.Logger) server.Logger {
	return zapLogger{s: log.Named("nats-server").Sugar()}
}

// zapLogger adapts zap to server.Logger; every line goes through
// natsconn.RedactText, and a fatal one is also sent on fatal (when set and
// not full).
type zapLogger struct {
	s     *zap.SugaredLogger
	fatal chan<- string
}

// Noticef logs at debug: the server's notices are its start-up banner (25
// lines: version, the JetStream logo and limits) and shutdown steps; the
// caller logs the one line that matters (the URL it serves). Warnings and
// errors stay at their levels.
func (l zapLogger) Noticef(format string, v ...any) { l.s.Debug(redact(format, v)) }
func (l zapLogger) Warnf(format string, v ...any)   { l.s.Warn(redact(format, v)) }
func (l zapLogger) Errorf(format string, v ...any)  { l.s.Error(redact(format, v)) }
func (l zapLogger) Debugf(format string, v ...any)  { l.s.Debug(redact(format, v)) }
func (l zapLogger) Tracef(format string, v ...any)  { l.s.Debug(redact(format, v)) }
func (l zapLogger) Fatalf(format string, v ...any) {
	msg := redact(format, v)
	if l.fatal != nil {
		select {
		case l.fatal <- msg:
			l.s.Debug(msg) // StartEmbedded returns it: said once, by the caller
			return
		default:
		}
	}
	l.s.Error(msg)
}

func redact(format string, v []any) string { return natsconn.RedactText(fmt.Sprintf(format, v...)) }
