package codec

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; the decoders wrap them with
// details naming what was wrong.
var (
	// ErrMalformed reports a payload that is not a valid encoding of the
	// expected type.
	ErrMalformed = errors.New("codec: malformed payload")
	// ErrVersion reports an envelope whose format version this package does not know.
	ErrVersion = errors.New("codec: unknown version")
	// ErrTooLarge reports a payload beyond the configured Limits.
	ErrTooLarge = errors.New("codec: payload too large")
	// ErrTooManyValues reports a vector with more values than
	// Limits.MaxDim (the pipeline's dimension): a wrong dimension rather
	// than a large payload. It also matches ErrTooLarge.
	ErrTooManyValues error = tooManyValues{}
	// ErrChecksum reports an envelope whose body does not match its checksum.
	ErrChecksum = errors.New("codec: checksum mismatch")
	// ErrNonFinite reports a NaN or ±Inf that the target format cannot carry
	// (JSON outputs and models).
	ErrNonFinite = errors.New("codec: non-finite value")
)

// Encoding is a wire encoding of observations and outputs.
type Encoding int

// Encodings.
const (
	JSON Encoding = iota + 1
	Msgpack
)

// String returns "json" or "msgpack".
func (e Encoding) String() string {
	switch e {
	case JSON:
		return "json"
	case Msgpack:
		return "msgpack"
	}
	return fmt.Sprintf("Encoding(%d)", int(e))
}

// ContentType returns the MIME type of e: "application/json" or
// "application/msgpack" (empty for an unknown encoding).
func (e Encoding) ContentType() string {
	switch e {
	case JSON:
		return "application/json"
	case Msgpack:
		return "application/msgpack"
	}
	return ""
}

// ParseEncoding parses "json" or "msgpack".
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "json":
		return JSON, nil
	case "msgpack":
		return Msgpack, nil
	}
	return 0, fmt.Errorf("codec: unknown encoding %q (want json or msgpack)", s)
}

// Default limits.
const (
	DefaultMaxBatch = 1024
	DefaultMaxDim   = 65536
)

// Limits bounds what a decoder accepts from one payload, so that memory
// per message is bounded by configuration.
type Limits struct {
	// MaxBatch is the largest number of observations in one payload.
	// Zero means DefaultMaxBatch (1024).
	MaxBatch int
	// MaxDim is the largest length of one observation's x.
	// Zero means DefaultMaxDim (65536).
	MaxDim int
	// MaxLabel is the largest string label y, in bytes. Zero means
	// DefaultMaxLabel (256).
	MaxLabel int
	// MaxMeta is the largest number of entries of one observation's meta
	// map. Zero means DefaultMaxMeta (16).
	MaxMeta int
	// MaxMetaBytes bounds one observation's meta map: the sum over its
	// entries of the key's bytes plus the value's (a string's bytes, 8 for
	// any other value). Zero means DefaultMaxMetaBytes (1024).
	MaxMetaBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	if l.MaxDim <= 0 {
		l.MaxDim = DefaultMaxDim
	}
	if l.MaxLabel <= 0 {
		l.MaxLabel = DefaultMaxLabel
	}
	if l.MaxMeta <= 0 {
		l.MaxMeta = DefaultMaxMeta
	}
	if l.MaxMetaBytes <= 0 {
		l.MaxMetaBytes = DefaultMaxMetaBytes
	}
	return l
}

// malformed returns an error wrapping ErrMalformed with a formatted detail.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// tooManyValues is ErrTooManyValues: it matches ErrTooLarge too, so that
// callers that only bound sizes keep working.
type tooManyValues struct{}

func (tooManyValues) Error() string { return "codec: wrong dimension" }

func (tooManyValues) Is(target error) bool { return target == ErrTooLarge }
