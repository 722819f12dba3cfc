package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNoSnapshot reports a key that has no snapshot (never saved, or deleted).
	ErrNoSnapshot = errors.New("snapshot: no snapshot")
	// ErrConflict reports a stale revision: someone else committed a newer one.
	ErrConflict = errors.New("snapshot: revision conflict")
	// ErrCorrupt reports stored bytes that cannot be decoded, or an object
	// that does not match its manifest.
	ErrCorrupt = errors.New("snapshot: corrupt snapshot")
)

// kv is the part of jetstream.KeyValue the Store uses.
type kv interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
}

// objects is the part of jetstream.ObjectStore the Store uses.
type objects interface {
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
	GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error)
	Delete(ctx context.Context, name string) error
}

// Store saves and loads snapshots in a KV bucket and an object store bucket.
// It is safe for concurrent use.
type Store struct {
	cfg Config
	kv  kv
	obj objects
}

// Open creates or binds the KV bucket and the object store bucket of cfg
// (CreateOrUpdateKeyValue, CreateOrUpdateObjectStore) and returns a Store.
// MaxInline defaults to, and is capped at, min(server max payload − 4 KiB,
// 900 KiB).
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	limit := DefaultMaxInline
	if nc := js.Conn(); nc != nil {
		if mp := int(nc.MaxPayload()); mp > 0 {
			limit = min(limit, int(mp)-payloadMargin)
		}
	}
	if cfg.MaxInline == 0 || cfg.MaxInline > limit {
		cfg.MaxInline = limit
	}
	kvb, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "kpcastream learner snapshots (inline) and manifests",
		History:     uint8(cfg.History),
		Replicas:    cfg.Replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: open kv bucket %q: %w", cfg.Bucket, err)
	}
	ob, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      cfg.ObjectBucket,
		Description: "kpcastream learner states too large for a kv value",
		Replicas:    cfg.Replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: open object bucket %q: %w", cfg.ObjectBucket, err)
	}
	return &Store{cfg: cfg, kv: kvb, obj: ob}, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Load returns the latest snapshot of key and the KV revision it was read
// at, to be passed back to Save. A key without a snapshot gives
// ErrNoSnapshot; undecodable bytes, or an object whose digest or size does
// not match its manifest (or that is still missing after objectAttempts
// reads), give ErrCorrupt.
func (s *Store) Load(ctx context.Context, key string) (*codec.Snapshot, uint64, error) {
	k, err := EncodeKey(key)
	if err != nil {
		return nil, 0, err
	}
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, fmt.Errorf("%w for key %q", ErrNoSnapshot, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot: load %q: %w", key, err)
	}
	rev := e.Revision()
	data := e.Value()
	var m *codec.Manifest
	if codec.IsManifest(data) {
		m, err = codec.DecodeManifest(data)
		if err != nil {
			return nil, rev, fmt.Errorf("%w: key %q revision %d: %w", ErrCorrupt, key, rev, err)
		}
		data, err = s.getObject(ctx, m.Object)
		switch {
		case errors.Is(err, jetstream.ErrObjectNotFound):
			return nil, rev, fmt.Errorf("%w: key %q revision %d: manifest points to missing object %q", ErrCorrupt, key, rev, m.Object)
		case errors.Is(err, jetstream.ErrDigestMismatch):
			return nil, rev, fmt.Errorf("%w: key %q revision %d: object %q: %w", ErrCorrupt, key, rev, m.Object, err)
		case err != nil:
			return nil, rev, fmt.Errorf("snapshot: load %q: object %q: %w", key, m.Object, err)
		}
		if uint64(len(data)) != m.Size {
			return nil, rev, fmt.Errorf("%w: key %q revision %d: object %q has %d bytes, manifest says %d", ErrCorrupt, key, rev, m.Object, len(data), m.Size)
		}
		if sum := sha256.Sum256(data); sum != m.Digest {
			return nil, rev, fmt.Errorf("%w: key %q revision %d: object %q sha-256 %x, manifest says %x", ErrCorrupt, key, rev, m.Object, sum, m.Digest)
		}
	}
	snap, err := codec.DecodeSnapshot(data)
	if err != nil {
		return nil, rev, fmt.Errorf("%w: key %q revision %d: %w", ErrCorrupt, key, rev, err)
	}
	if m != nil && m.Key != "" && (m.Pipeline != snap.Pipeline || m.Key != snap.Key || m.Epoch != snap.Epoch) {
		return nil, rev, fmt.Errorf("%w: key %q revision %d: manifest names pipeline %q key %q epoch %d, its object holds pipeline %q key %q epoch %d",
			ErrCorrupt, key, rev, m.Pipeline, m.Key, m.Epoch, snap.Pipeline, snap.Key, snap.Epoch)
	}
	return snap, rev, nil
}

