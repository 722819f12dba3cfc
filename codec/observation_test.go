package codec

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// mp encodes v with the msgpack library, as a typical producer would.
func mp(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeObservationsShapes(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 500_000_000, time.UTC)
	tsSec := float64(ts.Unix()) + 0.5
	tests := []struct {
		name string
		data []byte
		ct   string
		enc  Encoding
		want []Observation
	}{
		{"json bare", []byte(` [1, -2.5, 3e2, 0]`), "", JSON, []Observation{{X: []float64{1, -2.5, 300, 0}}}},
		{"json object", []byte(`{"ts":12.25,"x":[1,2],"id":"a-1","extra":{"n":[1,{"m":null}],"s":"\"}"}}`), "application/json", JSON,
			[]Observation{{ID: "a-1", TS: 12.25, X: []float64{1, 2}}}},
		{"json rfc3339", []byte(`{"x":[1],"ts":"2024-05-01T12:00:00.5Z"}`), "", JSON, []Observation{{TS: tsSec, X: []float64{1}}}},
		{"json escaped id", []byte(`{"x":[1],"id":"a\u00e9\n"}`), "", JSON, []Observation{{ID: "aé\n", X: []float64{1}}}},
		{"json escapes", []byte(`{"\u0078":[1],"id":"\"\\\/\b\f\n\r\t\ud83d\ude00\ufffd\u0000"}`), "", JSON,
			[]Observation{{ID: "\"\\/\b\f\n\r\t😀\ufffd\x00", X: []float64{1}}}},
		{"json invalid utf-8 in a skipped field", []byte("{\"x\":[1],\"extra\":\"\xff\"}"), "", JSON, []Observation{{X: []float64{1}}}},
		{"json null id and ts", []byte(`{"x":[1],"id":null,"ts":null}`), "", JSON, []Observation{{X: []float64{1}}}},
		{"json batch", []byte(`{"batch":[[1,2],{"x":[3,4],"id":"b"},[5,6]]}`), "", JSON,
			[]Observation{{X: []float64{1, 2}}, {ID: "b", X: []float64{3, 4}}, {X: []float64{5, 6}}}},
		{"json content type params", []byte(`[1]`), "Application/JSON; charset=utf-8", JSON, []Observation{{X: []float64{1}}}},
		{"json extreme numbers", []byte(`[1.7976931348623157e308,-5e-324,1e-400,-0]`), "", JSON,
			[]Observation{{X: []float64{math.MaxFloat64, -5e-324, 0, math.Copysign(0, -1)}}}},
		{"msgpack bare float64", mp(t, []float64{1, 2.5}), "", Msgpack, []Observation{{X: []float64{1, 2.5}}}},
		{"msgpack bare float32", mp(t, []float32{1.5, -0.25}), "application/x-msgpack", Msgpack, []Observation{{X: []float64{1.5, -0.25}}}},
		{"msgpack mixed ints", mp(t, []any{int8(-3), uint8(200), int16(-300), uint16(60000), int32(-70000), uint32(4e9), int64(-1 << 40), uint64(1 << 50), 7, -1}), "", Msgpack,
			[]Observation{{X: []float64{-3, 200, -300, 60000, -70000, 4e9, -(1 << 40), 1 << 50, 7, -1}}}},
		{"msgpack object", mp(t, map[string]any{"x": []float64{1}, "id": "q", "ts": 3.5, "extra": map[string]any{"b": []byte{1, 2}, "t": true}}), "application/msgpack", Msgpack,
			[]Observation{{ID: "q", TS: 3.5, X: []float64{1}}}},
		{"msgpack rfc3339", mp(t, map[string]any{"x": []float64{1}, "ts": "2024-05-01T12:00:00.5Z"}), "", Msgpack, []Observation{{TS: tsSec, X: []float64{1}}}},
		{"msgpack timestamp ext", mp(t, map[string]any{"x": []float64{1}, "ts": ts}), "", Msgpack, []Observation{{TS: tsSec, X: []float64{1}}}},
		{"msgpack timestamp ext32", mp(t, map[string]any{"x": []float64{1}, "ts": time.Unix(1700000000, 0)}), "", Msgpack, []Observation{{TS: 1700000000, X: []float64{1}}}},
		{"msgpack timestamp ext96", mp(t, map[string]any{"x": []float64{1}, "ts": time.Unix(-5, 250_000_000)}), "", Msgpack, []Observation{{TS: -4.75, X: []float64{1}}}},
		{"msgpack batch", mp(t, map[string]any{"batch": []any{[]float32{1}, map[string]any{"x": []int{2}, "id": nil}}}), "", Msgpack,
			[]Observation{{X: []float64{1}}, {X: []float64{2}}}},
		{"msgpack NaN passes", mp(t, []float64{math.Inf(1), 1}), "", Msgpack, []Observation{{X: []float64{math.Inf(1), 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, enc, err := DecodeObservations(nil, tt.data, tt.ct, Limits{})
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if enc != tt.enc {
				t.Errorf("encoding %v, want %v", enc, tt.enc)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				for j, v := range got[i].X {
					if math.Signbit(v) != math.Signbit(tt.want[i].X[j]) {
						t.Errorf("observation %d element %d: sign of %v lost", i, j, v)
					}
				}
			}
		})
	}
}

func TestDecodeObservationsErrors(t *testing.T) {
	small := Limits{MaxBatch: 3, MaxDim: 4}
	goodMP := mp(t, map[string]any{"x": []float64{1, 2}, "id": "abc"})
	tests := []struct {
		name string
		data []byte
		ct   string
		lim  Limits
		want error
		msg  string
	}{
		{"empty", nil, "", Limits{}, ErrMalformed, "empty payload"},
		{"json empty", []byte("  "), "application/json", Limits{}, ErrMalformed, "empty payload"},
		{"content type", []byte("[1]"), "text/plain", Limits{}, ErrMalformed, `unsupported content type "text/plain"`},
		{"json string element", []byte(`{"x":[1,2,3,"a"]}`), "", Limits{}, ErrMalformed, "field x: element 3 is a string"},
		{"json null element", []byte(`[1,null]`), "", Limits{}, ErrMalformed, "field x: element 1 is null"},
		{"json empty x", []byte(`{"x":[]}`), "", Limits{}, ErrMalformed, "field x: empty"},
		{"json empty bare", []byte(`[]`), "", Limits{}, ErrMalformed, "field x: empty"},
		{"json x not array", []byte(`{"x":{"a":1}}`), "", Limits{}, ErrMalformed, "field x: is an object"},
		{"json missing x", []byte(`{"id":"a"}`), "", Limits{}, ErrMalformed, "field x: missing"},
		{"json no fields", []byte(`{"q":[1]}`), "", Limits{}, ErrMalformed, "missing field x or batch"},
		{"json id number", []byte(`{"x":[1],"id":5}`), "", Limits{}, ErrMalformed, "field id: is a number"},
		{"json ts bool", []byte(`{"x":[1],"ts":true}`), "", Limits{}, ErrMalformed, "field ts: is a bool"},
		{"json ts bad string", []byte(`{"x":[1],"ts":"yesterday"}`), "", Limits{}, ErrMalformed, `"yesterday" is not an RFC 3339 time`},
		{"json duplicate x", []byte(`{"x":[1],"x":[2]}`), "", Limits{}, ErrMalformed, "field x: duplicate"},
		{"json x and batch", []byte(`{"batch":[[1]],"x":[1]}`), "", Limits{}, ErrMalformed, "next to batch"},
		{"json nested batch", []byte(`{"batch":[{"batch":[[1]]}]}`), "", Limits{}, ErrMalformed, "batch element 0: batch inside a batch"},
		{"json batch element", []byte(`{"batch":[[1],[2],["z"]]}`), "", Limits{}, ErrMalformed, "batch element 2: field x: element 0 is a string"},
		{"json batch scalar", []byte(`{"batch":[1]}`), "", Limits{}, ErrMalformed, "batch element 0: is a number"},
		{"json empty batch", []byte(`{"batch":[]}`), "", Limits{}, ErrMalformed, "field batch: empty"},
		{"json truncated", []byte(`{"x":[1,2`), "", Limits{}, ErrMalformed, "truncated"},
		{"json truncated string", []byte(`{"x":[1],"id":"ab`), "", Limits{}, ErrMalformed, "truncated"},
		{"json trailing", []byte(`[1] [2]`), "", Limits{}, ErrMalformed, "trailing bytes"},
		{"json bad number", []byte(`[1.]`), "", Limits{}, ErrMalformed, "unexpected"},
		{"json leading zero", []byte(`[01]`), "", Limits{}, ErrMalformed, "unexpected"},
		{"json plus", []byte(`[+1]`), "", Limits{}, ErrMalformed, "element 0 is invalid JSON"},
		{"json NaN", []byte(`[NaN]`), "", Limits{}, ErrMalformed, "element 0 is invalid JSON"},
		{"json overflow", []byte(`[1e999]`), "", Limits{}, ErrMalformed, "out of range"},
		{"json control char", []byte("{\"x\":[1],\"id\":\"a\x01\"}"), "", Limits{}, ErrMalformed, "control character"},
		{"json deep", []byte(`{"x":[1],"d":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`), "", Limits{}, ErrMalformed, "nested deeper"},
		{"json not object", []byte(`"x"`), "application/json", Limits{}, ErrMalformed, "payload is a string"},
		{"json oversized x", []byte(`[1,2,3,4,5]`), "", small, ErrTooLarge, "field x: more than 4 values"},
		{"json oversized batch", []byte(`{"batch":[[1],[2],[3],[4]]}`), "", small, ErrTooLarge, "more than 3 observations"},
		{"msgpack truncated", goodMP[:len(goodMP)-2], "", Limits{}, ErrMalformed, "msgpack truncated"},
		{"msgpack truncated header", mp(t, []float64{1, 2, 3})[:1], "", Limits{}, ErrMalformed, "msgpack truncated"},
		{"msgpack string element", mp(t, map[string]any{"x": []any{1.0, "s"}}), "", Limits{}, ErrMalformed, "field x: element 1 is a string"},
		{"msgpack nil element", mp(t, []any{nil}), "", Limits{}, ErrMalformed, "field x: element 0 is nil"},
		{"msgpack bool element", mp(t, []any{1, true}), "", Limits{}, ErrMalformed, "field x: element 1 is a bool"},
		{"msgpack empty x", mp(t, map[string]any{"x": []float64{}}), "", Limits{}, ErrMalformed, "field x: empty"},
		{"msgpack x is map", mp(t, map[string]any{"x": map[string]int{"a": 1}}), "", Limits{}, ErrMalformed, "field x: is a map"},
		{"msgpack id int", mp(t, map[string]any{"x": []float64{1}, "id": 5}), "", Limits{}, ErrMalformed, "field id: is an integer"},
		{"msgpack ts binary", mp(t, map[string]any{"x": []float64{1}, "ts": []byte{1}}), "", Limits{}, ErrMalformed, "field ts: is binary"},
		{"msgpack ts other ext", []byte{0x82, 0xa1, 'x', 0x91, 0x01, 0xa2, 't', 's', 0xd6, 0x05, 0, 0, 0, 0}, "", Limits{}, ErrMalformed, "extension type 5"},
		{"msgpack int key", []byte{0x81, 0x01, 0x91, 0x01}, "", Limits{}, ErrMalformed, "map key is an integer"},
		{"msgpack scalar", []byte{0x05}, "", Limits{}, ErrMalformed, "payload is an integer"},
		{"msgpack invalid code", []byte{0x82, 0xa1, 'x', 0x91, 0x01, 0xa1, 'q', 0xc1}, "", Limits{}, ErrMalformed, "invalid msgpack code 0xc1"},
		{"msgpack trailing", append(mp(t, []float64{1}), 0xc0), "", Limits{}, ErrMalformed, "1 trailing bytes"},
		{"msgpack huge array header", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}, "", Limits{}, ErrMalformed, "msgpack truncated"},
		{"msgpack huge string", []byte{0x81, 0xdb, 0xff, 0xff, 0xff, 0xff}, "", Limits{}, ErrMalformed, "msgpack truncated"},
		{"msgpack deep", append(append([]byte{0x82, 0xa1, 'x', 0x91, 0x01, 0xa1, 'd'}, []byte(strings.Repeat("\x91", 40))...), 0xc0), "", Limits{}, ErrMalformed, "nested deeper"},
		{"msgpack oversized x", mp(t, []float64{1, 2, 3, 4, 5}), "", small, ErrTooLarge, "field x: more than 4 values"},
		{"msgpack oversized batch", mp(t, map[string]any{"batch": [][]float64{{1}, {2}, {3}, {4}}}), "", small, ErrTooLarge, "field batch: 4 observations, limit 3"},
		{"msgpack batch element", mp(t, map[string]any{"batch": []any{[]float64{1}, "s"}}), "", Limits{}, ErrMalformed, "batch element 1: is a string"},
		{"msgpack empty batch", mp(t, map[string]any{"batch": []any{}}), "", Limits{}, ErrMalformed, "field batch: empty"},
		{"json as msgpack", []byte(`[1]`), "application/msgpack", Limits{}, ErrMalformed, `payload is text ("[1]"), not JSON or msgpack`},
		// Text (nats pub subj hello) is named as text, not the msgpack
		// integer of its first byte (issue 33 row 7).
		{"text", []byte("hello"), "", Limits{}, ErrMalformed, `payload is text ("hello"), not JSON or msgpack: send a JSON object {"x":[…]} or array [x1,…], or msgpack`},
		{"csv line", []byte("1.5,2,3\n"), "", Limits{}, ErrMalformed, `payload is text ("1.5,2,3\n")`},
		{"msgpack as json", mp(t, []float64{1}), "application/json", Limits{}, ErrMalformed, "payload is invalid JSON"},
		// Ids must be valid UTF-8, in both encodings (issue #14: "\xed" used
		// to decode, re-encode as "\ufffd" and so have two JSON forms).
		{"json id invalid utf-8", []byte("{\"x\":[0],\"id\":\"\xed\"}"), "", Limits{}, ErrMalformed, "field id: invalid UTF-8 at byte 0"},
		{"json id invalid utf-8 escaped", []byte("{\"x\":[0],\"id\":\"a\\n\x80\"}"), "", Limits{}, ErrMalformed, "field id: invalid UTF-8 at byte 2"},
		{"json id lone surrogate", []byte(`{"x":[0],"id":"\ud800"}`), "", Limits{}, ErrMalformed, "field id: \\u escape of an unpaired UTF-16 surrogate"},
		{"json id low surrogate first", []byte(`{"x":[0],"id":"\udc00\ud800"}`), "", Limits{}, ErrMalformed, "unpaired UTF-16 surrogate"},
		{"json bad escape", []byte(`{"x":[0],"id":"\q"}`), "", Limits{}, ErrMalformed, `field id: bad string: bad escape "\\q"`},
		{"json bad unicode escape", []byte(`{"x":[0],"id":"\u12"}`), "", Limits{}, ErrMalformed, `bad \u escape`},
		{"json batch id invalid utf-8", []byte("{\"batch\":[[1],{\"x\":[0],\"id\":\"ok\xff\"}]}"), "", Limits{}, ErrMalformed, "batch element 1: field id: invalid UTF-8 at byte 2"},
		{"msgpack id invalid utf-8", mp(t, map[string]any{"x": []float64{1}, "id": "\xed\xa0\x80"}), "", Limits{}, ErrMalformed, "field id: invalid UTF-8 at byte 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]Observation, 2, 4)
			got, _, err := DecodeObservations(dst, tt.data, tt.ct, tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "codec: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if len(got) != 0 {
				t.Errorf("got %d observations with the error", len(got))
			}
		})
	}
}

