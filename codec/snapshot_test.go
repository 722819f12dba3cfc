package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
)

func testSnapshot() *Snapshot {
	return &Snapshot{Key: "sensor-7", Pipeline: "vib", LastSeq: 987654321, State: testState()}
}

func TestSnapshotRoundTripExact(t *testing.T) {
	want := testSnapshot()
	want.State.Scalars["negzero"] = math.Copysign(0, -1)
	// Fields added after the golden file (left zero there, and omitted from
	// the encoding when zero, so older snapshots keep decoding).
	want.State.Config.SwapRatio = 3
	want.State.Config.Rule, want.State.Config.Beta = learners.RuleAPEX, 2.5 // kha's rule and β
	data, err := EncodeSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the snapshot:\n got %+v\nwant %+v", got, want)
	}
	if !math.Signbit(got.State.Scalars["negzero"]) {
		t.Errorf("−0 lost its sign")
	}
}

func TestSnapshotNilMaps(t *testing.T) {
	want := &Snapshot{Key: "k", State: &learners.State{Version: 1, Kind: "batch"}}
	data, err := EncodeSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got.State, want.State)
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	a := testSnapshot()
	// The same state with maps built in another order.
	b := testSnapshot()
	b.State.Ints = map[string]int64{}
	for _, k := range []string{"neg", "big", "fill", "basis_version"} {
		b.State.Ints[k] = a.State.Ints[k]
	}
	b.State.Matrices = map[string]learners.Matrix{}
	for _, k := range []string{"empty", "points", "eig"} {
		b.State.Matrices[k] = a.State.Matrices[k]
	}
	for range 5 {
		da, err := EncodeSnapshot(a)
		if err != nil {
			t.Fatal(err)
		}
		db, err := EncodeSnapshot(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(da) != string(db) {
			t.Fatalf("equal states encoded differently")
		}
	}
}

func TestSnapshotGolden(t *testing.T) {
	data, err := EncodeSnapshot(testSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "snapshot_v1.bin", data)
	// Old versions keep loading: decode the stored file, not the fresh bytes.
	got, err := DecodeSnapshot(readTestdata(t, "snapshot_v1.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := testSnapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("golden snapshot decodes to %+v, want %+v", got, want)
	}
}

func TestManifestRoundTripGolden(t *testing.T) {
	want := &Manifest{Object: "vib.sensor-7/42-0123456789abcdef", Size: 1 << 21, LastSeq: 42, SnapshotVersion: SnapshotVersion}
	for i := range want.Digest {
		want.Digest[i] = byte(i * 7)
	}
	data, err := EncodeManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	if !IsManifest(data) {
		t.Errorf("IsManifest(manifest) = false")
	}
	golden(t, "manifest_v1.bin", data)
	got, err := DecodeManifest(readTestdata(t, "manifest_v1.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	snap, _ := EncodeSnapshot(testSnapshot())
	if IsManifest(snap) {
		t.Errorf("IsManifest(snapshot) = true")
	}
	if _, err := DecodeManifest(snap); !errors.Is(err, ErrMalformed) {
		t.Errorf("DecodeManifest(snapshot) error %v, want ErrMalformed", err)
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	good, err := EncodeSnapshot(testSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	// reframe wraps a hand-made body in a valid envelope.
	reframe := func(body []byte) []byte { return frame(nil, kindSnapshot, SnapshotVersion, body) }
	badMatrix := testSnapshot()
	badMatrix.State.Matrices["eig"] = learners.Matrix{Rows: 2, Cols: 2, Data: []float64{1}}
	w := wireSnapshot{State: toWireState(badMatrix.State)}
	badMatrixBody, _ := marshalSorted(&w)
	unknownField, _ := marshalSorted(map[string]any{"key": "k", "bogus": 1})
	tests := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrMalformed, "shorter than"},
		{"header only", good[:headerLen-1], ErrMalformed, "shorter than"},
		{"bad magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMalformed, "bad magic"},
		{"manifest kind", mutate(func(b []byte) []byte { b[3] = kindManifest; return b }), ErrMalformed, "bad magic"},
		{"unknown version", mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[4:], 2); return b }), ErrVersion, "version 2"},
		{"version zero", mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[4:], 0); return b }), ErrVersion, "version 0"},
		{"truncated body", good[:len(good)-1], ErrMalformed, "header says"},
		{"extra byte", append(append([]byte(nil), good...), 0), ErrMalformed, "header says"},
		{"flipped body byte", mutate(func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), ErrChecksum, "crc32c"},
		{"flipped last byte", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrChecksum, "crc32c"},
		{"flipped checksum", mutate(func(b []byte) []byte { b[7] ^= 1; return b }), ErrChecksum, "crc32c"},
		{"body not msgpack", reframe([]byte{0xc1}), ErrMalformed, "snapshot body"},
		{"body trailing", reframe(append(good[headerLen:len(good):len(good)], 0xc0)), ErrMalformed, "trailing"},
		{"unknown field", reframe(unknownField), ErrMalformed, "snapshot body"},
		{"matrix shape", reframe(badMatrixBody), ErrMalformed, `matrix "eig" is 2×2 with 1 values`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeSnapshot(tt.data)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
			if got != nil {
				t.Errorf("got a snapshot %+v with the error", got)
			}
		})
	}
}