// objectAttempts is how many times Load reads a manifest's object that
// is not found, pausing attempt × objectPause before each new read: the
// object's info is read by a direct get, which a replica of the object
// bucket that has not applied the object's put yet answers "not found"
// (nats-server issue 4710) — a snapshot loaded just after its save, by a
// key's next owner or after an unload. Called corrupt at once, it was
// started afresh under on_corrupt_snapshot: reset, and its claim (on the
// manifest's revision, the latest) landed: its state lost
// (TestLoadObjectReplicaBehind). A replica catches up within
// milliseconds; the reads span 0.9 s, so that only a replica far behind
// still resets a key under reset (a conflicting claim is read again for
// 0.2 s, but a claim that gives up costs a retry, this a key's state);
// an object really missing is corrupt 0.9 s later.
const (
	objectAttempts = 10
	objectPause    = 20 * time.Millisecond
)

// getObject reads object name, again while it is not found (objectAttempts).
func (s *Store) getObject(ctx context.Context, name string) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		data, err := s.obj.GetBytes(ctx, name)
		if !errors.Is(err, jetstream.ErrObjectNotFound) || attempt == objectAttempts {
			return data, err
		}
		select {
		case <-time.After(time.Duration(attempt) * objectPause):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// Save writes snap for key and returns the new revision. It commits by
// compare-and-swap on rev, the revision last read by Load or returned by
// Save: rev 0 means the key must not hold a snapshot yet. A stale rev gives
// ErrConflict and changes nothing.
//
// An encoded snapshot of at most MaxInline bytes is the KV value itself.
// A larger one is first written to the object store under a fresh unique
// name, then a manifest pointing to it is committed with the same
// compare-and-swap; after a commit the previous object (if any) is deleted,
// after a failed commit the new one (both best effort). When the commit's
// outcome is unknown (a timeout), Save reads the entry back: if the
// manifest was committed it reports success; it deletes the new object
// only if the entry read is newer than rev and names another (a read
// answered by a replica behind may predate the commit), else leaves it
// in place. A failed Save never destroys the previous snapshot. After any
// error other than ErrConflict the caller should Load again before the
// next Save, because its revision may be stale.
func (s *Store) Save(ctx context.Context, key string, snap *codec.Snapshot, rev uint64) (uint64, error) {
	k, err := EncodeKey(key)
	if err != nil {
		return 0, err
	}
	data, err := codec.EncodeSnapshot(snap)
	if err != nil {
		return 0, fmt.Errorf("snapshot: save %q: %w", key, err)
	}
	if len(data) <= s.cfg.MaxInline {
		old := s.previousObject(ctx, k, rev)
		nrev, err := s.commit(ctx, k, data, rev)
		if err != nil {
			return 0, fmt.Errorf("snapshot: save %q: %w", key, err)
		}
		s.deleteObject(old)
		return nrev, nil
	}
	name, err := objectName(k, snap.LastSeq)
	if err != nil {
		return 0, err
	}
	if _, err := s.obj.PutBytes(ctx, name, data); err != nil {
		s.deleteObject(name)
		return 0, fmt.Errorf("snapshot: save %q: put object %q: %w", key, name, err)
	}
	man, err := codec.EncodeManifest(&codec.Manifest{
		Object: name, Digest: sha256.Sum256(data), Size: uint64(len(data)),
		LastSeq: snap.LastSeq, SnapshotVersion: codec.SnapshotVersion,
		Pipeline: snap.Pipeline, Key: snap.Key, Epoch: snap.Epoch,
	})
	if err != nil {
		s.deleteObject(name)
		return 0, fmt.Errorf("snapshot: save %q: %w", key, err)
	}
	old := s.previousObject(ctx, k, rev)
	nrev, err := s.commit(ctx, k, man, rev)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			s.deleteObject(name)
			return 0, fmt.Errorf("snapshot: save %q: %w", key, err)
		}
		// The outcome is unknown (a timeout may hide a successful commit):
		// look before deleting the object the entry may now point to.
		if committed, crev := s.committed(k, name, rev); committed {
			s.deleteObject(old)
			return crev, nil
		}
		return 0, fmt.Errorf("snapshot: save %q: %w", key, err)
	}
	s.deleteObject(old)
	return nrev, nil
}

// committed reports whether the entry at k is a manifest naming object,
// with its revision, after a commit on revision rev (0: a create) whose
// outcome is unknown. The read is a direct get, which a replica of the
// bucket that has not applied the commit yet may answer, with the entry
// as it was before (nats-server issue 4710): an entry that does not name
// object shows that the commit did not land only when it is newer than
// rev (the commit's compare-and-set then failed, or a later writer
// replaced what it wrote and deletes its object with it). Only then is
// the object deleted; otherwise, as when the entry cannot be read, it is
// kept (an orphan wastes space; deleting an object a committed manifest
// names lost the snapshot: the key was corrupt, TestSaveLostAckStaleRead).
func (s *Store) committed(k, object string, rev uint64) (bool, uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	e, err := s.kv.Get(ctx, k)
	if err != nil {
		return false, 0
	}
	if manifestObject(e.Value()) == object {
		return true, e.Revision()
	}
	if rev != 0 && e.Revision() > rev {
		s.deleteObject(object)
	}
	return false, 0
}

