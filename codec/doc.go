// Package codec turns bytes into Go values and back for everything
// kpcastream puts on the wire or in storage: input observations, output
// projections, the snapshot envelope around a learner's State, the snapshot
// manifest, and the portable model export.
//
// Its one reason to change is the byte formats: messages, snapshots and the
// model export on the wire.
//
// The wire structs and their field names belong to codec; the types of
// package learners carry no tags. codec sees []byte, never a NATS message.
//
// Formats:
//
//   - Observations (input) are JSON or msgpack; see DecodeObservations for
//     the accepted shapes.
//
// Text in observations: an id must be valid UTF-8, in both encodings. An id
// holding an invalid UTF-8 sequence, or (JSON) a \u escape of an unpaired
// UTF-16 surrogate such as "\ud800", is malformed: DecodeObservations
// returns ErrMalformed naming the field and the byte ("field id: invalid
// UTF-8 at byte 3"), so the processor sends the message to the dead-letter
// subject. It is not repaired, because the usual repair (U+FFFD, as
// encoding/json does) maps distinct ids onto one and would give the same
// observation two JSON forms; JSON (RFC 8259 §8.1) and msgpack's str type
// are UTF-8 by definition, so only a broken producer sends such bytes.
// EncodeObservations refuses such an id the same way. Fields that are
// skipped (unknown keys) are checked for syntax only. Valid ids, including
// U+FFFD itself and escaped control characters, round-trip exactly through
// either encoding.
//   - Outputs are a map with the fields "id", "key", "seq", "ts", "z", "spe",
//     "t2", "explained" and "basis_version", in JSON or msgpack; see
//     DecodeOutput, and OutputStamp for reading only id and ts.
//   - Snapshots are a framed, versioned and checksummed envelope (magic
//     "KPC", kind, version, CRC-32C, length) around a msgpack body; see
//     EncodeSnapshot. Manifests (package snapshot's pointer to a large state
//     in the object store) use the same framing; see EncodeManifest.
//   - Models are JSON in the "kpcastream.model/v1" format; see EncodeModel.
//     DecodeModel and the JSON DecodeOutput accept exactly one object and
//     nothing after it but whitespace.
//
// Errors: every decoder treats its input as untrusted and returns an error,
// never a panic. Errors wrap one of the sentinels ErrMalformed, ErrVersion,
// ErrTooLarge or ErrChecksum (match them with errors.Is) and name what was
// wrong. Encoders to JSON report NaN and ±Inf with ErrNonFinite.
//
// Allocation: DecodeObservations parses both encodings by hand (no
// reflection) and, given back its previous result, decodes without
// allocating except for ID strings; EncodeOutput appends to the caller's
// buffer without allocating, and OutputStamp reads a msgpack output's id
// and ts in place without allocating. Snapshots and models go through the msgpack
// and encoding/json libraries: they are rare and large.
//
// Versions: a decoder rejects envelope versions it does not know
// (ErrVersion) instead of guessing. The golden files in testdata hold every
// version ever written, so old snapshots keep loading.
//
// Fuzzing: every decoder has a fuzz target in fuzz_test.go that checks
// properties (errors wrap a sentinel, limits hold, round trips are exact and
// encoding is idempotent), not only the absence of panics. CI runs each
// for a short while; inputs that once failed are kept in testdata/fuzz.
// FUZZING.md at the repository root lists the targets and the long runs.
//
// Concurrency: every function is safe for concurrent use; none keeps a
// reference to its input.
package codec
