package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// Output is one published projection. Outputs are only produced by a ready
// learner, so every field is meaningful.
//
// Wire field names, the same in JSON and msgpack, in this order: "id",
// "key", "seq", "ts", "z", "spe", "t2", "explained", "basis_version", then
// only when present: "y" and "meta" (passed through from the observation),
// "pred" and "scores" (from a classifier stage), "spe_limit" and "t2_limit"
// (a pipeline with monitoring, once its limits are in force: both or
// neither, absent when both are 0), "alarm" (only on an alarm),
// "lspe" and "lspe_limit" (monitor.linear, once its limit is in force:
// both or neither), "lewma" and "lewma_limit" (monitor.linear, once its
// per-variable EWMA judges: both or neither), "contrib" (only on an alarm: the variables with the
// largest contributions, largest first, each {"var": index, "value":
// contribution}) and "warmup" (true, only while a monitored key's limits
// are not yet in force).
type Output struct {
	// ID is the observation's ID, or "".
	ID string `msgpack:"id" json:"id"`
	// Key is the learner's partition key.
	Key string `msgpack:"key" json:"key"`
	// Seq is the input stream sequence of the observation.
	Seq uint64 `msgpack:"seq" json:"seq"`
	// TS is the observation's timestamp in seconds since the Unix epoch.
	TS float64 `msgpack:"ts" json:"ts"`
	// Z is the projection onto the k components, length k.
	Z []float64 `msgpack:"z" json:"z"`
	// SPE is the squared feature-space reconstruction error (Q statistic).
	SPE float64 `msgpack:"spe" json:"spe"`
	// T2 is Hotelling's T².
	T2 float64 `msgpack:"t2" json:"t2"`
	// Explained is the explained variance ratio in [0, 1].
	Explained float64 `msgpack:"explained" json:"explained"`
	// BasisVersion counts real changes of the published basis.
	BasisVersion uint64 `msgpack:"basis_version" json:"basis_version"`
	// Y is the observation's label, passed through (omitted when absent).
	Y Scalar `msgpack:"y,omitempty" json:"y,omitzero"`
	// Meta is the observation's meta map, passed through (omitted when empty).
	Meta Meta `msgpack:"meta,omitempty" json:"meta,omitempty"`
	// Pred is the classifier's predicted class, made before it learned this
	// observation's label (omitted without a classifier stage).
	Pred Scalar `msgpack:"pred,omitempty" json:"pred,omitzero"`
	// Scores holds the classifier's class scores (see the classifier stage), in the order of the
	// configured classes (omitted without a classifier stage).
	Scores []float64 `msgpack:"scores,omitempty" json:"scores,omitempty"`
	// SPELimit and T2Limit are the control limits the observation was
	// judged by (omitted, both, without monitoring or before its limits
	// are in force).
	SPELimit float64 `msgpack:"spe_limit,omitempty" json:"spe_limit,omitempty"`
	T2Limit  float64 `msgpack:"t2_limit,omitempty" json:"t2_limit,omitempty"`
	// Alarm is "spe", "t2" or "both" when a statistic is above its limit
	// (omitted when none is).
	Alarm string `msgpack:"alarm,omitempty" json:"alarm,omitempty"`
	// LSPE and LSPELimit are the linear residual and its limit
	// (monitor.linear; omitted, both, without it or before its limit is
	// in force). An LSPE above its limit is an "spe" alarm.
	LSPE      float64 `msgpack:"lspe,omitempty" json:"lspe,omitempty"`
	LSPELimit float64 `msgpack:"lspe_limit,omitempty" json:"lspe_limit,omitempty"`
	// LEWMA and LEWMALimit are the largest per-variable EWMA of the linear
	// residual, in units of that variable's normal spread squared, and its
	// limit (monitor.linear; omitted, both, without it or before the EWMA
	// judges). An LEWMA above its limit is an "spe" alarm: a drift in one
	// variable that neither spe nor lspe shows yet.
	LEWMA      float64 `msgpack:"lewma,omitempty" json:"lewma,omitempty"`
	LEWMALimit float64 `msgpack:"lewma_limit,omitempty" json:"lewma_limit,omitempty"`
	// Contrib names the variables behind an alarm, largest contribution
	// first (omitted without an alarm).
	Contrib []Contribution `msgpack:"contrib,omitempty" json:"contrib,omitempty"`
	// Warmup is true while a monitored key's limits are not yet in force
	// (its warm-up: rows learned unconditionally as normal); omitted
	// otherwise.
	Warmup bool `msgpack:"warmup,omitempty" json:"warmup,omitempty"`
}

