// Package snapshot stores and loads learner snapshots in JetStream: one KV
// entry per learner key, plus an Object Store blob for states too large for
// one KV value.
//
// Its one reason to change is how learner state is stored in and read from
// JetStream KV.
//
// Model. The KV entry of a key is the commit point. Its value is either
//
//   - the snapshot itself, inline (codec snapshot envelope), when the
//     encoded snapshot is at most Config.MaxInline bytes; or
//   - a small manifest (codec manifest envelope) naming an object in the
//     object store bucket, with its SHA-256 digest, size and last applied
//     sequence, for larger states.
//
// Writes use optimistic concurrency on the KV revision. Load returns the
// revision it read; Save takes it back and commits by compare-and-swap
// (revision 0: the key must not exist yet). A writer holding a stale
// revision — a zombie worker, or a second owner of the key — gets
// ErrConflict and changes nothing. Objects are written under a fresh,
// unique name before the manifest is committed, so a failed or conflicting
// write never destroys the snapshot the current entry points to; after a
// commit the previous object is deleted, after a failure the new one
// (both best effort: an orphaned object wastes space but is never read).
//
// Keys. Learner keys are arbitrary strings; KV keys must match
// [-/_=.a-zA-Z0-9]+ without empty dot-separated tokens. EncodeKey maps one
// to the other injectively: bytes in [-_/a-zA-Z0-9] are kept, '.' is kept
// between two non-dot bytes, and every other byte is written "=XX" (two
// upper-case hex digits). JoinKey forms the conventional logical key
// "<pipeline>.<key>".
//
// Errors. ErrNoSnapshot: the key has no snapshot (never saved, or deleted).
// ErrConflict: the revision given to Save or Delete is stale. ErrCorrupt: the
// stored bytes cannot be decoded or the object does not match its manifest;
// it wraps the codec error, and a corrupt snapshot is never silently
// replaced by an empty state. Other errors are transport errors from
// JetStream (timeouts, no responders) and are usually transient.
//
// Listing. List returns the entries under a key prefix (a pipeline's keys)
// with their revision, time and size, without decoding them, so that a
// corrupt snapshot can be found and removed ("kpcastream snapshot").
//
// Concurrency. A Store is safe for concurrent use by several goroutines;
// concurrent writers of the same key are serialised by the revision check.
package snapshot