// Delete removes the snapshot of key ("reset key"), committing by
// compare-and-swap on rev like Save; rev 0 deletes unconditionally. A
// stale rev gives ErrConflict. The object of a manifest is deleted too
// (best effort). Deleting a key without a snapshot is not an error.
func (s *Store) Delete(ctx context.Context, key string, rev uint64) error {
	k, err := EncodeKey(key)
	if err != nil {
		return err
	}
	var old string
	if e, err := s.kv.Get(ctx, k); err == nil && (rev == 0 || e.Revision() == rev) {
		old = manifestObject(e.Value())
	}
	var opts []jetstream.KVDeleteOpt
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := s.kv.Delete(ctx, k, opts...); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: delete %q at revision %d: %w", ErrConflict, key, rev, err)
		}
		return fmt.Errorf("snapshot: delete %q: %w", key, err)
	}
	s.deleteObject(old)
	return nil
}

// commit writes value at k by compare-and-swap on rev.
func (s *Store) commit(ctx context.Context, k string, value []byte, rev uint64) (uint64, error) {
	if rev == 0 {
		nrev, err := s.kv.Create(ctx, k, value)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("%w: key exists but revision 0 was given: %w", ErrConflict, err)
		}
		return nrev, err
	}
	nrev, err := s.kv.Update(ctx, k, value, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: revision %d is stale: %w", ErrConflict, rev, err)
	}
	return nrev, err
}

// previousObject returns the object the entry at k points to if that entry
// is at revision rev, else "".
func (s *Store) previousObject(ctx context.Context, k string, rev uint64) string {
	if rev == 0 {
		return ""
	}
	e, err := s.kv.Get(ctx, k)
	if err != nil || e.Revision() != rev {
		return ""
	}
	return manifestObject(e.Value())
}

// deleteObject deletes an object, best effort, with its own short timeout
// so that it runs even when the caller's context is done.
func (s *Store) deleteObject(name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = s.obj.Delete(ctx, name)
}

// manifestObject returns the object named by a manifest value, or "".
func manifestObject(value []byte) string {
	if !codec.IsManifest(value) {
		return ""
	}
	m, err := codec.DecodeManifest(value)
	if err != nil {
		return ""
	}
	return m.Object
}

// objectName returns a fresh object name for a snapshot of KV key k:
// "<k>/<lastSeq>-<16 random hex digits>".
func objectName(k string, lastSeq uint64) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("snapshot: object name: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s/%d-%s", k, lastSeq, hex.EncodeToString(r[:]))
	return b.String(), nil
}

// Entry describes the stored snapshot of one key without decoding it.
type Entry struct {
	// Key is the logical key ("<pipeline>.<key>", decoded).
	Key string
	// Revision and Created are the KV entry's.
	Revision uint64
	Created  time.Time
	// Bytes is the encoded snapshot's size: the KV value's, or the object's
	// for a manifest.
	Bytes int
	// Object names the object store object of a manifest ("" inline).
	Object string
}

// lister is the part of jetstream.KeyValue that List uses.
type lister interface {
	ListKeysFiltered(ctx context.Context, filters ...string) (jetstream.KeyLister, error)
}

var _ lister = jetstream.KeyValue(nil)

// List returns the entries of every key starting with prefix (a logical
// key prefix such as "sensors."), in key order. An entry whose manifest
// cannot be read has Bytes 0.
func (s *Store) List(ctx context.Context, prefix string) ([]Entry, error) {
	l, ok := s.kv.(lister)
	if !ok {
		return nil, errors.New("snapshot: list: the KV bucket cannot list keys")
	}
	filter := ">"
	if prefix != "" {
		p, err := EncodeKey(strings.TrimSuffix(prefix, "."))
		if err != nil {
			return nil, err
		}
		filter = p + ".>"
	}
	kl, err := l.ListKeysFiltered(ctx, filter)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("snapshot: list: %w", err)
	}
	var keys []string
	for k := range kl.Keys() {
		keys = append(keys, k)
	}
	if err := kl.Stop(); err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		_ = err // the lister has delivered every key by now
	}
	sort.Strings(keys)
	var out []Entry
	for _, k := range keys {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot: list: get %q: %w", k, err)
		}
		key, err := DecodeKey(k)
		if err != nil {
			key = k
		}
		en := Entry{Key: key, Revision: e.Revision(), Created: e.Created(), Bytes: len(e.Value())}
		if codec.IsManifest(e.Value()) {
			en.Bytes = 0
			if m, err := codec.DecodeManifest(e.Value()); err == nil {
				en.Object, en.Bytes = m.Object, int(m.Size)
			}
		}
		out = append(out, en)
	}
	return out, nil
}
