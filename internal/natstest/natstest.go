// Package natstest runs a real nats-server with JetStream inside a test
// process, on loopback with a temporary store directory.
package natstest

import (
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
