package natsembed

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStartEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, url, err := StartEmbedded(ctx, Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream not enabled: %v", err)
	}
	if _, _, err := StartEmbedded(ctx, Options{Port: -1}); err == nil {
		t.Error("no store dir: got nil error")
	}
}

// TestPortInUse: a port held by another listener fails the start at once,
// naming the cause, instead of after the 10 s readiness wait.
func TestPortInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	s, _, err := StartEmbedded(context.Background(), Options{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		s.Shutdown()
		t.Fatal("port in use: got nil error")
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("failed after %v, want at once", el)
	}
	if !strings.Contains(err.Error(), "listening") {
		t.Errorf("error %q does not name the listen failure", err)
	}
	t.Logf("%v after %v", err, time.Since(start))
}
