package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// ScalarKind says what a Scalar holds.
type ScalarKind uint8

// Scalar kinds. The zero value, ScalarNone, means "absent".
const (
	ScalarNone ScalarKind = iota
	ScalarNull
	ScalarBool
	ScalarNumber
	ScalarString
)

// Scalar is a label or a metadata value: null, a bool, a number or a
// string. The zero value is "absent". A bool is held in Num as 0 or 1.
type Scalar struct {
	Kind ScalarKind
	Num  float64
	Str  string
}

// Number returns a number Scalar.
func Number(f float64) Scalar { return Scalar{Kind: ScalarNumber, Num: f} }

// String returns a string Scalar.
func String(s string) Scalar { return Scalar{Kind: ScalarString, Str: s} }

// Bool returns a bool Scalar.
func Bool(b bool) Scalar {
	if b {
		return Scalar{Kind: ScalarBool, Num: 1}
	}
	return Scalar{Kind: ScalarBool}
}

// IsZero tells whether s is absent (for omitzero and msgpack omitempty).
func (s Scalar) IsZero() bool { return s.Kind == ScalarNone }

// IsLabel tells whether s can be a class label: a number or a string.
func (s Scalar) IsLabel() bool { return s.Kind == ScalarNumber || s.Kind == ScalarString }

// Equal compares two scalars: same kind and, for numbers, the same value
// bitwise (so NaN equals NaN and −0 differs from 0).
func (s Scalar) Equal(t Scalar) bool {
	if s.Kind != t.Kind {
		return false
	}
	switch s.Kind {
	case ScalarNumber, ScalarBool:
		return math.Float64bits(s.Num) == math.Float64bits(t.Num)
	case ScalarString:
		return s.Str == t.Str
	}
	return true
}

// Text renders s for logs, CSV files and error messages: a number in the
// shortest form that reads back exactly, a string as it is, "true",
// "false", "null", or "" when absent.
func (s Scalar) Text() string {
	switch s.Kind {
	case ScalarNumber:
		return strconv.FormatFloat(s.Num, 'g', -1, 64)
	case ScalarString:
		return s.Str
	case ScalarBool:
		if s.Num != 0 {
			return "true"
		}
		return "false"
	case ScalarNull:
		return "null"
	}
	return ""
}

// MetaEntry is one key of an observation's meta map.
type MetaEntry struct {
	Key   string
	Value Scalar
}

// Meta is an observation's free metadata: a small map of string keys to
// scalars, kept in the order it arrived. Keys are unique.
type Meta []MetaEntry

// Get returns the value of key and whether it is present.
func (m Meta) Get(key string) (Scalar, bool) {
	for _, e := range m {
		if e.Key == key {
			return e.Value, true
		}
	}
	return Scalar{}, false
}

// Default limits of the pass-through fields.
const (
	DefaultMaxMeta      = 16
	DefaultMaxMetaBytes = 1024
	DefaultMaxLabel     = 256
)

// sameMeta compares bitwise (see Scalar.Equal).
func sameMeta(a, b Meta) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}

// checkLabel checks a decoded label: a string within MaxLabel bytes of
// valid UTF-8 (lone: from an unpaired surrogate escape), or a finite number.
func (d *obsDecoder) label(s Scalar, raw []byte, lone bool) (Scalar, error) {
	switch s.Kind {
	case ScalarNull:
		return Scalar{}, nil // null is absent, as for id and ts
	case ScalarNumber:
		if math.IsNaN(s.Num) || math.IsInf(s.Num, 0) {
			return Scalar{}, d.fail(ErrMalformed, "field y: label is %v, want a finite number or a string", s.Num)
		}
		return s, nil
	case ScalarString:
		if len(raw) > d.lim.MaxLabel {
			return Scalar{}, d.fail(ErrTooLarge, "field y: label of %d bytes, limit %d", len(raw), d.lim.MaxLabel)
		}
		if err := d.checkText("y", raw, lone); err != nil {
			return Scalar{}, err
		}
		return String(string(raw)), nil
	}
	return Scalar{}, d.fail(ErrMalformed, "field y: label is a bool, want a number or a string")
}