func TestDecodeObservationsReusesDst(t *testing.T) {
	batch := []byte(`{"batch":[[1,2,3],[4,5,6]]}`)
	obs, _, err := DecodeObservations(nil, batch, "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	x0 := &obs[0].X[0]
	obs, _, err = DecodeObservations(obs, []byte(`{"batch":[[7,8],[9,10,11]]}`), "", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if &obs[0].X[0] != x0 {
		t.Errorf("X storage of observation 0 was not reused")
	}
	want := []Observation{{X: []float64{7, 8}}, {X: []float64{9, 10, 11}}}
	if !reflect.DeepEqual(obs, want) {
		t.Errorf("got %+v, want %+v", obs, want)
	}
	// IDs and timestamps of a previous decode do not leak into the next.
	obs, _, _ = DecodeObservations(obs, []byte(`{"x":[1],"id":"a","ts":5}`), "", Limits{})
	obs, _, _ = DecodeObservations(obs, []byte(`[2]`), "", Limits{})
	if obs[0].ID != "" || obs[0].TS != 0 {
		t.Errorf("stale id %q / ts %v", obs[0].ID, obs[0].TS)
	}
}

func TestDecodeObservationsWarmAllocs(t *testing.T) {
	x := make([]float64, 16)
	for i := range x {
		x[i] = float64(i) * 0.37
	}
	inputs := map[string][]byte{
		"json":          []byte(`{"x":[0,0.37,0.74,1.11,1.48,1.85,2.22,2.59,2.96,3.33,3.7,4.07,4.44,4.81,5.18,5.55],"ts":1715000000.25}`),
		"msgpack":       mp(t, map[string]any{"x": x, "ts": 1715000000.25}),
		"msgpack batch": mp(t, map[string]any{"batch": [][]float64{x, x, x, x}}),
	}
	for name, data := range inputs {
		obs, _, err := DecodeObservations(nil, data, "", Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			obs, _, _ = DecodeObservations(obs, data, "", Limits{})
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per warm decode, want 0", name, allocs)
		}
	}
}

func TestParseEncoding(t *testing.T) {
	for _, e := range []Encoding{JSON, Msgpack} {
		got, err := ParseEncoding(e.String())
		if err != nil || got != e {
			t.Errorf("ParseEncoding(%q) = %v, %v", e.String(), got, err)
		}
	}
	if _, err := ParseEncoding("xml"); err == nil {
		t.Errorf("ParseEncoding(xml) succeeded")
	}
	if JSON.ContentType() != "application/json" || Msgpack.ContentType() != "application/msgpack" {
		t.Errorf("content types %q %q", JSON.ContentType(), Msgpack.ContentType())
	}
}

// Golden input fixtures: files a producer would send, kept so that the
// accepted shapes never silently change.
func TestObservationFixtures(t *testing.T) {
	x := []float64{0.5, -1.25, 3}
	if *update {
		golden(t, "observation_batch.msgpack", mp(t, map[string]any{"batch": []any{
			map[string]any{"x": x, "id": "a", "ts": 1715000000.5}, []float32{1, 2, 3},
		}}))
	}
	tests := []struct {
		file string
		want []Observation
	}{
		{"observation_single.json", []Observation{{ID: "a", TS: 1715000000.5, X: x}}},
		{"observation_bare.json", []Observation{{X: x}}},
		{"observation_batch.json", []Observation{{ID: "a", TS: 1715000000.5, X: x}, {X: []float64{1, 2, 3}}}},
		{"observation_batch.msgpack", []Observation{{ID: "a", TS: 1715000000.5, X: x}, {X: []float64{1, 2, 3}}}},
	}
	for _, tt := range tests {
		got, _, err := DecodeObservations(nil, readTestdata(t, tt.file), "", Limits{})
		if err != nil {
			t.Errorf("%s: %v", tt.file, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.file, got, tt.want)
		}
	}
}

func benchDecode(b *testing.B, data []byte) {
	obs, _, err := DecodeObservations(nil, data, "", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		obs, _, err = DecodeObservations(obs, data, "", Limits{})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func benchVector(d int) []float64 {
	x := make([]float64, d)
	for i := range x {
		x[i] = math.Sin(float64(i)) * 3.7
	}
	return x
}

func BenchmarkDecodeObservations(b *testing.B) {
	x := benchVector(16)
	obj := map[string]any{"x": x, "id": "sensor-7/000123", "ts": 1715000000.25}
	js, err := jsonMarshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("msgpack/d=16", func(b *testing.B) { benchDecode(b, mp(b, obj)) })
	b.Run("json/d=16", func(b *testing.B) { benchDecode(b, js) })
	noID := map[string]any{"x": x, "ts": 1715000000.25}
	jsNoID, _ := jsonMarshal(noID)
	b.Run("msgpack/d=16/no-id", func(b *testing.B) { benchDecode(b, mp(b, noID)) })
	b.Run("json/d=16/no-id", func(b *testing.B) { benchDecode(b, jsNoID) })
	// A label and a small meta map: the label is free for a number; each
	// meta entry allocates its key (and a string value).
	lab := map[string]any{"x": x, "ts": 1715000000.25, "y": 3}
	jsLab, _ := jsonMarshal(lab)
	b.Run("msgpack/d=16/y", func(b *testing.B) { benchDecode(b, mp(b, lab)) })
	b.Run("json/d=16/y", func(b *testing.B) { benchDecode(b, jsLab) })
	batch := map[string]any{"batch": [][]float64{x, x, x, x, x, x, x, x}}
	jsBatch, _ := jsonMarshal(batch)
	b.Run("msgpack/d=16/batch=8", func(b *testing.B) { benchDecode(b, mp(b, batch)) })
	b.Run("json/d=16/batch=8", func(b *testing.B) { benchDecode(b, jsBatch) })
}

// EncodeObservations refuses ids that DecodeObservations would reject.
func TestEncodeObservationsInvalidID(t *testing.T) {
	for _, enc := range []Encoding{JSON, Msgpack} {
		obs := []Observation{{X: []float64{1}}, {ID: "ok\xed", X: []float64{2}}}
		b, err := EncodeObservations([]byte("p"), enc, obs)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "observation 1: field id: invalid UTF-8 at byte 2") {
			t.Errorf("%v: error %v, want ErrMalformed naming observation 1", enc, err)
		}
		if string(b) != "p" {
			t.Errorf("%v: dst changed to %q", enc, b)
		}
	}
}
