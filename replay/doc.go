// Package replay runs a CSV file through one key's model offline, without
// NATS: the learner (with its monitor, or a classifier stage with a label
// column), and writes what it learned and saw: one projection or
// prediction line per row, model exports (also at given row counts), an
// HTML report and PNG plots, and a summary. It is kpcastream replay; the
// command only parses flags into a Config and opens the input.
//
// Its one reason to change is what an offline pass over recorded rows
// computes and writes. It is public (not internal) because that pass is a
// product of its own: a Go program that imports kpcastream fits and
// evaluates a model from a file with Run, with the same meaning as the
// command's flags (Config's fields are named after them) and byte for
// byte the same outputs (cmd/kpcastream's TestReplayGolden). The exported
// surface is kept small: Config (and its sections), Run, Row, Hook and
// HookFunc.
//
// # One pass loop
//
// Every pass over the rows is passLoop: a source yields the rows
// (streamed for one in-order pass of an online learner, else from memory:
// passes, shuffles, batch, labels), a step feeds each row to the key
// model (under the monitor, to the batch learner, or through the
// classifier) and fills in a Row, and hooks are told of it in order: the
// --out writer, the report, the monitor's counts, the fault detection,
// the progress line, the --model-at exports and the caller's own hooks.
// What varies per row is a Hook; a new per-row feature is one more.
//
// The key model (learner, monitor, classifier, preprocessing) is the
// processor's own, an internal/keymodel Model: newKeyModel turns the
// flags into its Spec, and its Export is the model export.
//
// Run is deterministic for a given Config and input, but for the report's
// timings; it leaves the Config unchanged, and runs of their own outputs
// may run concurrently. Errors name the row (0-based data row) or the
// flag they concern.
package replay