func TestEncodeSnapshotNil(t *testing.T) {
	if _, err := EncodeSnapshot(&Snapshot{Key: "k"}); err == nil {
		t.Errorf("EncodeSnapshot(nil state) succeeded")
	}
	if _, err := EncodeSnapshot(nil); err == nil {
		t.Errorf("EncodeSnapshot(nil) succeeded")
	}
}

// A body whose lengths claim more elements than it has bytes is rejected
// before the msgpack library sizes a map or slice by them (found by
// FuzzDecodeSnapshot: 18 bytes claiming a map of 2²⁸ entries cost 0.2 s
// and a matching allocation).
func TestDecodeSnapshotLengthBomb(t *testing.T) {
	bodies := [][]byte{
		{0x81, 0xa5, 's', 't', 'a', 't', 'e', 0x81, 0xa4, 'i', 'n', 't', 's', 0xdf, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0xa5, 's', 't', 'a', 't', 'e', 0x81, 0xa8, 'm', 'a', 't', 'r', 'i', 'c', 'e', 's', 0xdf, 0x0f, 0xff, 0xff, 0xff},
		{0x81, 0xa3, 'k', 'e', 'y', 0xdb, 0x0f, 0xff, 0xff, 0xff},
	}
	for _, body := range bodies {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeSnapshot(frame(nil, kindSnapshot, SnapshotVersion, body))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("body %x: error %v, want ErrMalformed (truncated)", body, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("body %x: allocated %d bytes", body, n)
		}
		if _, err := DecodeManifest(frame(nil, kindManifest, ManifestVersion, body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("manifest body %x: error %v", body, err)
		}
	}
}

// A snapshot with a classifier round-trips bit-exactly; the golden
// snapshot of version 1 (written before the classifier existed) decodes
// with none, and a snapshot without one keeps its old bytes.
func TestSnapshotClassifier(t *testing.T) {
	want := testSnapshot()
	want.Classifier = &classify.State{Config: classify.Config{Classes: 2, Dim: 1, Ridge: 0.1, Forget: 1}, Seen: 7,
		W: []float64{1, -2, math.Copysign(0, -1), 0.25}, P: []float64{10, 0.5, 0.5, math.SmallestNonzeroFloat64}}
	data, err := EncodeSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !math.Signbit(got.Classifier.W[2]) {
		t.Fatalf("round trip changed the classifier:\n got %+v\nwant %+v", got.Classifier, want.Classifier)
	}
	old, err := DecodeSnapshot(readTestdata(t, "snapshot_v1.bin"))
	if err != nil || old.Classifier != nil {
		t.Fatalf("golden v1 snapshot: classifier %+v, error %v; want none, nil", old.Classifier, err)
	}
	plain, _ := EncodeSnapshot(testSnapshot())
	if bytes.Contains(plain, []byte("classifier")) {
		t.Fatal("a snapshot without a classifier encodes the field")
	}
	// The loss: hinge round-trips; squared (the default) is written as
	// before the field existed, so it reads back as "" (squared).
	hinge := *want.Classifier
	hinge.Config.Loss = classify.LossHinge
	want.Classifier = &hinge
	data, _ = EncodeSnapshot(want)
	if got, err := DecodeSnapshot(data); err != nil || got.Classifier.Config.Loss != classify.LossHinge {
		t.Fatalf("hinge classifier: loss %q, error %v", got.Classifier.Config.Loss, err)
	}
	sq := hinge
	sq.Config.Loss = classify.LossSquared
	want.Classifier = &sq
	data, _ = EncodeSnapshot(want)
	sq.Config.Loss = ""
	if def, _ := EncodeSnapshot(want); !bytes.Equal(data, def) || bytes.Contains(data, []byte("loss")) {
		t.Fatal("a squared-loss classifier does not encode as one without the loss field")
	}
	// A classifier whose arrays do not match its shape is malformed.
	bad := testSnapshot()
	bad.Classifier = &classify.State{Config: classify.Config{Classes: 2, Dim: 1}, W: []float64{1}, P: []float64{1, 0, 0, 1}}
	data, _ = EncodeSnapshot(bad)
	if _, err := DecodeSnapshot(data); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short W: got %v, want ErrMalformed", err)
	}
}
