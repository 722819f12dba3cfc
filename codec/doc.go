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
//     "t2", "explained" and "basis_version", in JSON or msgpack.
//   - Snapshots are a framed, versioned and checksummed envelope around a
//     msgpack body; see EncodeSnapshot.
//   - Models are JSON in the "kpcastream.model/v1" format; see EncodeModel.
//
// Errors: every decoder treats its input as untrusted and returns an error,
// never a panic. Errors wrap one of the sentinels ErrMalformed, ErrVersion,
// ErrTooLarge or ErrChecksum (match them with errors.Is) and name what was
// wrong.
//
// Concurrency: every function is safe for concurrent use; none keeps a
// reference to its input.
package codec