// Contribution is a variable's contribution to an alarm (see
// learners/monitor: reconstruction-based, in units of the limits).
type Contribution struct {
	// Var is the variable's index in the observation's x (0-based).
	Var int `msgpack:"var" json:"var"`
	// Value is the contribution.
	Value float64 `msgpack:"value" json:"value"`
}

// hasLimits tells whether the limit fields are written.
func (o *Output) hasLimits() bool { return o.SPELimit != 0 || o.T2Limit != 0 }

// hasLinear tells whether the linear residual's fields are written.
func (o *Output) hasLinear() bool { return o.LSPE != 0 || o.LSPELimit != 0 }

// hasEWMA tells whether the linear residual's EWMA fields are written.
func (o *Output) hasEWMA() bool { return o.LEWMA != 0 || o.LEWMALimit != 0 }

// extra counts the optional fields of o that are present.
func (o *Output) extra() int {
	n := 0
	if o.Y.Kind != ScalarNone {
		n++
	}
	if len(o.Meta) > 0 {
		n++
	}
	if o.Pred.Kind != ScalarNone {
		n++
	}
	if len(o.Scores) > 0 {
		n++
	}
	if o.hasLimits() {
		n += 2
	}
	if o.Alarm != "" {
		n++
	}
	if o.hasLinear() {
		n += 2
	}
	if o.hasEWMA() {
		n += 2
	}
	if len(o.Contrib) > 0 {
		n++
	}
	if o.Warmup {
		n++
	}
	return n
}

// EncodeOutput appends the encoding of out to dst and returns it; it does
// not allocate when dst has room. Both encodings write all nine fields in
// the documented order, then the optional ones that are present. msgpack writes a map with unsigned integers in
// their shortest form and floats as float64; JSON writes floats in the
// shortest form that reads back exactly, and strings with invalid UTF-8
// replaced by U+FFFD. JSON cannot carry NaN or ±Inf: such a value gives an
// error wrapping ErrNonFinite and dst unchanged. An unknown encoding is an
// error.
func EncodeOutput(dst []byte, enc Encoding, out *Output) ([]byte, error) {
	switch enc {
	case Msgpack:
		return appendOutputMsgpack(dst, out), nil
	case JSON:
		return appendOutputJSON(dst, out)
	}
	return dst, fmt.Errorf("codec: unknown encoding %d", int(enc))
}

