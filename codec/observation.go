package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Observation is one decoded input vector.
type Observation struct {
	// ID is the producer's identifier of the observation, or "".
	ID string
	// TS is the producer's timestamp in seconds since the Unix epoch, or 0.
	TS float64
	// X is the feature vector.
	X []float64
}

// DecodeObservations decodes an input payload holding one or more observations.
//
// The encoding is chosen by contentType: "application/json" for JSON,
// "application/msgpack" or "application/x-msgpack" for msgpack; parameters
// after ';' are ignored. An empty contentType detects it: JSON if the first
// byte after whitespace is '{' or '[', else msgpack.
//
// Accepted shapes (the same in JSON and msgpack):
//
//	{"x":[x1,…], "id":"…", "ts":…}      one observation; id and ts optional
//	[x1, x2, …]                          one observation, bare vector
//	{"batch":[[…],[…],…]}                a batch of bare vectors
//	{"batch":[{"x":[…],"id":"…"},…]}     a batch of objects (may be mixed with bare vectors)
//
// ts is a number of seconds since the Unix epoch, or an RFC 3339 string
// (or, in msgpack, a timestamp extension). Unknown object fields are
// ignored. Numbers may be msgpack float32, float64 or integers, and any
// JSON number. NaN and ±Inf are not rejected here (the learner rejects
// them); the caller checks the dimension.
//
// The observations are appended to dst[:0], reusing the capacity of its X
// slices, and returned with the detected encoding. It never panics; errors
// wrap ErrMalformed (naming the problem) or ErrTooLarge (more than
// lim.MaxBatch observations or more than lim.MaxDim values in one x).
func DecodeObservations(dst []Observation, data []byte, contentType string, lim Limits) ([]Observation, Encoding, error) {
	lim = lim.withDefaults()
	enc, err := encodingOf(data, contentType)
	if err != nil {
		return dst[:0], 0, err
	}
	var v any
	switch enc {
	case JSON:
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return dst[:0], enc, malformed("json: %v", err)
		}
	default:
		if err := msgpack.Unmarshal(data, &v); err != nil {
			return dst[:0], enc, malformed("msgpack: %v", err)
		}
	}
	out, err := fromValue(dst[:0], v, lim)
	return out, enc, err
}

// encodingOf picks the encoding from a content type or, when it is empty, from the data.
func encodingOf(data []byte, contentType string) (Encoding, error) {
	ct := contentType
	if i := bytes.IndexByte([]byte(ct), ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = string(bytes.TrimSpace([]byte(ct)))
	switch ct {
	case "application/json":
		return JSON, nil
	case "application/msgpack", "application/x-msgpack":
		return Msgpack, nil
	case "":
		t := bytes.TrimLeft(data, " \t\r\n")
		if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			return JSON, nil
		}
		return Msgpack, nil
	}
	return 0, malformed("unsupported content type %q", contentType)
}

// fromValue is the simple first version over generic values.
func fromValue(dst []Observation, v any, lim Limits) ([]Observation, error) {
	switch t := v.(type) {
	case []any:
		return appendObs(dst, "", 0, t, lim)
	case map[string]any:
		if b, ok := t["batch"]; ok {
			items, ok := b.([]any)
			if !ok {
				return dst, malformed("field batch: not an array")
			}
			if len(items) > lim.MaxBatch {
				return dst, fmt.Errorf("%w: batch of %d observations, limit %d", ErrTooLarge, len(items), lim.MaxBatch)
			}
			for i, it := range items {
				var err error
				dst, err = fromItem(dst, it, lim)
				if err != nil {
					return dst, fmt.Errorf("batch element %d: %w", i, err)
				}
			}
			return dst, nil
		}
		return fromItem(dst, t, lim)
	}
	return dst, malformed("payload is %T, want an object or an array", v)
}

func fromItem(dst []Observation, v any, lim Limits) ([]Observation, error) {
	switch t := v.(type) {
	case []any:
		return appendObs(dst, "", 0, t, lim)
	case map[string]any:
		x, ok := t["x"].([]any)
		if !ok {
			return dst, malformed("field x: missing or not an array")
		}
		var id string
		if s, ok := t["id"].(string); ok {
			id = s
		}
		var ts float64
		switch s := t["ts"].(type) {
		case string:
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return dst, malformed("field ts: %v", err)
			}
			ts = float64(tm.UnixNano()) / 1e9
		case nil:
		default:
			f, ok := number(s)
			if !ok {
				return dst, malformed("field ts: %T is not a number", s)
			}
			ts = f
		}
		return appendObs(dst, id, ts, x, lim)
	}
	return dst, malformed("observation is %T, want an object or an array", v)
}

func appendObs(dst []Observation, id string, ts float64, x []any, lim Limits) ([]Observation, error) {
	if len(x) == 0 {
		return dst, malformed("field x: empty")
	}
	if len(x) > lim.MaxDim {
		return dst, fmt.Errorf("%w: x has %d values, limit %d", ErrTooLarge, len(x), lim.MaxDim)
	}
	if len(dst) >= lim.MaxBatch {
		return dst, fmt.Errorf("%w: more than %d observations", ErrTooLarge, lim.MaxBatch)
	}
	var o Observation
	if len(dst) < cap(dst) {
		o = dst[:len(dst)+1][len(dst)]
	}
	o.ID, o.TS, o.X = id, ts, o.X[:0]
	for i, e := range x {
		f, ok := number(e)
		if !ok {
			return dst, malformed("field x: element %d is %T, not a number", i, e)
		}
		o.X = append(o.X, f)
	}
	return append(dst, o), nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	}
	return 0, false
}
