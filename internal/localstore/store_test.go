package localstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w0.db")
	if err := os.WriteFile(path, []byte("an earlier owner's cache"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatalf("open over a stale file: %v", err)
	}
	var items []Item
	for i := range 100 {
		items = append(items, Item{Key: fmt.Sprintf("k%03d", i), Value: bytes.Repeat([]byte{byte(i)}, 1000+i)})
	}
	if err := s.Put(items[:60]); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(items[60:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 16)
	for _, it := range items {
		v, ok, err := s.Get(buf, it.Key)
		if err != nil || !ok || !bytes.Equal(v, it.Value) {
			t.Fatalf("get %s: %d bytes, %v, %v; want its %d bytes", it.Key, len(v), ok, err, len(it.Value))
		}
	}
	// Overwrite, delete, miss.
	if err := s.Put([]Item{{Key: "k000", Value: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Get(nil, "k000"); !ok || string(v) != "new" {
		t.Fatalf("after overwrite: %q %v", v, ok)
	}
	if err := s.Delete("k001", "k002", "absent"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(nil, "k001"); ok || err != nil {
		t.Fatalf("deleted key: ok %v, err %v", ok, err)
	}
	if fb := s.FileBytes(); fb < 100*1000 {
		t.Errorf("file %d bytes, want at least the values' 100 kB", fb)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file still there after Close: %v", err)
	}
	// A fresh store at the same path holds nothing of the last one.
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok, _ := s.Get(nil, "k050"); ok {
		t.Error("a reopened store holds a key of the closed one")
	}
	// Stale leaves a file a running store holds, removes a free or torn one.
	if Stale(path) {
		t.Error("Stale removed the file of an open store")
	}
	torn := filepath.Join(t.TempDir(), "torn.db")
	if err := os.WriteFile(torn, []byte("half a page"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !Stale(torn) {
		t.Error("Stale left a torn file")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "no", "such", "dir", "w.db")); err == nil {
		t.Error("open in a missing directory: no error")
	}
}

// BenchmarkPutGet is one spill (a put of a 6 kB state, in batches of 16)
// and one reload (a get) per iteration, as a worker whose keys cycle
// through its memory does.
func BenchmarkPutGet(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "w.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	val := bytes.Repeat([]byte{7}, 6000)
	const keys = 20000
	batch := make([]Item, 0, 16)
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		batch = append(batch, Item{Key: fmt.Sprintf("key%06d", i%keys), Value: val})
		if len(batch) == cap(batch) {
			if err := s.Put(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		if _, _, err := s.Get(buf, fmt.Sprintf("key%06d", (i+keys/2)%keys)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(s.FileBytes())/(1<<20), "file-MiB")
}