func appendOutputMsgpack(b []byte, o *Output) []byte {
	if n := 9 + o.extra(); n <= 15 {
		b = append(b, 0x80|byte(n))
	} else {
		b = append(b, 0xde, 0, byte(n)) // map 16: at most 9 + 11 fields
	}
	b = mpStr(b, "id")
	b = mpStr(b, o.ID)
	b = mpStr(b, "key")
	b = mpStr(b, o.Key)
	b = mpStr(b, "seq")
	b = mpUint(b, o.Seq)
	b = mpStr(b, "ts")
	b = mpFloat(b, o.TS)
	b = mpStr(b, "z")
	b = mpArrayLen(b, len(o.Z))
	for _, v := range o.Z {
		b = mpFloat(b, v)
	}
	b = mpStr(b, "spe")
	b = mpFloat(b, o.SPE)
	b = mpStr(b, "t2")
	b = mpFloat(b, o.T2)
	b = mpStr(b, "explained")
	b = mpFloat(b, o.Explained)
	b = mpStr(b, "basis_version")
	b = mpUint(b, o.BasisVersion)
	if o.Y.Kind != ScalarNone {
		b = mpStr(b, "y")
		b = appendScalar(b, Msgpack, o.Y)
	}
	if len(o.Meta) > 0 {
		b = mpStr(b, "meta")
		b = appendMeta(b, Msgpack, o.Meta)
	}
	if o.Pred.Kind != ScalarNone {
		b = mpStr(b, "pred")
		b = appendScalar(b, Msgpack, o.Pred)
	}
	if len(o.Scores) > 0 {
		b = mpStr(b, "scores")
		b = mpArrayLen(b, len(o.Scores))
		for _, v := range o.Scores {
			b = mpFloat(b, v)
		}
	}
	if o.hasLimits() {
		b = mpStr(b, "spe_limit")
		b = mpFloat(b, o.SPELimit)
		b = mpStr(b, "t2_limit")
		b = mpFloat(b, o.T2Limit)
	}
	if o.Alarm != "" {
		b = mpStr(b, "alarm")
		b = mpStr(b, o.Alarm)
	}
	if o.hasLinear() {
		b = mpStr(b, "lspe")
		b = mpFloat(b, o.LSPE)
		b = mpStr(b, "lspe_limit")
		b = mpFloat(b, o.LSPELimit)
	}
	if o.hasEWMA() {
		b = mpStr(b, "lewma")
		b = mpFloat(b, o.LEWMA)
		b = mpStr(b, "lewma_limit")
		b = mpFloat(b, o.LEWMALimit)
	}
	if len(o.Contrib) > 0 {
		b = mpStr(b, "contrib")
		b = mpArrayLen(b, len(o.Contrib))
		for _, c := range o.Contrib {
			b = append(b, 0x82)
			b = mpStr(b, "var")
			b = mpInt(b, int64(c.Var))
			b = mpStr(b, "value")
			b = mpFloat(b, c.Value)
		}
	}
	if o.Warmup {
		b = mpStr(b, "warmup")
		b = append(b, 0xc3)
	}
	return b
}

func mpStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func mpUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func mpFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}

func mpArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendOutputJSON(dst []byte, o *Output) ([]byte, error) {
	if name, i, v, bad := nonFinite(o); bad {
		if i >= 0 {
			name = fmt.Sprintf("%s[%d]", name, i)
		}
		return dst, fmt.Errorf("%w: output field %s is %v, which JSON cannot carry", ErrNonFinite, name, v)
	}
	b := append(dst, `{"id":`...)
	b = jsonStr(b, o.ID)
	b = append(b, `,"key":`...)
	b = jsonStr(b, o.Key)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, o.Seq, 10)
	b = append(b, `,"ts":`...)
	b = jsonFloat(b, o.TS)
	b = append(b, `,"z":[`...)
	for i, v := range o.Z {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonFloat(b, v)
	}
	b = append(b, `],"spe":`...)
	b = jsonFloat(b, o.SPE)
	b = append(b, `,"t2":`...)
	b = jsonFloat(b, o.T2)
	b = append(b, `,"explained":`...)
	b = jsonFloat(b, o.Explained)
	b = append(b, `,"basis_version":`...)
	b = strconv.AppendUint(b, o.BasisVersion, 10)
	if o.Y.Kind != ScalarNone {
		b = append(b, `,"y":`...)
		b = appendScalar(b, JSON, o.Y)
	}
	if len(o.Meta) > 0 {
		b = append(b, `,"meta":`...)
		b = appendMeta(b, JSON, o.Meta)
	}
	if o.Pred.Kind != ScalarNone {
		b = append(b, `,"pred":`...)
		b = appendScalar(b, JSON, o.Pred)
	}
	if len(o.Scores) > 0 {
		b = append(b, `,"scores":[`...)
		for i, v := range o.Scores {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonFloat(b, v)
		}
		b = append(b, ']')
	}
	if o.hasLimits() {
		b = append(b, `,"spe_limit":`...)
		b = jsonFloat(b, o.SPELimit)
		b = append(b, `,"t2_limit":`...)
		b = jsonFloat(b, o.T2Limit)
	}
	if o.Alarm != "" {
		b = append(b, `,"alarm":`...)
		b = jsonStr(b, o.Alarm)
	}
	if o.hasLinear() {
		b = append(b, `,"lspe":`...)
		b = jsonFloat(b, o.LSPE)
		b = append(b, `,"lspe_limit":`...)
		b = jsonFloat(b, o.LSPELimit)
	}
	if o.hasEWMA() {
		b = append(b, `,"lewma":`...)
		b = jsonFloat(b, o.LEWMA)
		b = append(b, `,"lewma_limit":`...)
		b = jsonFloat(b, o.LEWMALimit)
	}
	if len(o.Contrib) > 0 {
		b = append(b, `,"contrib":[`...)
		for i, c := range o.Contrib {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"var":`...)
			b = strconv.AppendInt(b, int64(c.Var), 10)
			b = append(b, `,"value":`...)
			b = jsonFloat(b, c.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if o.Warmup {
		b = append(b, `,"warmup":true`...)
	}
	return append(b, '}'), nil
}

// nonFinite returns the first field of o holding NaN or ±Inf (with its
// index i for z, else −1), or bad false.
func nonFinite(o *Output) (name string, i int, v float64, bad bool) {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(o.TS):
		return "ts", -1, o.TS, true
	case !finite(o.SPE):
		return "spe", -1, o.SPE, true
	case !finite(o.T2):
		return "t2", -1, o.T2, true
	case !finite(o.Explained):
		return "explained", -1, o.Explained, true
	case !finite(o.SPELimit):
		return "spe_limit", -1, o.SPELimit, true
	case !finite(o.T2Limit):
		return "t2_limit", -1, o.T2Limit, true
	case !finite(o.LSPE):
		return "lspe", -1, o.LSPE, true
	case !finite(o.LSPELimit):
		return "lspe_limit", -1, o.LSPELimit, true
	case !finite(o.LEWMA):
		return "lewma", -1, o.LEWMA, true
	case !finite(o.LEWMALimit):
		return "lewma_limit", -1, o.LEWMALimit, true
	}
	for i, c := range o.Contrib {
		if !finite(c.Value) {
			return "contrib", i, c.Value, true
		}
	}
	for i, v := range o.Z {
		if !finite(v) {
			return "z", i, v, true
		}
	}
	for i, v := range o.Scores {
		if !finite(v) {
			return "scores", i, v, true
		}
	}
	for _, s := range [...]Scalar{o.Y, o.Pred} {
		if s.Kind == ScalarNumber && !finite(s.Num) {
			return "y or pred", -1, s.Num, true
		}
	}
	for _, e := range o.Meta {
		if e.Value.Kind == ScalarNumber && !finite(e.Value.Num) {
			return "meta." + e.Key, -1, e.Value.Num, true
		}
	}
	return "", -1, 0, false
}

// jsonFloat appends a finite f in the shortest form that reads back
// exactly: plain decimal for 1e-6 ≤ |f| < 1e21 (and 0), else exponent form.
func jsonFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'e', -1, 64)
}

// jsonStr appends s as a JSON string, escaping '"', '\\' and control
// characters and replacing invalid UTF-8 with U+FFFD.
func jsonStr(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexLower[c>>4], hexLower[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

const hexLower = "0123456789abcdef"

// DecodeOutput decodes an output written by EncodeOutput, for tests and
// consumers. Unknown fields are ignored; errors wrap ErrMalformed. JSON must
// be exactly one object, with nothing but whitespace after it.
func DecodeOutput(data []byte, enc Encoding) (*Output, error) {
	var out Output
	switch enc {
	case JSON:
		if err := unmarshalJSONObject(data, &out, false); err != nil {
			return nil, malformed("output: %v", err)
		}
	case Msgpack:
		// An output is a map (the library would also fill the struct from
		// an array, by position); its lengths are bounded and extensions
		// refused before the library allocates by them.
		if len(data) == 0 || !(data[0] >= 0x80 && data[0] <= 0x8f || data[0] == 0xde || data[0] == 0xdf) {
			c := "nothing"
			if len(data) > 0 {
				c = mpKind(data[0])
			}
			return nil, malformed("output is %s, want a map", c)
		}
		p := mpParser{d: obsDecoder{elem: -1}, b: data, noExt: true}
		if err := p.skip(0); err != nil {
			return nil, malformed("output: %s", strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": "))
		}
		r := bytes.NewReader(data)
		if err := msgpack.NewDecoder(r).Decode(&out); err != nil {
			return nil, malformed("output: %v", err)
		}
		if r.Len() != 0 {
			return nil, malformed("output: %d trailing bytes", r.Len())
		}
	default:
		return nil, fmt.Errorf("codec: unknown encoding %d", int(enc))
	}
	// A null label or prediction is absent, as on input (found by
	// FuzzDecodeOutput: {"y":null} decoded as a present null and the two
	// encodings disagreed).
	if out.Y.Kind == ScalarNull {
		out.Y = Scalar{}
	}
	if out.Pred.Kind == ScalarNull {
		out.Pred = Scalar{}
	}
	return &out, nil
}

// OutputStamp returns the "id" and "ts" fields of an output payload without
// decoding the rest, for a consumer that only routes or times outputs. A
// msgpack map is walked in place without allocating (id aliases data; the
// other fields are checked for well-formedness and skipped); JSON goes
// through DecodeOutput. A payload that is not an output map, lacks id or
// ts, or has trailing bytes gives ErrMalformed.
func OutputStamp(data []byte, enc Encoding) (id []byte, ts float64, err error) {
	if enc != Msgpack {
		out, err := DecodeOutput(data, enc)
		if err != nil {
			return nil, 0, err
		}
		return []byte(out.ID), out.TS, nil
	}
	p := mpParser{d: obsDecoder{elem: -1}, b: data}
	n, ok, err := p.length(true, "output")
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		c, _ := p.peek("output")
		return nil, 0, p.d.fail(ErrMalformed, "output is %s, want a map", mpKind(c))
	}
	var haveID, haveTS bool
	for range n {
		key, ok, err := p.str("output key")
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, p.d.fail(ErrMalformed, "output key at byte %d is not a string", p.i)
		}
		switch string(key) {
		case "id":
			if id, ok, err = p.str("output id"); err != nil {
				return nil, 0, err
			} else if !ok {
				return nil, 0, p.d.fail(ErrMalformed, "output id is not a string")
			}
			haveID = true
		case "ts":
			if ts, ok, err = p.number("output ts"); err != nil {
				return nil, 0, err
			} else if !ok {
				return nil, 0, p.d.fail(ErrMalformed, "output ts is not a number")
			}
			haveTS = true
		default:
			if err := p.skip(1); err != nil {
				return nil, 0, err
			}
		}
	}
	if p.i != len(p.b) {
		return nil, 0, p.d.fail(ErrMalformed, "output: %d trailing bytes", len(p.b)-p.i)
	}
	if !haveID || !haveTS {
		return nil, 0, p.d.fail(ErrMalformed, "output without id or ts")
	}
	return id, ts, nil
}

// unmarshalJSONObject decodes data, which must hold exactly one JSON object
// and nothing but whitespace after it, into v. (json.Decoder.More alone
// misses a trailing '}' or ']', and Decode accepts null for a struct.)
// With strict, unknown fields are errors.
func unmarshalJSONObject(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); t[0] != '{' {
		return errors.New("not a JSON object")
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("trailing data after the object at byte %d", len(data)-len(rest))
	}
	return nil
}
