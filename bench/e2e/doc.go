// Package e2e is the harness behind "kpcastream bench": it measures how many
// messages a second go from a JetStream input stream to outputs, and at what
// CPU, memory and latency, for three phases side by side.
//
// Its one reason to change is how the end-to-end benchmark drives a
// deployment and measures it.
//
//   - raw (rawRelay): no processor. nats.go Consume on a durable pull
//     consumer with explicit acks (the processor's consumer shape), a
//     same-size pass-through output published with PublishMsgAsync and a
//     Nats-Msg-Id (at most --window pending), the input acked after its
//     PubAck: the most this machine's NATS does for a pass-through.
//   - bare: the real processor with a pass-through learner (passLearner).
//   - pipeline: the real processor with --learner.
//
// By default the outputs go to a JetStream stream with duplicate detection,
// as deployed, and every phase's output stream must hold each output once
// when the phase ends. Each phase runs once per --rtt value; above 0 its
// processor or raw relay connects through a delayProxy, a loopback TCP proxy
// that delays each direction by half the round trip without limiting
// throughput. The generator (benchPublisher) and the receiver always connect
// directly. The measured window runs from the first measured output to the
// last, or to --duration; CPU is the process's own (internal/procstat), so
// an embedded server's work counts and an external one's does not.
//
// Run is the entry point; it is not safe to run two benches at once against
// one server with the same stream names (BENCH_IN_*, BENCH_OUT_*), which
// each phase deletes and creates.
package e2e