// metaBytes counts the bytes a meta entry takes against MaxMetaBytes: the
// key plus a string value, or 8 for another value.
func metaBytes(key []byte, v Scalar) int {
	if v.Kind == ScalarString {
		return len(key) + len(v.Str)
	}
	return len(key) + 8
}

// addMeta appends one entry to *m after checking the limits, the key and
// duplicates; used is the byte count so far. A string value v (Kind
// ScalarString) comes as raw bytes, lone as the lexer's scalar reports it.
func (d *obsDecoder) addMeta(m *Meta, key []byte, keyLone bool, v Scalar, raw []byte, lone bool, used *int) error {
	if v.Kind == ScalarString {
		if err := d.checkText("meta value", raw, lone); err != nil {
			return err
		}
		v.Str = string(raw)
	}
	if len(*m) >= d.lim.MaxMeta {
		return d.fail(ErrTooLarge, "field meta: more than %d entries", d.lim.MaxMeta)
	}
	if err := d.checkText("meta key", key, keyLone); err != nil {
		return err
	}
	if v.Kind == ScalarNumber && (math.IsNaN(v.Num) || math.IsInf(v.Num, 0)) {
		// As for labels: every output must stay representable in JSON.
		return d.fail(ErrMalformed, "field meta: key %q: %v, want a finite number", key, v.Num)
	}
	*used += metaBytes(key, v)
	if *used > d.lim.MaxMetaBytes {
		return d.fail(ErrTooLarge, "field meta: more than %d bytes", d.lim.MaxMetaBytes)
	}
	for _, e := range *m {
		if e.Key == string(key) {
			return d.fail(ErrMalformed, "field meta: duplicate key %q", key)
		}
	}
	*m = append(*m, MetaEntry{Key: string(key), Value: v})
	return nil
}

// checkPassThrough checks y and meta before encoding them (see
// EncodeObservations): what DecodeObservations would refuse is refused.
func checkPassThrough(i int, y Scalar, meta Meta, json bool) error {
	at := fmt.Sprintf("observation %d: ", i)
	switch y.Kind {
	case ScalarNone:
	case ScalarNumber:
		if json && (math.IsNaN(y.Num) || math.IsInf(y.Num, 0)) {
			return fmt.Errorf("%w: %sfield y: label %v, which JSON cannot carry", ErrNonFinite, at, y.Num)
		}
		if math.IsNaN(y.Num) || math.IsInf(y.Num, 0) {
			return fmt.Errorf("%w: %sfield y: label %v is not finite", ErrMalformed, at, y.Num)
		}
	case ScalarString:
		if !utf8.ValidString(y.Str) {
			return fmt.Errorf("%w: %sfield y: invalid UTF-8 at byte %d", ErrMalformed, at, invalidAt(y.Str))
		}
	default:
		return fmt.Errorf("%w: %sfield y: a label is a number or a string", ErrMalformed, at)
	}
	seen := map[string]bool{}
	for _, e := range meta {
		if !utf8.ValidString(e.Key) || (e.Value.Kind == ScalarString && !utf8.ValidString(e.Value.Str)) {
			return fmt.Errorf("%w: %sfield meta: key %q: invalid UTF-8", ErrMalformed, at, e.Key)
		}
		if seen[e.Key] {
			return fmt.Errorf("%w: %sfield meta: duplicate key %q", ErrMalformed, at, e.Key)
		}
		seen[e.Key] = true
		switch e.Value.Kind {
		case ScalarNull, ScalarBool, ScalarString:
		case ScalarNumber:
			if json && (math.IsNaN(e.Value.Num) || math.IsInf(e.Value.Num, 0)) {
				return fmt.Errorf("%w: %sfield meta: key %q: %v, which JSON cannot carry", ErrNonFinite, at, e.Key, e.Value.Num)
			}
		default:
			return fmt.Errorf("%w: %sfield meta: key %q: no value", ErrMalformed, at, e.Key)
		}
	}
	return nil
}

