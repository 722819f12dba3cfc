package snapshot

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/learners"
)

// env is a Store on a fresh embedded server, with raw access to its buckets.
type env struct {
	store *Store
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	obj   jetstream.ObjectStore
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an embedded nats-server; skipped under -short")
	}
	_, url := natstest.RunServer(t)
	_, js := natstest.Connect(t, url)
	ctx := t.Context()
	s, err := Open(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, s.Config().Bucket)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, s.Config().ObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	return &env{store: s, js: js, kv: kv, obj: obj}
}

// objects returns the names of the objects in the object bucket.
func (e *env) objects(t *testing.T) []string {
	t.Helper()
	infos, err := e.obj.List(t.Context())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	return names
}

// raw returns the KV value stored for a logical key.
func (e *env) raw(t *testing.T, key string) jetstream.KeyValueEntry {
	t.Helper()
	k, err := EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := e.kv.Get(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// testSnap builds a snapshot whose state holds an n×n matrix of distinct values.
func testSnap(key string, lastSeq uint64, n int) *codec.Snapshot {
	data := make([]float64, n*n)
	for i := range data {
		data[i] = math.Sin(float64(i)+float64(lastSeq)) * 1e3
	}
	return &codec.Snapshot{
		Key: key, Pipeline: "p", LastSeq: lastSeq,
		State: &learners.State{
			Version: learners.StateVersion, Kind: "ikpca",
			Config:   learners.Config{Dim: n, Components: 2, Kernel: learners.Kernel{Name: "rbf", Gamma: 0.5}},
			Seen:     int64(lastSeq),
			Ints:     map[string]int64{"basis_version": int64(lastSeq)},
			Scalars:  map[string]float64{"w": 1.5},
			Matrices: map[string]learners.Matrix{"points": {Rows: n, Cols: n, Data: data}},
		},
	}
}

func mustLoad(t *testing.T, s *Store, key string) (*codec.Snapshot, uint64) {
	t.Helper()
	snap, rev, err := s.Load(t.Context(), key)
	if err != nil {
		t.Fatalf("load %q: %v", key, err)
	}
	return snap, rev
}

func TestSaveLoadInline(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := t.Context()
	const key = "p.sensor-1"
	if _, _, err := e.store.Load(ctx, key); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("load of a new key: error %v, want ErrNoSnapshot", err)
	}
	s1 := testSnap(key, 10, 8)
	rev1, err := e.store.Save(ctx, key, s1, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, rev := mustLoad(t, e.store, key)
	if rev != rev1 || !reflect.DeepEqual(got, s1) {
		t.Fatalf("load: revision %d (want %d), equal %v", rev, rev1, reflect.DeepEqual(got, s1))
	}
	if v := e.raw(t, key).Value(); codec.IsManifest(v) {
		t.Errorf("a %d-byte snapshot was not stored inline", len(v))
	}
	s2 := testSnap(key, 20, 8)
	rev2, err := e.store.Save(ctx, key, s2, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if got, rev := mustLoad(t, e.store, key); rev != rev2 || got.LastSeq != 20 || !reflect.DeepEqual(got, s2) {
		t.Errorf("after update: revision %d (want %d), last seq %d", rev, rev2, got.LastSeq)
	}
	if objs := e.objects(t); len(objs) != 0 {
		t.Errorf("inline saves left objects %v", objs)
	}
}

func TestDefaultMaxInline(t *testing.T) {
	e := newEnv(t, Config{})
	// The default server max payload is 1 MiB, so the 900 KiB cap applies.
	if got := e.store.Config().MaxInline; got != DefaultMaxInline {
		t.Errorf("MaxInline %d, want %d", got, DefaultMaxInline)
	}
}

func TestSaveLoadLarge(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := t.Context()
	const key = "p.big"
	s1 := testSnap(key, 1, 400) // 160 000 floats: about 1.4 MiB encoded
	enc, _ := codec.EncodeSnapshot(s1)
	if len(enc) <= 1<<20 {
		t.Fatalf("test state is only %d bytes", len(enc))
	}
	start := time.Now()
	rev1, err := e.store.Save(ctx, key, s1, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %d bytes via the object store in %v", len(enc), time.Since(start))
	if v := e.raw(t, key).Value(); !codec.IsManifest(v) || len(v) > 512 {
		t.Fatalf("KV value is not a small manifest (%d bytes)", len(v))
	}
	objs1 := e.objects(t)
	if len(objs1) != 1 {
		t.Fatalf("objects after the first save: %v", objs1)
	}
	start = time.Now()
	got, rev := mustLoad(t, e.store, key)
	t.Logf("loaded in %v", time.Since(start))
	if rev != rev1 || !reflect.DeepEqual(got, s1) {
		t.Fatalf("large round trip: revision %d (want %d), equal %v", rev, rev1, reflect.DeepEqual(got, s1))
	}

	// A second save writes a new object and deletes the previous one.
	s2 := testSnap(key, 2, 400)
	rev2, err := e.store.Save(ctx, key, s2, rev1)
	if err != nil {
		t.Fatal(err)
	}
	objs2 := e.objects(t)
	if len(objs2) != 1 || objs2[0] == objs1[0] {
		t.Errorf("objects after the second save: %v (first was %v)", objs2, objs1)
	}
	if got, rev := mustLoad(t, e.store, key); rev != rev2 || !reflect.DeepEqual(got, s2) {
		t.Errorf("second large snapshot did not round-trip")
	}

	// Shrinking back to inline deletes the object.
	rev3, err := e.store.Save(ctx, key, testSnap(key, 3, 4), rev2)
	if err != nil {
		t.Fatal(err)
	}
	if objs := e.objects(t); len(objs) != 0 {
		t.Errorf("objects after an inline save: %v", objs)
	}
	if got, rev := mustLoad(t, e.store, key); rev != rev3 || got.LastSeq != 3 {
		t.Errorf("inline after large: revision %d, last seq %d", rev, got.LastSeq)
	}
}

func TestStaleWriterConflict(t *testing.T) {
	// MaxInline 1 KiB sends the 16×16 state through the object store, so both paths are covered.
	for _, tc := range []struct {
		name string
		n    int
	}{{"inline", 4}, {"object", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{MaxInline: 1024})
			ctx := t.Context()
			const key = "p.shared"
			rev0, err := e.store.Save(ctx, key, testSnap(key, 1, tc.n), 0)
			if err != nil {
				t.Fatal(err)
			}
			// Two writers read the same revision; the first commits.
			_, revA := mustLoad(t, e.store, key)
			_, revB := mustLoad(t, e.store, key)
			if revA != rev0 || revB != rev0 {
				t.Fatalf("revisions %d %d, want %d", revA, revB, rev0)
			}
			newer := testSnap(key, 2, tc.n)
			revA2, err := e.store.Save(ctx, key, newer, revA)
			if err != nil {
				t.Fatal(err)
			}
			objsBefore := e.objects(t)
			// The stale writer is refused and changes nothing.
			_, err = e.store.Save(ctx, key, testSnap(key, 99, tc.n), revB)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("stale save: error %v, want ErrConflict", err)
			}
			if _, err := e.store.Save(ctx, key, testSnap(key, 98, tc.n), 0); !errors.Is(err, ErrConflict) {
				t.Fatalf("create over an existing key: error %v, want ErrConflict", err)
			}
			got, rev := mustLoad(t, e.store, key)
			if rev != revA2 || !reflect.DeepEqual(got, newer) {
				t.Errorf("after the conflict: revision %d (want %d), last seq %d (want 2)", rev, revA2, got.LastSeq)
			}
			if objs := e.objects(t); !reflect.DeepEqual(objs, objsBefore) {
				t.Errorf("objects changed by refused saves: %v, before %v", objs, objsBefore)
			}
			if tc.name == "object" && len(objsBefore) != 1 {
				t.Errorf("objects %v, want exactly one", objsBefore)
			}
		})
	}
}

func TestCorruptInline(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := t.Context()
	const key = "p.corrupt"
	if _, err := e.store.Save(ctx, key, testSnap(key, 1, 8), 0); err != nil {
		t.Fatal(err)
	}
	k, _ := EncodeKey(key)
	tests := []struct {
		name string
		mod  func(v []byte) []byte
		msg  string
	}{
		{"flipped body byte", func(v []byte) []byte { v[len(v)/2] ^= 0x10; return v }, "checksum mismatch"},
		{"unknown version", func(v []byte) []byte { v[5] = 9; return v }, "unknown version"},
		{"truncated", func(v []byte) []byte { return v[:len(v)-7] }, "malformed"},
		{"garbage", func([]byte) []byte { return []byte("hello") }, "malformed"},
		{"corrupt manifest", func([]byte) []byte {
			m, _ := codec.EncodeManifest(&codec.Manifest{Object: "x", Size: 1})
			m[len(m)-1] ^= 1
			return m
		}, "checksum mismatch"},
	}
	good := append([]byte(nil), e.raw(t, key).Value()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e.kv.Put(ctx, k, tt.mod(append([]byte(nil), good...))); err != nil {
				t.Fatal(err)
			}
			snap, rev, err := e.store.Load(ctx, key)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name the key and %q", err, tt.msg)
			}
			if snap != nil || rev == 0 {
				t.Errorf("got snapshot %v and revision %d with the error", snap, rev)
			}
		})
	}
}

