package main

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/config"
)

// embeddedStoreDir is the store_dir to give the embedded nats-server, which
// keeps its store in the "jetstream" subdirectory of it. The default is
// data_dir, so the store is <data_dir>/jetstream. Versions before this one
// passed <data_dir>/jetstream, so their store is
// <data_dir>/jetstream/jetstream: when that old store exists and store_dir
// is the default, it is kept where it is (logged), so an upgrade finds its
// streams, snapshots and checkpoints.
func embeddedStoreDir(cfg *config.Config, log *zap.Logger) string {
	dir := filepath.Clean(cfg.Embedded.StoreDir)
	if dir != filepath.Clean(cfg.DataDir) {
		return dir
	}
	old := filepath.Join(dir, "jetstream")
	if st, err := os.Stat(filepath.Join(old, "jetstream")); err == nil && st.IsDir() {
		log.Info("embedded store kept in the layout of earlier versions (<data_dir>/jetstream/jetstream); "+
			"to move it, stop kpcastream and move that directory to <data_dir>/jetstream", zap.String("store_dir", old))
		return old
	}
	return dir
}