// appendScalar appends s in enc. A number that is an integer of magnitude
// below 2⁵³ is written as a msgpack integer (as producers usually send
// class labels), others as float64; JSON writes the shortest exact form.
func appendScalar(b []byte, enc Encoding, s Scalar) []byte {
	if enc == Msgpack {
		switch s.Kind {
		case ScalarNumber:
			if v := s.Num; v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v)) {
				return mpInt(b, int64(v))
			}
			return mpFloat(b, s.Num)
		case ScalarString:
			return mpStr(b, s.Str)
		case ScalarBool:
			if s.Num != 0 {
				return append(b, 0xc3)
			}
			return append(b, 0xc2)
		}
		return append(b, 0xc0)
	}
	switch s.Kind {
	case ScalarNumber:
		return jsonFloat(b, s.Num)
	case ScalarString:
		return jsonStr(b, s.Str)
	case ScalarBool:
		if s.Num != 0 {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	}
	return append(b, "null"...)
}

// appendMeta appends meta as a map in enc.
func appendMeta(b []byte, enc Encoding, meta Meta) []byte {
	if enc == Msgpack {
		b = mpMapLen(b, len(meta))
		for _, e := range meta {
			b = mpStr(b, e.Key)
			b = appendScalar(b, enc, e.Value)
		}
		return b
	}
	b = append(b, '{')
	for i, e := range meta {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonStr(b, e.Key)
		b = append(b, ':')
		b = appendScalar(b, enc, e.Value)
	}
	return append(b, '}')
}

func mpMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	}
	return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func mpInt(b []byte, v int64) []byte {
	if v >= 0 {
		return mpUint(b, uint64(v))
	}
	switch {
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(b, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	u := uint64(v)
	return append(b, 0xd3, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// The decoders of DecodeOutput (encoding/json and the msgpack library),
// and the encoders that let those libraries write Output as EncodeOutput does.

// MarshalJSON writes s as EncodeOutput does.
func (s Scalar) MarshalJSON() ([]byte, error) { return appendScalar(nil, JSON, s), nil }

// MarshalJSON writes m as an object in its order.
func (m Meta) MarshalJSON() ([]byte, error) { return appendMeta(nil, JSON, m), nil }

// EncodeMsgpack writes s as EncodeOutput does.
func (s Scalar) EncodeMsgpack(enc *msgpack.Encoder) error {
	_, err := enc.Writer().Write(appendScalar(nil, Msgpack, s))
	return err
}

// EncodeMsgpack writes m as a map in its order.
func (m Meta) EncodeMsgpack(enc *msgpack.Encoder) error {
	_, err := enc.Writer().Write(appendMeta(nil, Msgpack, m))
	return err
}

// UnmarshalJSON reads null, a bool, a number or a string.
func (s *Scalar) UnmarshalJSON(b []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return s.set(v)
}

func (s *Scalar) set(v any) error {
	switch v := v.(type) {
	case nil:
		*s = Scalar{Kind: ScalarNull}
	case bool:
		*s = Bool(v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return err
		}
		*s = Number(f)
	case float64:
		*s = Number(v)
	case float32:
		*s = Number(float64(v))
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		f, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
		*s = Number(f)
	case string:
		*s = String(v)
	default:
		return fmt.Errorf("scalar: got %T, want null, a bool, a number or a string", v)
	}
	return nil
}

// DecodeMsgpack reads nil, a bool, a number or a string.
func (s *Scalar) DecodeMsgpack(dec *msgpack.Decoder) error {
	v, err := dec.DecodeInterfaceLoose()
	if err != nil {
		return err
	}
	return s.set(v)
}

// UnmarshalJSON reads an object of scalars, keeping the key order.
func (m *Meta) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		*m = nil
		return nil
	}
	if t != json.Delim('{') {
		return fmt.Errorf("meta: want an object")
	}
	*m = (*m)[:0]
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		var s Scalar
		if err := s.set(v); err != nil {
			return fmt.Errorf("meta: key %q: %w", kt, err)
		}
		*m = append(*m, MetaEntry{Key: kt.(string), Value: s})
	}
	_, err = dec.Token()
	return err
}

// DecodeMsgpack reads a map of scalars, keeping the key order.
func (m *Meta) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	*m = (*m)[:0]
	for range max(n, 0) {
		k, err := dec.DecodeString()
		if err != nil {
			return err
		}
		v, err := dec.DecodeInterfaceLoose()
		if err != nil {
			return err
		}
		var s Scalar
		if err := s.set(v); err != nil {
			return fmt.Errorf("meta: key %q: %w", k, err)
		}
		*m = append(*m, MetaEntry{Key: k, Value: s})
	}
	return nil
}
