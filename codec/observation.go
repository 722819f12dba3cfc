package codec

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Observation is one decoded input vector.
type Observation struct {
	// ID is the producer's identifier of the observation, or "".
	ID string
	// TS is the producer's timestamp in seconds since the Unix epoch, or 0.
	TS float64
	// X is the feature vector.
	X []float64
	// Y is the class label: a number, a string, or absent (ScalarNone).
	// It is passed through to the outputs and trains a classifier stage.
	Y Scalar
	// Meta is free metadata passed through to the outputs unchanged
	// (at most Limits.MaxMeta entries of scalars), or nil.
	Meta Meta
}

// maxDepth bounds the nesting of skipped (unknown) values.
const maxDepth = 32

// DecodeObservations decodes an input payload holding one or more observations.
//
// The encoding is chosen by contentType: "application/json" for JSON,
// "application/msgpack" or "application/x-msgpack" for msgpack (parameters
// after ';' and case are ignored). An empty contentType detects it: JSON if
// the first byte after whitespace is '{' or '[', else msgpack. Any other
// content type is an error wrapping ErrMalformed.
//
// Accepted shapes, the same in JSON and msgpack:
//
//	{"x":[x1,…], "id":"…", "ts":…,     one observation; id, ts, y and
//	 "y":…, "meta":{…}}                 meta optional
//	[x1, x2, …]                         one observation, a bare vector
//	{"batch":[[…], {"x":[…],…}, …]}     a batch of bare vectors and/or objects
//
// id is a string (or null) of valid UTF-8: invalid UTF-8, or in JSON a \u
// escape of an unpaired surrogate, is malformed (see the package comment).
// ts is the time in seconds since the Unix epoch: a number, an RFC 3339
// string such as "2024-05-01T12:00:00.5Z", a msgpack timestamp extension,
// or null (absent and null give 0). y is the class label: a number (finite)
// or a string (valid UTF-8 as for id, at most lim.MaxLabel bytes), or null
// (absent); any other type is malformed ("field y: label is a bool, want a
// number or a string"). meta is an object (map) of at most lim.MaxMeta
// entries whose values are null, bools, numbers or strings (keys and
// strings valid UTF-8, unique keys, at most lim.MaxMetaBytes in all), or
// null; nested values are malformed. Unknown object
// fields are skipped (nesting at most 32 deep). Elements of x may be any
// JSON number, and msgpack float32, float64 or integers. NaN and ±Inf are
// not rejected here (msgpack can carry them; the learner rejects them with
// its own error); the caller checks the dimension.
//
// The observations are appended to dst[:0], reusing the capacity of dst
// and of its X slices, so a caller that passes back the previous result
// decodes warm payloads without allocating (except ID strings). The
// returned slices alias that storage. On error the result is dst[:0].
//
// It never panics. Errors wrap ErrMalformed and name the problem, for
// example "codec: malformed payload: batch element 2: field x: element 3 is
// a string"; a payload with more than lim.MaxBatch observations or an x
// with more than lim.MaxDim values gives ErrTooLarge before anything is
// allocated for it.
func DecodeObservations(dst []Observation, data []byte, contentType string, lim Limits) ([]Observation, Encoding, error) {
	d := obsDecoder{dst: dst[:0], lim: lim.withDefaults(), elem: -1}
	enc, err := encodingOf(data, contentType)
	if err != nil {
		return dst[:0], 0, err
	}
	if enc == JSON {
		p := jsonParser{d: d, b: data}
		err = p.top()
		d = p.d
	} else {
		p := mpParser{d: d, b: data}
		err = p.top()
		d = p.d
	}
	if err != nil {
		return d.dst[:0], enc, err
	}
	return d.dst, enc, nil
}

// encodingOf picks the encoding from a content type or, when it is empty, from the data.
func encodingOf(data []byte, contentType string) (Encoding, error) {
	ct := contentType
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, "application/json"):
		return JSON, nil
	case strings.EqualFold(ct, "application/msgpack"), strings.EqualFold(ct, "application/x-msgpack"):
		return Msgpack, nil
	case ct == "":
		t := bytes.TrimLeft(data, " \t\r\n")
		if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			return JSON, nil
		}
		return Msgpack, nil
	}
	return 0, malformed("unsupported content type %q (want application/json or application/msgpack)", contentType)
}

// obsDecoder holds what both parsers share: the output, the limits and the
// position (batch element) for error messages.
type obsDecoder struct {
	dst  []Observation
	lim  Limits
	elem int // current batch element, or -1 outside a batch
}

