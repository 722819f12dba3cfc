package natsembed

import (
	"context"
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
