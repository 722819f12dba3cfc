package codec

import (
	"encoding/json"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Output is one published projection. Outputs are only produced by a ready
// learner, so every field is meaningful.
//
// Wire field names, the same in JSON and msgpack: "id", "key", "seq", "ts",
// "z", "spe", "t2", "explained", "basis_version".
type Output struct {
	// ID is the observation's ID, or "".
	ID string `msgpack:"id" json:"id"`
	// Key is the learner's partition key.
	Key string `msgpack:"key" json:"key"`
	// Seq is the input stream sequence of the observation.
	Seq uint64 `msgpack:"seq" json:"seq"`
	// TS is the observation's timestamp in seconds since the Unix epoch.
	TS float64 `msgpack:"ts" json:"ts"`
	// Z is the projection onto the k components.
	Z []float64 `msgpack:"z" json:"z"`
	// SPE is the squared feature-space reconstruction error (Q statistic).
	SPE float64 `msgpack:"spe" json:"spe"`
	// T2 is Hotelling's T².
	T2 float64 `msgpack:"t2" json:"t2"`
	// Explained is the explained variance ratio in [0, 1].
	Explained float64 `msgpack:"explained" json:"explained"`
	// BasisVersion counts real changes of the published basis.
	BasisVersion uint64 `msgpack:"basis_version" json:"basis_version"`
}

// EncodeOutput appends the encoding of out to dst and returns it. JSON
// cannot carry NaN or ±Inf: such a value gives an error wrapping
// ErrNonFinite. An unknown encoding is an error.
func EncodeOutput(dst []byte, enc Encoding, out *Output) ([]byte, error) {
	switch enc {
	case JSON:
		b, err := json.Marshal(out)
		if err != nil {
			return dst, fmt.Errorf("%w: output: %v", ErrNonFinite, err)
		}
		return append(dst, b...), nil
	case Msgpack:
		b, err := msgpack.Marshal(out)
		if err != nil {
			return dst, fmt.Errorf("codec: output: %w", err)
		}
		return append(dst, b...), nil
	}
	return dst, fmt.Errorf("codec: unknown encoding %d", int(enc))
}

// DecodeOutput decodes an output written by EncodeOutput, for tests and
// consumers. Errors wrap ErrMalformed.
func DecodeOutput(data []byte, enc Encoding) (*Output, error) {
	var out Output
	switch enc {
	case JSON:
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, malformed("output: %v", err)
		}
	case Msgpack:
		if err := msgpack.Unmarshal(data, &out); err != nil {
			return nil, malformed("output: %v", err)
		}
	default:
		return nil, fmt.Errorf("codec: unknown encoding %d", int(enc))
	}
	return &out, nil
}