func TestCorruptObject(t *testing.T) {
	e := newEnv(t, Config{MaxInline: 1024})
	ctx := t.Context()
	const key = "p.obj"
	if _, err := e.store.Save(ctx, key, testSnap(key, 1, 32), 0); err != nil {
		t.Fatal(err)
	}
	objs := e.objects(t)
	if len(objs) != 1 {
		t.Fatalf("objects %v", objs)
	}
	name := objs[0]
	good, err := e.obj.GetBytes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// Replace the object with other bytes of the same size: the object
	// store's own digest is updated, so only the manifest catches it.
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 1
	if _, err := e.obj.PutBytes(ctx, name, bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Load(ctx, key); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "sha-256") {
		t.Errorf("replaced object: error %v, want ErrCorrupt naming the sha-256", err)
	}
	if _, err := e.obj.PutBytes(ctx, name, good[:100]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Load(ctx, key); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "100 bytes") {
		t.Errorf("truncated object: error %v, want ErrCorrupt naming the size", err)
	}
	if err := e.obj.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Load(ctx, key); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing object") {
		t.Errorf("missing object: error %v, want ErrCorrupt naming the missing object", err)
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, Config{MaxInline: 1024})
	ctx := t.Context()
	const key = "p.reset"
	rev, err := e.store.Save(ctx, key, testSnap(key, 1, 16), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctx, key, rev+5); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete at a wrong revision: error %v, want ErrConflict", err)
	}
	if _, r := mustLoad(t, e.store, key); r != rev {
		t.Fatalf("refused delete changed the revision to %d", r)
	}
	if err := e.store.Delete(ctx, key, rev); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Load(ctx, key); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("load after delete: error %v, want ErrNoSnapshot", err)
	}
	if objs := e.objects(t); len(objs) != 0 {
		t.Errorf("delete left objects %v", objs)
	}
	// The key can be created again from revision 0, and deleted unconditionally.
	if _, err := e.store.Save(ctx, key, testSnap(key, 2, 4), 0); err != nil {
		t.Fatalf("save after delete: %v", err)
	}
	if err := e.store.Delete(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctx, "p.never-saved", 0); err != nil {
		t.Errorf("delete of an unknown key: %v", err)
	}
}

