package codec

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Labels and meta decode from both encodings, single and batch, and come
// back unchanged through EncodeObservations and through an output.
func TestPassThroughRoundTrip(t *testing.T) {
	meta := Meta{{"site", String("b7")}, {"n", Number(-2.5)}, {"ok", Bool(true)}, {"gone", Scalar{Kind: ScalarNull}}}
	want := []Observation{
		{ID: "a", X: []float64{1, 2}, Y: Number(3), Meta: meta},
		{X: []float64{3, 4}, Y: String("cat é")},
		{X: []float64{5, 6}, Y: Number(-0.5), Meta: Meta{{"k", Number(1e300)}}},
	}
	for _, enc := range []Encoding{JSON, Msgpack} {
		for _, obs := range [][]Observation{want[:1], want[1:2], want} {
			b, err := EncodeObservations(nil, enc, obs)
			if err != nil {
				t.Fatalf("%v: encode: %v", enc, err)
			}
			got, _, err := DecodeObservations(nil, b, "", Limits{})
			if err != nil {
				t.Fatalf("%v: decode %q: %v", enc, b, err)
			}
			if !sameObservations(got, obs) {
				t.Fatalf("%v: got %+v, want %+v", enc, got, obs)
			}
			for i := range got {
				out := &Output{ID: got[i].ID, Z: []float64{1}, Y: got[i].Y, Meta: got[i].Meta, Pred: String("dog"), Scores: []float64{0.25, 0.75}}
				for _, oenc := range []Encoding{JSON, Msgpack} {
					ob, err := EncodeOutput(nil, oenc, out)
					if err != nil {
						t.Fatal(err)
					}
					back, err := DecodeOutput(ob, oenc)
					if err != nil {
						t.Fatalf("%v output %q: %v", oenc, ob, err)
					}
					if !sameOutput(back, out) {
						t.Fatalf("%v output: got %+v, want %+v", oenc, back, out)
					}
				}
			}
		}
	}
	// The wire text of a labelled JSON observation.
	b, _ := EncodeObservations(nil, JSON, want[:1])
	if s := `{"x":[1,2],"id":"a","y":3,"meta":{"site":"b7","n":-2.5,"ok":true,"gone":null}}`; string(b) != s {
		t.Errorf("got %s, want %s", b, s)
	}
	// An output without y, meta or a classifier keeps its nine fields.
	ob, _ := EncodeOutput(nil, JSON, &Output{Z: []float64{1}})
	if strings.Contains(string(ob), `"y"`) || strings.Contains(string(ob), "scores") {
		t.Errorf("output without pass-through fields: %s", ob)
	}
}

func TestPassThroughErrors(t *testing.T) {
	lim := Limits{MaxMeta: 2, MaxMetaBytes: 20, MaxLabel: 4}
	tests := []struct {
		name    string
		in      []byte
		wantErr error
		msg     string
	}{
		{"json label array", []byte(`{"x":[1],"y":[1]}`), ErrMalformed, "field y: is an array, want a number or a string"},
		{"json label object", []byte(`{"x":[1],"y":{}}`), ErrMalformed, "field y: is an object"},
		{"json label bool", []byte(`{"x":[1],"y":true}`), ErrMalformed, "field y: label is a bool, want a number or a string"},
		{"json label invalid utf-8", []byte("{\"x\":[1],\"y\":\"a\xff\"}"), ErrMalformed, "field y: invalid UTF-8 at byte 1"},
		{"json label lone surrogate", []byte(`{"x":[1],"y":"\ud800"}`), ErrMalformed, "field y: \\u escape of an unpaired UTF-16 surrogate"},
		{"json label too long", []byte(`{"x":[1],"y":"abcde"}`), ErrTooLarge, "field y: label of 5 bytes, limit 4"},
		{"json duplicate y", []byte(`{"x":[1],"y":1,"y":2}`), ErrMalformed, "field y: duplicate"},
		{"json batch element label", []byte(`{"batch":[{"x":[1],"y":1},{"x":[1],"y":[2]}]}`), ErrMalformed, "batch element 1: field y: is an array"},
		{"json meta not object", []byte(`{"x":[1],"meta":[1]}`), ErrMalformed, "field meta: is an array, want an object"},
		{"json meta nested", []byte(`{"x":[1],"meta":{"a":{"b":1}}}`), ErrMalformed, "field meta: is an object, want null, a bool, a number or a string"},
		{"json meta duplicate", []byte(`{"x":[1],"meta":{"a":1,"a":2}}`), ErrMalformed, `field meta: duplicate key "a"`},
		{"json meta entries", []byte(`{"x":[1],"meta":{"a":1,"b":2,"c":3}}`), ErrTooLarge, "field meta: more than 2 entries"},
		{"json meta bytes", []byte(`{"x":[1],"meta":{"a":"0123456789abcdefghij"}}`), ErrTooLarge, "field meta: more than 20 bytes"},
		{"json meta invalid utf-8", []byte("{\"x\":[1],\"meta\":{\"a\":\"\xff\"}}"), ErrMalformed, "field meta value: invalid UTF-8"},
		{"json batch with y", []byte(`{"batch":[[1]],"y":1}`), ErrMalformed, "next to batch"},
		{"msgpack label binary", mp(t, map[string]any{"x": []float64{1}, "y": []byte{1}}), ErrMalformed, "field y: is binary, want a number or a string"},
		{"msgpack label array", mp(t, map[string]any{"x": []float64{1}, "y": []int{1}}), ErrMalformed, "field y: is an array"},
		{"msgpack label nan", mp(t, map[string]any{"x": []float64{1}, "y": nan()}), ErrMalformed, "field y: label is NaN"},
		{"msgpack label invalid utf-8", mp(t, map[string]any{"x": []float64{1}, "y": "\xed"}), ErrMalformed, "field y: invalid UTF-8 at byte 0"},
		{"msgpack meta map", mp(t, map[string]any{"x": []float64{1}, "meta": []int{1}}), ErrMalformed, "field meta: is an array, want a map"},
		{"msgpack meta entries", mp(t, map[string]any{"x": []float64{1}, "meta": map[string]int{"a": 1, "b": 2, "c": 3}}), ErrTooLarge, "field meta: 3 entries, limit 2"},
		{"msgpack meta nested", mp(t, map[string]any{"x": []float64{1}, "meta": map[string]any{"a": []int{1}}}), ErrMalformed, "field meta: is an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs, _, err := DecodeObservations(nil, tt.in, "", lim)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("input %q: got error %v, want %v mentioning %q", tt.in, err, tt.wantErr, tt.msg)
			}
			if len(obs) != 0 {
				t.Fatalf("observations returned with an error: %+v", obs)
			}
		})
	}
	// The encoder refuses what the decoder would.
	for _, enc := range []Encoding{JSON, Msgpack} {
		for _, o := range []Observation{
			{X: []float64{1}, Y: String("\xff")},
			{X: []float64{1}, Y: Bool(true)},
			{X: []float64{1}, Y: Number(nan())},
			{X: []float64{1}, Meta: Meta{{"a", Number(1)}, {"a", Number(2)}}},
		} {
			if _, err := EncodeObservations(nil, enc, []Observation{o}); err == nil || !strings.HasPrefix(err.Error(), "codec: ") {
				t.Errorf("%v: encode %+v: error %v, want a codec error", enc, o, err)
			}
		}
	}
}

func nan() float64 { return math.NaN() }
