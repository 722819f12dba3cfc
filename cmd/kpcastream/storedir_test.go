package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/natsembed"
)

// TestEmbeddedStoreDir: by default the embedded server stores in
// <data_dir>/jetstream (not …/jetstream/jetstream); a data directory in
// the earlier layout keeps its store; an explicit store_dir is used as given.
func TestEmbeddedStoreDir(t *testing.T) {
	cfgFor := func(dataDir, storeDir string) *config.Config {
		c := config.Config{DataDir: dataDir, Embedded: config.Embedded{StoreDir: storeDir}}.WithDefaults()
		return &c
	}
	fresh := t.TempDir()
	if got := embeddedStoreDir(cfgFor(fresh, ""), zap.NewNop()); got != fresh {
		t.Errorf("fresh data dir: store_dir %s, want %s", got, fresh)
	}
	old := t.TempDir()
	if err := os.MkdirAll(filepath.Join(old, "jetstream", "jetstream", "$G"), 0o750); err != nil {
		t.Fatal(err)
	}
	if got, want := embeddedStoreDir(cfgFor(old, ""), zap.NewNop()), filepath.Join(old, "jetstream"); got != want {
		t.Errorf("earlier layout: store_dir %s, want %s", got, want)
	}
	if got := embeddedStoreDir(cfgFor(old, "/elsewhere"), zap.NewNop()); got != "/elsewhere" {
		t.Errorf("explicit store_dir: %s", got)
	}
	if testing.Short() {
		return
	}
	// What the server makes of the default.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, _, err := natsembed.StartEmbedded(ctx, natsembed.Options{Host: "127.0.0.1", Port: -1, StoreDir: embeddedStoreDir(cfgFor(fresh, ""), zap.NewNop())})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	if st, err := os.Stat(filepath.Join(fresh, "jetstream")); err != nil || !st.IsDir() {
		t.Errorf("no store in <data_dir>/jetstream: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "jetstream", "jetstream")); !os.IsNotExist(err) {
		t.Errorf("store nested in <data_dir>/jetstream/jetstream (%v)", err)
	}
}
