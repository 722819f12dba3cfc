package codec

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// sameObservations compares bitwise, so NaN equals NaN and −0 differs from 0.
func sameObservations(a, b []Observation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || math.Float64bits(a[i].TS) != math.Float64bits(b[i].TS) || len(a[i].X) != len(b[i].X) {
			return false
		}
		for j := range a[i].X {
			if math.Float64bits(a[i].X[j]) != math.Float64bits(b[i].X[j]) {
				return false
			}
		}
	}
	return true
}

func addTestdataSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
}

func FuzzDecodeObservations(f *testing.F) {
	addTestdataSeeds(f, "observation_*")
	for _, s := range []string{`[1,2]`, `{"x":[1e5],"id":"\u00e9","ts":"2024-05-01T12:00:00Z"}`, `{"batch":[[1],{"x":[2]}]}`, `{"y":{"a":[true,null,"s"]},"x":[-0]}`, `{"x":[1],"ts":-0}`} {
		f.Add([]byte(s))
	}
	f.Add(mp(f, map[string]any{"x": []float32{1, 2}, "id": "a", "ts": 5, "z": map[string]any{"q": []byte{1}}}))
	f.Add(mp(f, map[string]any{"batch": []any{[]int{1, -2}, map[string]any{"x": []float64{math.NaN()}}}}))
	lim := Limits{MaxBatch: 16, MaxDim: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		obs, enc, err := DecodeObservations(nil, data, "", lim)
		if err != nil {
			return
		}
		if len(obs) == 0 || len(obs) > lim.MaxBatch {
			t.Fatalf("decoded %d observations without error", len(obs))
		}
		for _, o := range obs {
			if len(o.X) == 0 || len(o.X) > lim.MaxDim {
				t.Fatalf("decoded x of length %d without error", len(o.X))
			}
		}
		for _, e := range []Encoding{JSON, Msgpack} {
			b1, err := EncodeObservations(nil, e, obs)
			if err != nil {
				if e == JSON && firstNonFiniteAny(obs) {
					continue
				}
				t.Fatalf("re-encode as %v: %v", e, err)
			}
			obs2, enc2, err := DecodeObservations(nil, b1, "", lim)
			if err != nil {
				t.Fatalf("decode of re-encoded %v %q: %v", e, b1, err)
			}
			if enc2 != e {
				t.Fatalf("re-encoded %v detected as %v", e, enc2)
			}
			b2, _ := EncodeObservations(nil, e, obs2)
			if !bytes.Equal(b1, b2) {
				t.Fatalf("encode∘decode not idempotent for %v:\n%q\n%q", e, b1, b2)
			}
			// Exact round trip, except that JSON replaces invalid UTF-8 in ids.
			if (e == Msgpack || enc == JSON) && !sameObservations(obs, obs2) && !invalidUTF8IDs(obs) {
				t.Fatalf("round trip through %v changed %+v into %+v", e, obs, obs2)
			}
		}
	})
}

func firstNonFiniteAny(obs []Observation) bool {
	for _, o := range obs {
		if firstNonFinite(o.TS, o.X) >= -1 {
			return true
		}
	}
	return false
}

func invalidUTF8IDs(obs []Observation) bool {
	for _, o := range obs {
		if !utf8Valid(o.ID) {
			return true
		}
	}
	return false
}

func FuzzDecodeSnapshot(f *testing.F) {
	addTestdataSeeds(f, "*.bin")
	good, _ := EncodeSnapshot(testSnapshot())
	f.Add(good[headerLen:]) // a body, framed below
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		// As given (mostly header and checksum checks), and framed with a
		// valid header so that the body decoder is exercised.
		for _, in := range [][]byte{data, frame(nil, kindSnapshot, SnapshotVersion, data)} {
			s, err := DecodeSnapshot(in)
			if err != nil {
				if s != nil {
					t.Fatalf("snapshot returned with error %v", err)
				}
				continue
			}
			b1, err := EncodeSnapshot(s)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			s2, err := DecodeSnapshot(b1)
			if err != nil {
				t.Fatalf("decode of re-encoded snapshot: %v", err)
			}
			b2, _ := EncodeSnapshot(s2)
			if !bytes.Equal(b1, b2) {
				t.Fatalf("encode∘decode not idempotent")
			}
		}
		_, _ = DecodeManifest(data)
		_, _ = DecodeManifest(frame(nil, kindManifest, ManifestVersion, data))
	})
}

// FuzzOutputStamp: OutputStamp never panics, and on a payload it accepts
// it agrees with the full msgpack decoder on id and ts.
func FuzzOutputStamp(f *testing.F) {
	for _, out := range []Output{{ID: "m", Key: "k", Seq: 3, TS: 1.5, Z: []float64{1, -2}}, {ID: "", TS: -1}} {
		data, err := EncodeOutput(nil, Msgpack, &out)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, ts, err := OutputStamp(data, Msgpack)
		if err != nil {
			return
		}
		out, derr := DecodeOutput(data, Msgpack)
		if derr != nil {
			return // a map our walker accepts may still not fit the Output struct
		}
		if string(id) != out.ID || math.Float64bits(ts) != math.Float64bits(out.TS) {
			t.Fatalf("stamp (%q, %v), decoder (%q, %v)", id, ts, out.ID, out.TS)
		}
	})
}
