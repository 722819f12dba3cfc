// Package codec turns bytes into Go values and back for everything
// kpcastream puts on the wire or in storage: input observations, output
// projections, the snapshot envelope around a learner's State, the snapshot
// manifest, and the portable model export.
//
// The wire structs and their field names belong to codec; the types of
// package learners carry no tags. codec sees []byte, never a NATS message.
//
// Formats:
//
//   - Observations (input) are JSON or msgpack; see DecodeObservations for
//     the accepted shapes.
//   - Outputs are a map with the fields "id", "key", "seq", "ts", "z", "spe",
//     "t2", "explained" and "basis_version", in JSON or msgpack; see
//     DecodeOutput, and OutputStamp for reading only id and ts.
//   - Snapshots are a framed, versioned and checksummed envelope (magic
//     "KPC", kind, version, CRC-32C, length) around a msgpack body; see
//     EncodeSnapshot. Manifests (package snapshot's pointer to a large state
//     in the object store) use the same framing; see EncodeManifest.
//   - Models are JSON in the "kpcastream.model/v1" format; see EncodeModel.
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
// Concurrency: every function is safe for concurrent use; none keeps a
// reference to its input.
package codec