func TestOddKeys(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := t.Context()
	keys := []string{"p.a b", "p.ü/x", "p..", ".p", "p.=3D", "p.=", "p.*", "p.>", "p.\x00"}
	for i, key := range keys {
		if _, err := e.store.Save(ctx, key, testSnap(key, uint64(i+1), 2), 0); err != nil {
			t.Fatalf("save %q: %v", key, err)
		}
	}
	for i, key := range keys {
		if got, _ := mustLoad(t, e.store, key); got.LastSeq != uint64(i+1) {
			t.Errorf("key %q loaded the snapshot of another key (last seq %d)", key, got.LastSeq)
		}
	}
	if _, _, err := e.store.Load(ctx, ""); err == nil {
		t.Errorf("empty key accepted")
	}
}

func TestOpenInvalidConfig(t *testing.T) {
	var fe *fielderr.Error
	if _, err := Open(context.Background(), nil, Config{Bucket: "a.b"}); !errors.As(err, &fe) || fe.Path != "bucket" {
		t.Errorf("Open with a bad bucket: error %v", err)
	}
}

// lostAckKV commits an update on the real server, then reports a timeout,
// as when the reply to a successful publish is lost.
type lostAckKV struct {
	kv
	fail bool
}

func (l *lostAckKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := l.kv.Update(ctx, key, value, revision)
	if err == nil && l.fail {
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func TestSaveLostAck(t *testing.T) {
	e := newEnv(t, Config{MaxInline: 1024})
	ctx := t.Context()
	const key = "p.lost-ack"
	rev, err := e.store.Save(ctx, key, testSnap(key, 1, 16), 0)
	if err != nil {
		t.Fatal(err)
	}
	e.store.kv = &lostAckKV{kv: e.store.kv, fail: true}
	want := testSnap(key, 2, 16)
	nrev, err := e.store.Save(ctx, key, want, rev)
	if err != nil {
		t.Fatalf("save whose commit succeeded but whose reply was lost: %v", err)
	}
	got, lrev := mustLoad(t, e.store, key)
	if lrev != nrev || !reflect.DeepEqual(got, want) {
		t.Errorf("after a lost ack: revision %d (Save said %d), last seq %d (want 2)", lrev, nrev, got.LastSeq)
	}
	if objs := e.objects(t); len(objs) != 1 {
		t.Errorf("objects %v, want only the committed one", objs)
	}
}

// laggingKV answers Get as a replica of the bucket that has not applied
// the last write yet (a direct get, nats-server issue 4710): the entry as
// it was before it (not found, before a create). The write itself lands
// on the real server, its reply lost (a timeout), as in lostAckKV.
type laggingKV struct {
	kv
	before map[string]jetstream.KeyValueEntry // key → the entry before the last write (nil: none)
	lagged map[string]bool
}

func (l *laggingKV) remember(ctx context.Context, key string) {
	e, err := l.kv.Get(ctx, key)
	if err != nil {
		e = nil
	}
	l.before[key], l.lagged[key] = e, true
}

func (l *laggingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	l.remember(ctx, key)
	if _, err := l.kv.Create(ctx, key, value, opts...); err != nil {
		return 0, err
	}
	return 0, context.DeadlineExceeded
}

func (l *laggingKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	l.remember(ctx, key)
	if _, err := l.kv.Update(ctx, key, value, revision); err != nil {
		return 0, err
	}
	return 0, context.DeadlineExceeded
}

func (l *laggingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if !l.lagged[key] {
		return l.kv.Get(ctx, key)
	}
	if e := l.before[key]; e != nil {
		return e, nil
	}
	return nil, jetstream.ErrKeyNotFound
}

// TestSaveLostAckStaleRead: a large snapshot's commit lands with its reply
// lost, and the read that looks whether it landed is answered by a
// replica that has not applied it yet. Save must not delete the object
// the committed manifest names (it did: the key's snapshot was then
// corrupt, 'manifest points to missing object', and the next owner
// failed or reset the key). Whether it reports the save as done or not,
// the snapshot loaded once the replica caught up is the one committed.
func TestSaveLostAckStaleRead(t *testing.T) {
	for _, first := range []bool{true, false} {
		name := "update"
		if first {
			name = "create"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Config{MaxInline: 1024})
			ctx := t.Context()
			key := "p.stale-" + name
			direct := e.store.kv
			rev := uint64(0)
			if !first {
				var err error
				if rev, err = e.store.Save(ctx, key, testSnap(key, 1, 16), 0); err != nil {
					t.Fatal(err)
				}
			}
			e.store.kv = &laggingKV{kv: direct, before: map[string]jetstream.KeyValueEntry{}, lagged: map[string]bool{}}
			want := testSnap(key, 2, 16)
			_, err := e.store.Save(ctx, key, want, rev)
			t.Logf("save whose commit landed, its reply lost, read back from a replica behind: %v", err)
			e.store.kv = direct // the replica caught up
			got, _, err := e.store.Load(ctx, key)
			if err != nil {
				t.Fatalf("load after the replica caught up: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("loaded last seq %d, want the committed snapshot (2)", got.LastSeq)
			}
		})
	}
}

// laggingObjects answers the first reads of each object as a replica of
// the object bucket that has not applied its put yet would (the object's
// info is read by a direct get): not found.
type laggingObjects struct {
	objects
	behind int
	reads  map[string]int
}

func (l *laggingObjects) GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error) {
	l.reads[name]++
	if l.reads[name] <= l.behind {
		return nil, jetstream.ErrObjectNotFound
	}
	return l.objects.GetBytes(ctx, name, opts...)
}

// TestLoadObjectReplicaBehind: a large snapshot loaded just after it was
// saved (a key handed over, or unloaded and loaded again), its manifest
// read from an up-to-date replica and its object's info from one that has
// not applied the object's put yet. Load reported the snapshot corrupt
// ('manifest points to missing object'): with on_corrupt_snapshot: reset
// the key started afresh and its claim, on the manifest's revision (the
// latest), landed — its learned state lost. Load reads a missing object
// again a few times before calling it corrupt.
func TestLoadObjectReplicaBehind(t *testing.T) {
	e := newEnv(t, Config{MaxInline: 1024})
	ctx := t.Context()
	const key = "p.object-behind"
	want := testSnap(key, 3, 16)
	if _, err := e.store.Save(ctx, key, want, 0); err != nil {
		t.Fatal(err)
	}
	e.store.obj = &laggingObjects{objects: e.store.obj, behind: 2, reads: map[string]int{}}
	got, _, err := e.store.Load(ctx, key)
	if err != nil {
		t.Fatalf("load with the object's first two reads answered by a replica behind: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded last seq %d, want 3", got.LastSeq)
	}
}
