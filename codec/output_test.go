package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func testOutput() *Output {
	return &Output{
		ID: "obs-\"7\"\n\xff", Key: "vib.sensor-7", Seq: 1 << 40, TS: 1715000000.25,
		Z: []float64{0.125, -3.5e-9, 2.5e21, 0}, SPE: 0.0031, T2: 4.75, Explained: 0.9375, BasisVersion: 300,
	}
}

func TestOutputRoundTrip(t *testing.T) {
	for _, enc := range []Encoding{JSON, Msgpack} {
		t.Run(enc.String(), func(t *testing.T) {
			want := testOutput()
			data, err := EncodeOutput([]byte("prefix"), enc, want)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "prefix") {
				t.Fatalf("EncodeOutput did not append to dst")
			}
			got, err := DecodeOutput(data[len("prefix"):], enc)
			if err != nil {
				t.Fatal(err)
			}
			if enc == JSON {
				want.ID = "obs-\"7\"\n\ufffd" // invalid UTF-8 is replaced
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// The hand-written encoders agree with the reference libraries.
func TestOutputMatchesLibraries(t *testing.T) {
	out := testOutput()
	out.ID = "plain-id"
	js, err := EncodeOutput(nil, JSON, out)
	if err != nil {
		t.Fatal(err)
	}
	var viaJSON, viaLib map[string]any
	if err := json.Unmarshal(js, &viaJSON); err != nil {
		t.Fatalf("our JSON is not valid JSON: %v\n%s", err, js)
	}
	lib, _ := json.Marshal(out)
	_ = json.Unmarshal(lib, &viaLib)
	if !reflect.DeepEqual(viaJSON, viaLib) {
		t.Errorf("JSON differs from encoding/json:\n got %s\nwant %s", js, lib)
	}
	mp, _ := EncodeOutput(nil, Msgpack, out)
	var m map[string]any
	if err := msgpack.Unmarshal(mp, &m); err != nil {
		t.Fatalf("our msgpack does not decode: %v", err)
	}
	if len(m) != 9 || m["key"] != out.Key || fmt.Sprint(m["basis_version"]) != "300" {
		t.Errorf("msgpack decodes to %v", m)
	}
}

func TestOutputGolden(t *testing.T) {
	for _, enc := range []Encoding{JSON, Msgpack} {
		data, err := EncodeOutput(nil, enc, testOutput())
		if err != nil {
			t.Fatal(err)
		}
		name := "output_v1." + enc.String()
		golden(t, name, data)
		got, err := DecodeOutput(readTestdata(t, name), enc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Key != "vib.sensor-7" || got.Seq != 1<<40 || len(got.Z) != 4 {
			t.Errorf("%s decodes to %+v", name, got)
		}
	}
}

func TestOutputSmallValues(t *testing.T) {
	// Field widths at the boundaries of the msgpack integer and string forms.
	for _, n := range []uint64{0, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxUint64} {
		for _, l := range []int{0, 31, 32, 255, 256, 70000} {
			want := &Output{Key: strings.Repeat("k", l), Seq: n, BasisVersion: n, Z: make([]float64, l%20)}
			data, _ := EncodeOutput(nil, Msgpack, want)
			got, err := DecodeOutput(data, Msgpack)
			if err != nil {
				t.Fatalf("seq %d key length %d: %v", n, l, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seq %d key length %d: got %+v", n, l, got)
			}
		}
	}
}

func TestEncodeOutputErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(o *Output)
		msg  string
	}{
		{"nan spe", func(o *Output) { o.SPE = math.NaN() }, "field spe is NaN"},
		{"inf z", func(o *Output) { o.Z[2] = math.Inf(-1) }, "field z[2] is -Inf"},
		{"inf ts", func(o *Output) { o.TS = math.Inf(1) }, "field ts is +Inf"},
	} {
		o := testOutput()
		tt.mod(o)
		dst := []byte("keep")
		got, err := EncodeOutput(dst, JSON, o)
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: error %v, want ErrNonFinite mentioning %q", tt.name, err, tt.msg)
		}
		if string(got) != "keep" {
			t.Errorf("%s: dst changed to %q", tt.name, got)
		}
		// msgpack carries non-finite values.
		if _, err := EncodeOutput(nil, Msgpack, o); err != nil {
			t.Errorf("%s: msgpack: %v", tt.name, err)
		}
	}
	if _, err := EncodeOutput(nil, Encoding(9), testOutput()); err == nil {
		t.Errorf("unknown encoding accepted")
	}
	for _, bad := range []string{"", "{", `{"seq":"x"}`, `{} {}`} {
		if _, err := DecodeOutput([]byte(bad), JSON); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeOutput(%q) error %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := DecodeOutput([]byte{0x89, 0xa2}, Msgpack); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated msgpack output: error %v, want ErrMalformed", err)
	}
}

func TestEncodeOutputAllocs(t *testing.T) {
	out := testOutput()
	buf := make([]byte, 0, 1024)
	for _, enc := range []Encoding{JSON, Msgpack} {
		allocs := testing.AllocsPerRun(100, func() {
			buf, _ = EncodeOutput(buf[:0], enc, out)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per encode into a reused buffer, want 0", enc, allocs)
		}
	}
}

func BenchmarkEncodeOutput(b *testing.B) {
	for _, k := range []int{2, 8} {
		out := &Output{ID: "sensor-7/000123", Key: "vib.sensor-7", Seq: 123456, TS: 1715000000.25,
			Z: benchVector(k), SPE: 0.0123, T2: 3.21, Explained: 0.93, BasisVersion: 12}
		for _, enc := range []Encoding{Msgpack, JSON} {
			b.Run(enc.String()+"/k="+string(rune('0'+k)), func(b *testing.B) {
				buf := make([]byte, 0, 512)
				b.ReportAllocs()
				for b.Loop() {
					var err error
					buf, err = EncodeOutput(buf[:0], enc, out)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(len(buf)))
			})
		}
	}
}

// TestOutputStamp reads id and ts back from outputs written by
// EncodeOutput, in both encodings, and refuses damaged msgpack.
func TestOutputStamp(t *testing.T) {
	long := strings.Repeat("x", 300) // str16 in msgpack
	z := make([]float64, 20)         // array16
	for i := range z {
		z[i] = float64(i) - 3.5
	}
	for _, out := range []Output{
		{ID: "m", Key: "k0", Seq: 1, TS: 1.7e9 + 0.123456, Z: []float64{1, 2}, SPE: 0.5, T2: 2, Explained: 0.9, BasisVersion: 3},
		{ID: "w!", Key: strings.Repeat("k", 40), Seq: 1 << 40, TS: 12.5, Z: z, BasisVersion: 70000},
		{ID: long, Key: "", Seq: 300, TS: -1, Z: nil, SPE: -2},
		{ID: "", Key: "a", Seq: 1<<64 - 1, TS: 0, Z: []float64{}},
	} {
		for _, enc := range []Encoding{Msgpack, JSON} {
			data, err := EncodeOutput(nil, enc, &out)
			if err != nil {
				t.Fatal(err)
			}
			id, ts, err := OutputStamp(data, enc)
			if err != nil {
				t.Fatalf("%v %q: %v", enc, out.ID, err)
			}
			if string(id) != out.ID || ts != out.TS {
				t.Errorf("%v: got id %q ts %v, want %q %v", enc, id, ts, out.ID, out.TS)
			}
			if enc != Msgpack {
				continue
			}
			for n := range len(data) {
				if _, _, err := OutputStamp(data[:n], enc); err == nil {
					t.Fatalf("%q: %d of %d bytes accepted", out.ID, n, len(data))
				}
			}
			if _, _, err := OutputStamp(append(data, 0), enc); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "trailing") {
				t.Errorf("trailing byte: err %v", err)
			}
		}
	}
	for _, bad := range [][]byte{{0x91, 0x01}, {0x80}, {0x81, 0xa2, 'i', 'd', 0x01}, {0x81, 0xa1, 'x', 0xc1}} {
		if _, _, err := OutputStamp(bad, Msgpack); err == nil {
			t.Errorf("% x accepted", bad)
		}
	}
	if !testing.Short() {
		data, _ := EncodeOutput(nil, Msgpack, &Output{ID: "m", TS: 1, Z: z})
		if allocs := testing.AllocsPerRun(100, func() {
			if _, _, err := OutputStamp(data, Msgpack); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("OutputStamp allocates: %v allocs per run", allocs)
		}
	}
}

// DecodeOutput takes exactly one JSON object: FuzzDecodeOutput found that
// json.Decoder.More missed a trailing '}' and that null decoded as an
// empty output.
func TestDecodeOutputJSONStrict(t *testing.T) {
	good, err := EncodeOutput(nil, JSON, &Output{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"null}", " null", string(good) + "}", string(good) + "]", string(good) + " {}", "[]"} {
		if out, err := DecodeOutput([]byte(in), JSON); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeOutput(%q) = %+v, %v; want ErrMalformed", in, out, err)
		}
	}
	if _, err := DecodeOutput(append(good, " \n"...), JSON); err != nil {
		t.Errorf("trailing whitespace: %v", err)
	}
}
