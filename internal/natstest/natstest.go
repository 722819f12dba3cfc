package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunServer starts a nats-server with JetStream enabled on 127.0.0.1 at a
// random port, storing in t.TempDir(), with logging off, and returns it with
// its client URL. The server is shut down by t.Cleanup. It calls t.Fatal if
// the server does not start within 10 seconds.
func RunServer(t testing.TB) (*server.Server, string) {
	t.Helper()
	opts := &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatalf("natstest: server not ready after 10s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s, s.ClientURL()
}

// Connect connects to url and returns the connection and a JetStream
// context. The connection is closed by t.Cleanup. It calls t.Fatal on error.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("natstest"))
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// Restartable is a nats-server with JetStream on a fixed loopback port and
// store directory, which a test can stop and start again: clients
// reconnect to the same URL and find their streams.
type Restartable struct {
	t    testing.TB
	opts server.Options
	s    *server.Server
}

// RunRestartable starts a Restartable server (options as RunServer's, the
// port chosen free once, JetStream limits from limits) and stops it with
// t.Cleanup.
func RunRestartable(t testing.TB, limits server.JSLimitOpts) *Restartable {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &Restartable{t: t, opts: server.Options{ServerName: "natstest", Host: "127.0.0.1", Port: port, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true, JetStreamLimits: limits}}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Start starts the server (again); it calls t.Fatal if it is not ready
// within 10 seconds.
func (r *Restartable) Start() {
	opts := r.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		r.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		r.t.Fatal("natstest: server not ready after 10s")
	}
	r.s = s
}

// Stop shuts the server down and waits for it; stopped, it does nothing.
func (r *Restartable) Stop() {
	if r.s != nil {
		r.s.Shutdown()
		r.s.WaitForShutdown()
		r.s = nil
	}
}

// URL is the server's client URL (the same across restarts).
func (r *Restartable) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", r.opts.Port) }

// Addr is the server's host:port.
func (r *Restartable) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.opts.Port) }
