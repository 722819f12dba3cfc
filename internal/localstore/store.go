// Package localstore is a worker's local tier of key states: a cache on the
// worker's disk below its memory, so that a key evicted from memory loads
// again with a local read instead of a JetStream KV round trip (issue 30).
//
// It is a cache, never a source of truth: a Store is one file, created
// empty by Open (any file already at the path is removed first) and
// removed by Close, so nothing in it outlives the worker that wrote it —
// the caller names the file after the partition and the epoch it owns
// (and its worker), and a new owner, or the same process after a restart,
// starts with an empty one and loads from the durable snapshot store. The
// store does not sync to disk: a crash loses it, which changes nothing.
//
// Values are opaque bytes (the caller's encoded states). A Store is used
// by one goroutine (its worker); it is not safe for concurrent use. Its
// size is bounded by its caller: the keys it holds, times the size of one
// encoded state. Errors are the disk's (wrapped); a missing key is
// reported by Get's ok, not an error.
//
// It is built on bbolt (go.etcd.io/bbolt): one file, a B+tree over mmap,
// pure Go (the binary stays CGO-free), and no dependency beyond
// golang.org/x/sys — against Pebble and Badger, LSM stores that would add
// tens of modules, background compactions and memtables per store to a
// cache that holds a few hundred thousand values at most and is thrown
// away with its worker.
package localstore

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var bucket = []byte("keys")

// Item is one key's value to put.
type Item struct {
	Key   string
	Value []byte
}

// Store is one worker's local tier (see the package comment).
type Store struct {
	db   *bolt.DB
	path string
}

// Open creates an empty store at path, removing any file already there
// (a cache left by an earlier owner or a crash is never trusted).
func Open(path string) (*Store, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("localstore: remove stale %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true, NoGrowSync: true,
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("localstore: open %s: %w", path, err)
	}
	db.NoSync = true
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		_ = db.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("localstore: %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Put writes items in one transaction (a batch costs one commit).
func (s *Store) Put(items []Item) error {
	if len(items) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, it := range items {
			if err := b.Put([]byte(it.Key), it.Value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("localstore: put %d values: %w", len(items), err)
	}
	return nil
}

// Get appends key's value to dst[:0] and returns it; ok is false when the
// store does not hold key.
func (s *Store) Get(dst []byte, key string) (v []byte, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket(bucket).Get([]byte(key)); got != nil {
			v, ok = append(dst[:0], got...), true
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("localstore: get %q: %w", key, err)
	}
	return v, ok, nil
}

// Delete removes keys in one transaction (absent ones are ignored).
func (s *Store) Delete(keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, k := range keys {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("localstore: delete %d keys: %w", len(keys), err)
	}
	return nil
}

// FileBytes is the size of the store's file on disk: the values held, their
// B+tree's pages and the free pages it reuses.
func (s *Store) FileBytes() int64 {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Stale removes the store file at path unless a running Store holds it
// (its lock), and reports whether it did: the file of a worker that
// crashed, which nothing will read again.
func Stale(path string) bool {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 50 * time.Millisecond, ReadOnly: true})
	if errors.Is(err, berrors.ErrTimeout) {
		return false // held by a running worker
	}
	if err == nil {
		_ = db.Close()
	}
	// Not a store (a torn file after a crash) or a free one: remove it.
	return os.Remove(path) == nil
}

// Close closes the store and removes its file.
func (s *Store) Close() error {
	err := s.db.Close()
	if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("localstore: close %s: %w", s.path, err)
	}
	return nil
}
