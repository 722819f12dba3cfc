// Package publish is the one port through which kpcastream sends a
// message out — the processor's outputs and dead letters, the CLI's
// publish and dlq republish, the bench's raw relay: with JetStream,
// acknowledged by the stream, when a stream captures the subject, else on
// core NATS. The choice between the two is written here once (Find, and
// Out's JetStream). It has one reason to change: how a message goes out.
//
// Two senders stay outside it on purpose: the processor's ordered lane
// (output.key_in_flight > 1, processor/lane.go), which speaks JetStream's
// batch publish over core NATS and is used only where Find found a
// stream; and the bench's input generator (bench/e2e/pub.go), a
// wire-level load source, not a product path.
//
// Out is safe for concurrent use when its publishers are (a *nats.Conn
// and a jetstream.JetStream are). Errors are the publishers' own;
// Transient tells those worth retrying.
package publish
