// Package processor owns all I/O and all goroutines of kpcastream: it
// consumes observations from NATS, feeds one learner per partition key,
// publishes projections, dead-letters bad input and snapshots learner state
// to JetStream.
//
// # Model
//
// New(cfg, deps) checks the configuration; Run(ctx) sets up the streams,
// consumers and the micro service, processes messages until ctx is
// cancelled, shuts down and returns. Every goroutine is owned by one
// errgroup held by Run. The NATS connection belongs to the caller, who
// drains it after Run returns.
//
// A pipeline reads a JetStream stream through a durable pull consumer
// (input.stream set) or a core NATS subject. The partition key is one
// token of the subject (key_token, by default the first '*' of the filter).
// Each key is owned by worker hash(key) mod workers; the consume callback
// only hands the message to that worker over a bounded channel (back-
// pressure). Per message the worker: loads the key's learner (snapshot or
// fresh) on first use; skips the message if its stream sequence is at or
// below the key's last applied one (replay after a restore); decodes;
// checks every observation (dimension, finiteness) before learning any;
// Learns and Scores each observation (apply, a plain function); publishes
// each projection of a ready learner to the output subject template with
// Nats-Msg-Id "<pipeline>/<key>/<seq>" ("…/<seq>/<i>" within a batch),
// using a JetStream publish when a stream captures the output subject;
// and only then acks. Before a learner is ready the message is learned,
// acked and counted as warming.
//
// # Failures
//
// classify sorts errors: bad input (codec ErrMalformed/ErrTooLarge/
// ErrVersion, learners ErrDimension/ErrNonFinite/ErrNumerical, a recovered
// panic) is published to the dead-letter subject with headers
// Kpcastream-Error (reason), Kpcastream-Error-Detail, Kpcastream-Subject
// and Kpcastream-Stream-Seq and the original payload, then terminated; the
// learner is untouched (ErrNumerical within a batch keeps the observations
// learned before it, as a replay would). Transient failures are nak'ed
// with input.nak_delay. A failed output publish keeps the message's
// outputs on its key and naks it: the key publishes them before it applies
// anything later (a later message is nak'ed while they cannot be, and the
// redelivered message is then acked), and is not snapshotted or unloaded
// meanwhile, so a restart cannot skip them. Each (key, seq)'s outputs are
// thus published once, up to retries that the output stream deduplicates
// by Nats-Msg-Id.
//
// A key's messages are applied in stream order, since skipping by last
// applied sequence depends on it: a message nak'ed before it was applied
// makes the key's later messages wait (nak, reason "waiting") until it is
// settled. A gap in the consumer's delivery sequence (deliveries lost with
// a connection, which come back only after ack_wait) is looked up in the
// stream: each undelivered message is held in the tracker and its key
// waits for it the same way. A key gives up waiting (logged at error) after
// max(3·ack_wait, 1m), for a message deleted from the stream meanwhile. A corrupt or incompatible snapshot refuses the
// key's messages (nak, logged at error) unless
// snapshot.on_corrupt_snapshot is "reset". An invalid learner
// configuration stops Run.
//
// # Exactly-once state
//
// A snapshot records a key's state and last applied stream sequence. Each
// JetStream pipeline also keeps a checkpoint in the checkpoint bucket: the
// lowest sequence whose effect may not be in a saved snapshot (deliveries
// in flight or nak'ed, and each dirty key's first unsnapshotted sequence;
// see tracker). On start the durable consumer is reset to the checkpoint,
// and workers skip per key what the key's snapshot already holds, so after
// a crash the state is exactly that of an uninterrupted run. Replayed
// outputs carry the same Nats-Msg-Id and are dropped by an output stream
// whose duplicates window covers the replay. The checkpoint key is
// "checkpoint.<stream>.<durable>": one per durable consumer, so partitions
// may share a pipeline name (and its snapshot keys) as long as each has
// its own durable and filter. (A checkpoint stored under the pipeline name
// by earlier versions is read when the new key is missing.)
//
// # One instance per consumer: leases
//
// Before consuming, Run takes a lease on each JetStream pipeline's durable
// consumer: the key "lease.<stream>.<durable>" of the checkpoint bucket,
// holding the instance's id, renewed by compare-and-set every lease_ttl/3
// and deleted when Run returns. A second instance finding the lease held
// waits as a hot standby (on_lease_held "wait", the default; not ready,
// consuming nothing) or returns an error ("fail", once it sees the holder
// renew). The standby takes the lease when it is deleted, or when its
// revision has not changed for lease_ttl (the holder died), with a
// compare-and-set on that revision, so at most one standby wins; expiry is
// measured on the standby's own clock, so clock skew does not matter. A
// holder whose renewal fails because someone else took the lease stops:
// Run returns an error, and writes no more checkpoints. Between a
// holder's last renewal and its noticing the loss (at most lease_ttl/3
// after the takeover) both may process; snapshot compare-and-set keeps
// state from being overwritten, as for any stale worker.
//
// Snapshots follow the policy (every N messages, every T, on shutdown, on
// unload); the worker hands a State copy to its snapshotter goroutine and
// never waits on the KV except to free a slot when unloading. A save that
// fails with snapshot.ErrConflict means someone else committed a newer
// snapshot of the key: the worker forgets its learner (it no longer owns
// the key) and reloads the newer snapshot on the key's next message.
//
// # Bounded memory
//
// Each worker holds at most max(1, max_keys/workers) learners per pipeline;
// the least recently used one is snapshotted and unloaded, and loaded again
// on its next message. Per message, memory is bounded by max_batch and the
// learner's dimension.
//
// # Operations
//
// Handler serves /metrics, /healthz and /readyz. The micro service
// (service_name, default "kpcastream") has endpoints <name>.stats,
// <name>.pipelines, <name>.model, <name>.snapshot and <name>.reset; the
// last three take {"pipeline":"…","key":"…"}.
package processor
