// Package natsembed starts an embedded nats-server with JetStream, so that
// "kpcastream run" and "kpcastream demo" give a working system with no
// external server.
package natsembed

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
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
// accepts connections (bounded by ctx, and by 10 s). It returns the server
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
		NoLog:      opts.Logger == nil,
	}
	s, err := server.NewServer(so)
	if err != nil {
		return nil, "", fmt.Errorf("natsembed: %w", err)
	}
	if opts.Logger != nil {
		s.SetLoggerV2(zapLogger{opts.Logger.Named("nats-server").Sugar()}, false, false, false)
	}
	go s.Start()
	wait := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d))
	}
	if !s.ReadyForConnections(wait) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, "", fmt.Errorf("natsembed: server on %s:%d not ready after %v (port in use?)", opts.Host, opts.Port, wait)
	}
	return s, s.ClientURL(), nil
}

// zapLogger adapts zap to server.Logger.
type zapLogger struct{ s *zap.SugaredLogger }

func (l zapLogger) Noticef(format string, v ...any) { l.s.Infof(format, v...) }
func (l zapLogger) Warnf(format string, v ...any)   { l.s.Warnf(format, v...) }
func (l zapLogger) Fatalf(format string, v ...any)  { l.s.Errorf(format, v...) }
func (l zapLogger) Errorf(format string, v ...any)  { l.s.Errorf(format, v...) }
func (l zapLogger) Debugf(format string, v ...any)  { l.s.Debugf(format, v...) }
func (l zapLogger) Tracef(format string, v ...any)  { l.s.Debugf(format, v...) }