// fail returns an error wrapping sentinel, prefixed with the batch element if any.
func (d *obsDecoder) fail(sentinel error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if d.elem >= 0 {
		return fmt.Errorf("%w: batch element %d: %s", sentinel, d.elem, msg)
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}

// slot appends an observation to dst, reusing the slot's X capacity, and
// returns it with ID, TS and X cleared.
func (d *obsDecoder) slot() (*Observation, error) {
	n := len(d.dst)
	if n >= d.lim.MaxBatch {
		return nil, d.fail(ErrTooLarge, "more than %d observations", d.lim.MaxBatch)
	}
	if n < cap(d.dst) {
		d.dst = d.dst[:n+1]
	} else {
		d.dst = append(d.dst, Observation{})
	}
	o := &d.dst[n]
	o.ID, o.TS, o.X, o.Y, o.Meta = "", 0, o.X[:0], Scalar{}, o.Meta[:0]
	return o, nil
}

// checkLen checks a vector length n announced or counted while parsing.
func (d *obsDecoder) checkLen(field string, n int) error {
	if n > d.lim.MaxDim {
		return d.fail(ErrTooManyValues, "field %s: more than %d values", field, d.lim.MaxDim)
	}
	return nil
}

// checkText checks that s, the value of a text field such as id, is valid
// UTF-8 and did not come from an unpaired surrogate escape (lone). Both
// would make the value ambiguous: encoding/json and most decoders replace
// such bytes with U+FFFD, so distinct ids would collapse into one and the
// JSON and msgpack forms of one observation would differ.
func (d *obsDecoder) checkText(field string, s []byte, lone bool) error {
	if lone {
		return d.fail(ErrMalformed, "field %s: \\u escape of an unpaired UTF-16 surrogate", field)
	}
	if !utf8.Valid(s) {
		return d.fail(ErrMalformed, "field %s: invalid UTF-8 at byte %d", field, invalidAt(string(s)))
	}
	return nil
}

// invalidAt returns the offset of the first invalid UTF-8 sequence in s,
// or len(s).
func invalidAt(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(s)
}

// grow returns x[:0] with capacity at least n.
func grow(x []float64, n int) []float64 {
	return slices.Grow(x[:0], n)
}

// EncodeObservations appends an input payload holding obs to dst, in the
// shape DecodeObservations reads: one observation as {"x":[…],"id":…,"ts":…}
// (id and ts omitted when empty or zero), several as {"batch":[…]}. It is
// meant for producers, tools and tests. JSON cannot carry NaN or ±Inf:
// such a value gives an error wrapping ErrNonFinite and dst unchanged. An
// id that is not valid UTF-8 gives an error wrapping ErrMalformed in both
// encodings, since DecodeObservations would reject the payload. An empty
// obs is an error.
func EncodeObservations(dst []byte, enc Encoding, obs []Observation) ([]byte, error) {
	if len(obs) == 0 {
		return dst, fmt.Errorf("codec: encode observations: none given")
	}
	if enc != JSON && enc != Msgpack {
		return dst, fmt.Errorf("codec: unknown encoding %d", int(enc))
	}
	for i := range obs {
		if !utf8.ValidString(obs[i].ID) {
			return dst, fmt.Errorf("%w: observation %d: field id: invalid UTF-8 at byte %d", ErrMalformed, i, invalidAt(obs[i].ID))
		}
		if err := checkPassThrough(i, obs[i].Y, obs[i].Meta, enc == JSON); err != nil {
			return dst, err
		}
		if enc == JSON {
			if bad := firstNonFinite(obs[i].TS, obs[i].X); bad >= -1 {
				return dst, fmt.Errorf("%w: observation %d holds a non-finite value, which JSON cannot carry", ErrNonFinite, i)
			}
		}
	}
	b := dst
	if len(obs) > 1 {
		if enc == JSON {
			b = append(b, `{"batch":[`...)
		} else {
			b = append(b, 0x81)
			b = mpStr(b, "batch")
			b = mpArrayLen(b, len(obs))
		}
	}
	for i := range obs {
		if enc == JSON && i > 0 {
			b = append(b, ',')
		}
		b = appendObservation(b, enc, &obs[i])
	}
	if len(obs) > 1 && enc == JSON {
		b = append(b, "]}"...)
	}
	return b, nil
}

// firstNonFinite returns −1 if ts is not finite, the index of the first
// non-finite element of x, or −2 if all are finite.
func firstNonFinite(ts float64, x []float64) int {
	if math.IsNaN(ts) || math.IsInf(ts, 0) {
		return -1
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return i
		}
	}
	return -2
}

func appendObservation(b []byte, enc Encoding, o *Observation) []byte {
	n := 1
	if o.ID != "" {
		n++
	}
	if o.TS != 0 || math.Signbit(o.TS) {
		n++
	}
	if o.Y.Kind != ScalarNone {
		n++
	}
	if len(o.Meta) > 0 {
		n++
	}
	if enc == Msgpack {
		b = append(b, 0x80|byte(n))
		b = mpStr(b, "x")
		b = mpArrayLen(b, len(o.X))
		for _, v := range o.X {
			b = mpFloat(b, v)
		}
		if o.ID != "" {
			b = mpStr(b, "id")
			b = mpStr(b, o.ID)
		}
		if o.TS != 0 || math.Signbit(o.TS) {
			b = mpStr(b, "ts")
			b = mpFloat(b, o.TS)
		}
		if o.Y.Kind != ScalarNone {
			b = mpStr(b, "y")
			b = appendScalar(b, enc, o.Y)
		}
		if len(o.Meta) > 0 {
			b = mpStr(b, "meta")
			b = appendMeta(b, enc, o.Meta)
		}
		return b
	}
	b = append(b, `{"x":[`...)
	for i, v := range o.X {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonFloat(b, v)
	}
	b = append(b, ']')
	if o.ID != "" {
		b = append(b, `,"id":`...)
		b = jsonStr(b, o.ID)
	}
	if o.TS != 0 || math.Signbit(o.TS) {
		b = append(b, `,"ts":`...)
		b = jsonFloat(b, o.TS)
	}
	if o.Y.Kind != ScalarNone {
		b = append(b, `,"y":`...)
		b = appendScalar(b, enc, o.Y)
	}
	if len(o.Meta) > 0 {
		b = append(b, `,"meta":`...)
		b = appendMeta(b, enc, o.Meta)
	}
	return append(b, '}')
}
