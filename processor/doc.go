// Package processor owns all I/O and all goroutines of kpcastream: it
// consumes observations from NATS, feeds one learner per partition key,
// publishes projections, dead-letters bad input and snapshots learner state
// to JetStream.
//
// Its one reason to change is how pipelines run on NATS: consuming, applying,
// publishing, snapshotting, ownership I/O.
//
// # Model
//
// New(cfg, deps) checks the configuration; Run(ctx) sets up the streams,
// consumers and the micro service, processes messages until ctx is
// cancelled, shuts down and returns. Every goroutine has one owner that
// joins it before its own return, up to Run's errgroup: Run's group owns
// the core NATS partitions and the coordinator; the coordinator owns its
// watcher, its heartbeat and the JetStream partitions it took (an
// errgroup); each partition owns its renewal and its workers, with their
// ackers and snapshotters (errgroups). Workers that have not stopped
// 2·shutdown_timeout + snapshot_timeout after their input closed are
// cancelled and still joined; the micro service's handlers in flight
// (they run on the connection's goroutines) are waited for after it
// stops; the watches end with Run. So once Run returns nothing of the
// processor runs (TestRunOwnsEveryGoroutine). The NATS connection and the
// HTTP server of Handler belong to the caller, who drains and shuts them
// down after Run returns.
//
// # Layout
//
// Package processor is the shell: setup, consume, execute, save. A
// worker's dependencies are the fields of its deps (deps.go), built by
// its partition; its files go by effect: worker.go (the loop executing
// the machine's Ready), worker_load.go, worker_apply.go, worker_output.go,
// deadletter.go, worker_save.go, worker_control.go, worker_local.go (the local
// tier below memory). Beside it, imported
// one way (processor → internal/…, never back):
//
//   - internal/keymodel: a key's model (learner, classifier stage,
//     monitor, preprocessing) built, restored, applied, saved, reset and
//     exported in one place;
//   - internal/publish: the one publish port (a stream with JetStream, or
//     core NATS; the choice made by publish.Find), used for outputs and
//     dead letters as by the CLI and the bench;
//   - internal/machine: the pure per-worker state machine
//     (Step/Ready/Advance) and the replay tracker;
//   - internal/ownership: the pure assignment rules of partitions to
//     members and the fence's rule (Lease; the clock and its lock are
//     the shell's, fence.go);
//   - internal/sim: a seeded simulation of the fleet that drives the
//     machine and ownership rules under faults (see the README);
//   - internal/ops: the operations — the micro service (forwarding to
//     other members), the HTTP handler with the live page and its API,
//     the watched keys and the backfill of their outputs. It declares
//     the Views, Controls and Members it needs; views.go implements them
//     with read-only views (copies of counters and settings) and control
//     requests (a typed ops.Op) that the workers answer on their own
//     goroutines. The JSON types of the endpoints (PipelineStats,
//     PipelineInfo, KeyInfo, …) and the error sentinels are ops's,
//     re-exported here as aliases.
//
// A pipeline reads a JetStream stream (input.stream set) or a core NATS
// subject. The partition key is one token of the subject (key_token, by
// default the first '*' of the filter). A JetStream input is split into
// Partitions partitions by the stream's subject transform (see Fenced
// ownership), over input.shards streams when there are several (shards.go:
// partition p in stream <stream>-<p mod shards>, partitioned by the
// servers' subject mapping; shards_layout.go refuses a change of them);
// each partition run here has its own consumer, replay
// tracker and ⌈workers/partitions⌉ worker goroutines, and each key of the
// partition is owned by worker (FNV-1a(key)/partitions) mod workers; the
// consume callback only hands the message to that worker over a bounded
// channel (back-pressure of that partition only). A core NATS input is one
// partition, always run here. Per message the worker: decodes and checks
// every observation (dimension, finiteness, batch size, labels) before its
// key is touched, so bad input creates no learner, claim or snapshot;
// loads the key's learner (snapshot or fresh) on first use — off the
// worker's goroutine, up to four keys at once, while the worker's other
// keys go on; the key's later messages wait behind its load, in order, at
// most queue_size of them (worker_load.go, machine/load.go); skips the
// message if its stream sequence is at or below the key's last applied one
// (replay after a restore); Learns and Scores each observation
// (keymodel.Model.Apply, no I/O); queues each projection of a ready learner in the key's
// output queue, for the output subject template with Nats-Msg-Id
// "<pipeline>/<key>/<seq>" ("…/<seq>/<i>" within a batch). The output
// window (internal/machine/window.go) publishes them — asynchronously with JetStream when a
// stream captures the output subject, else with core NATS — one in flight
// per key (output.key_in_flight more through a lane, see Ordered lanes),
// in order, retrying a failed one before anything later of its key, and
// acks the input with its last output. Each worker has
// output.window/workers-per-partition outputs queued or in flight at
// most; a full window stops it taking input. An acker goroutine per
// worker waits for the PubAcks. Before a learner is ready the message is
// learned, acked and counted as warming.
//
// A pipeline with a classifier stage (classifier.go, internal/keymodel)
// also keeps, per key, a classifier on the ikpca learner's dictionary
// coordinates: Apply checks
// the labels with the vectors (a label that is no class is bad input,
// reason "label"), learns through the classifier so that its weights
// follow every change of coordinates, predicts each observation (pred and
// scores on its output) and only then learns its label. Its state is part
// of the key's snapshot (codec.Snapshot.Classifier), saved and restored
// with the learner's.
//
// Every rule a worker follows for its keys — the order of a key's
// messages, skipping by sequence, waiting for an unapplied earlier
// message, the tracker's holds, loading and unloading keys (LRU), the
// output window, when a snapshot is due and when it may be saved, what a
// landed save means, how a stop finishes — is one deterministic state
// machine per worker with no I/O (package processor/internal/machine, in
// the style of etcd raft's Step/Ready/Advance). The worker (worker.go)
// decodes and checks each message and steps the machine with it and with
// the result of everything it did (key loaded, learner applied, publish
// acknowledged or failed, save landed, tick, fence lost, input closed);
// it executes the machine's Ready in order: load a key, apply a message,
// publish an output, ack / nak / dead-letter an input, copy a key's state
// for a snapshot and save it (at once, or when the outputs it holds are
// acknowledged), unload a key, serve a control request. The machine is
// tested by scripts of events, including simulated runs over every
// failure pattern of publishes, saves and loads (machine_test.go).
//
// # Failures
//
// classify sorts errors: bad input (codec ErrMalformed/ErrTooLarge/
// ErrVersion, learners ErrDimension/ErrNonFinite/ErrNumerical, a label
// that is no class of the classifier stage, a recovered panic) is published to the dead-letter subject with headers
// Kpcastream-Error (reason; codec ErrTooManyValues is "dimension", not
// "too_large"), Kpcastream-Error-Detail, Kpcastream-Pipeline,
// Kpcastream-Key, Kpcastream-Subject, Kpcastream-Input-Subject and
// Kpcastream-Stream-Seq and the original payload — with JetStream, into the
// dead-letter stream that setup found or created (DeadLetterConfig), when
// one captures the subject — then terminated; the warn lines about dead
// letters are aggregated per worker (deadLetterLog); the learner is
// untouched (ErrNumerical within a batch keeps the observations
// learned before it, as a replay would). Transient failures are nak'ed
// with input.nak_delay. A failed output publish is retried after a backoff
// (20ms doubling to 1s), before anything later of its key, while the
// fence holds; its input stays unacknowledged, and a snapshot of the key
// handed over meanwhile is held until the outputs of every message it
// holds are acknowledged, so a restart replays them. Each (key, seq)'s
// outputs are thus published once, in order per key, up to retries that
// the output stream deduplicates by Nats-Msg-Id. Dead letters are fenced
// like outputs: a partition that lost its fence naks instead. A dead
// letter is sent synchronously (the worker steps nothing else meanwhile)
// and its input's hold stays in the replay tracker until the worker
// reports how it ended (machine.DeadLettered: stored, or given up after
// snapshot_timeout by the policy above; machine.DeadLetterFailed: the
// fence, or the worker's cancelled context, stopped it, and the machine
// naks the input): no checkpoint passes an input whose dead letter a
// crash or a fence may still stop (issue 28).
//
// A key's messages are applied in stream order, since skipping by last
// applied sequence depends on it: a message nak'ed before it was applied
// makes the key's later messages wait (nak, reason "waiting") until it is
// settled. A gap in the consumer's delivery sequence (deliveries lost with
// a connection, machine.Intake) makes the partition hand nothing more
// over and be taken again at once under a new epoch, whose consumer
// delivers from the checkpoint in order (the server would redeliver the
// lost ones only after ack_wait, possibly after later messages of their
// keys); deliveries lost at the tail of a lost connection and acks lost
// with it are caught once the connection is back and the partition idle
// with acks still pending at its consumer: it is taken again the same
// way (repullAfterReconnect). A key gives up waiting (logged at error) after
// max(3·ack_wait, 1m), for a message deleted from the stream meanwhile. A corrupt or incompatible snapshot refuses the
// key's messages (nak, logged at error) unless
// snapshot.on_corrupt_snapshot is "reset". An invalid learner
// configuration stops Run.
//
// # Ordered lanes
//
// With output.key_in_flight = N > 1 and a JetStream output stream that
// allows batch publishing, a key may have N outputs in flight. Each worker
// publishes through a lane (lane.go): a JetStream fast batch in gap-fail
// mode. Why each key's outputs still land in input order, each once:
//
//  1. A batch persists a prefix of what it carried, in batch order (the
//     server ends a batch at a missing or failed message and skips
//     duplicates; a batch it ended or dropped refuses every later message
//     of it, and one that opened with message 1 answered cannot open again).
//  2. A lane has one batch at a time. It ends it at the first sign of
//     trouble and learns the end from the stream itself (a PubAck with the
//     count persisted, or "unknown batch"), which comes after every earlier
//     message of the batch was processed; then it answers each of the
//     batch's messages (persisted, or failed — possibly persisted with the
//     acknowledgement lost). While a batch ends, and until the worker has
//     stepped its machine with every answer and executed what it asked for
//     meanwhile, the lane refuses sends at once. So the outputs of a key in
//     flight are always in one batch, sent in order, and a later output of
//     a key can never open a new batch before the machine knows an earlier
//     one failed.
//  3. The machine (internal/machine/window.go) sends a key's outputs in
//     rounds: the first failure of a round stops the key until all its
//     outputs in flight are answered; the next round sends again, in order,
//     everything not acknowledged, from the first one.
//
// By 1 and 3 each batch carries a key's outputs in order from the first not
// known to be persisted, and persists a prefix of them: when an output of
// the key first lands, every earlier one has landed (before this batch, or
// in its prefix); replays are dropped by Nats-Msg-Id. 2 makes 3's rounds
// line up with batches (with this lane, 2 alone already keeps a key from
// sending into a new batch before its outputs in flight are answered; the
// machine's stop in 3 is defence in depth, its rewind is needed). The rest
// of exactly-once (acks after outputs,
// snapshots held until their outputs are acknowledged) is unchanged. A
// stream that cannot carry a lane (no allow_batched, no_ack, or discarding
// new messages at its limits: a store that refuses one message and takes
// the next breaks 1) makes the pipeline fall back to one output in flight
// per key with a log line naming why. machine_test.go simulates lanes that
// end batches at every point and shows that each of three broken lane
// contracts (opening a batch before answering refused sends, queueing sends
// for the next batch, opening it before the worker settled the answers)
// reorders a key; window_faults_test.go and lane_test.go run real servers
// with lost publishes and answers, refused publishes, server restarts and
// connection resets.
//
// # Exactly-once state
//
// A snapshot records a key's state and last applied stream sequence. Each
// JetStream partition also keeps a checkpoint in the checkpoint bucket: the
// lowest sequence whose effect may not be in a saved snapshot (deliveries
// in flight or nak'ed, and each dirty key's first unsnapshotted sequence;
// see tracker). Workers skip per key what the key's snapshot already holds, so after
// a crash the state is exactly that of an uninterrupted run. Replayed
// outputs carry the same Nats-Msg-Id and are dropped by an output stream
// whose duplicates window covers the replay. The checkpoint is part of the
// partition's ownership record (below); on taking a partition its new
// consumer starts at the checkpoint.
//
// # Fenced ownership
//
// With Partitions = N > 1 the input stream transforms the subject with
// {{partition(N,k)}} of the key token (FNV-1a of the key mod N, the hash
// ownership.PartitionOf computes) appended as a last token; with N = 1 it has no
// transform. Any number of instances run the same configuration. The
// coordination bucket (checkpoint_bucket) holds a heartbeat
// "members.<id>" of each instance, put every lease_ttl/3 by a goroutine of
// its own (so that no blocking record write can hold it back), which names
// the pipelines the instance runs and their layouts (memberValue), and one
// record "partitions.<pipeline>.<n>" per partition: {owner, epoch,
// checkpoint}. Every instance watches the bucket and applies the pure rules
// of package processor/internal/ownership: a member is alive while its heartbeat is younger than
// lease_ttl — dated on arrival for updates, and, for the values already in
// the bucket when a watcher starts, by their server timestamps relative to
// the newest of them (Backdate), so a newcomer judges a crashed member and
// its unrenewed records exactly as the others do; a pipeline's partitions
// go only to the live members that run it under the layout of the one
// that has run it longest (Candidates; a heartbeat of an earlier version,
// without pipelines, counts for the pipelines whose records it owns); those
// get balanced shares, owners keeping theirs (AssignTargets), and Decide
// says whether to take, release or abandon each partition. Every change of
// a record is a compare-and-set on it: the owner renews it with the current
// checkpoint every min(lease_ttl/6, checkpoint_every); a member takes a
// released or missing partition, or one whose record has not moved for
// lease_ttl, by writing epoch+1. Each take or abandon runs on a goroutine
// of its own, one per record at a time, bounded by lease_ttl/4
// (takeTimeout), so that no coordination call holds up the others; takes
// and releases run to completion even when Run's ctx is cancelled: a take
// that lands after the stop began is released at once, a partition whose
// consumer could not start releases its record, and leaving releases every
// record that still names the member, read from the bucket stream's leader,
// so a stop of the whole fleet leaves nothing owned. (A KV Get is a direct
// get, which a replica behind the leader answers with an older value:
// where that matters the shell reads the leader, leaderGet, or drops a
// read older than what it has; processor/internal/sim/STALE.md.) The new owner deletes the consumers of earlier epochs,
// never a newer one's and only while its fence holds (and the single durable consumer of earlier versions, whose checkpoint
// "checkpoint.<stream>.<durable>" seeds a new single-partition record) and
// creates its own, "<durable>-p<n>-e<epoch>", at the checkpoint. Its pulls
// carry an idle heartbeat of lease_ttl/4 and expire after lease_ttl
// (pullTiming), so nats.go issues a pull lost with a server again within
// lease_ttl/2; a consume that ended for good, or that fails for lease_ttl
// without a delivery, revokes the fence and the partition is taken again
// under a new epoch.
//
// Every state write is fenced. A partition's fence (fence.go: the pure
// ownership.Lease on this process's monotonic clock) is ok while its last
// successful renewal was sent less than lease_ttl/2 ago and no newer
// epoch was seen; a reading that finds it expired revokes it, and a
// revoked fence stops the partition without further writes. Where it is
// decided:
//
//   - What a partition may still do is the worker machine's policy
//     (internal/machine): told FenceLost (the worker's loop sees the
//     fence's Lost channel close) or a save that landed Fenced, it emits
//     no effect — no load (a claim), apply, publish, ack, dead letter or
//     save — and naks every message it would have applied or settled. The
//     worker executes its Ready without asking.
//   - The worker reads the fence's clock once, on its publish path, at the
//     last moment before a message goes out (lastMoment: before each
//     output is sent, before each of a dead letter's attempts — a retry's
//     reading comes after the pause before it, publish.Retry), since
//     a lease can expire between the machine's decision and the send with
//     nothing yet revoked. A failed reading revokes the fence and tells
//     the machine. Outputs and dead letters carry Nats-Msg-Ids, so one
//     sent just before the expiry is dropped as a duplicate when the next
//     owner sends it again.
//   - Saves and claims read no fence: their compare-and-set on the key's
//     revision is their fence. The next owner claims a key (writes it
//     back with its epoch) before applying anything, so a stale owner's
//     save or claim that comes later conflicts, and one that lands
//     earlier holds only messages whose outputs were acknowledged — the
//     next owner loads it and skips what it holds. (The simulation,
//     internal/sim, checks that no snapshot of an ended epoch lands over
//     a newer epoch's, and counts those that land before.)
//   - The rest is the partition's lifecycle, in the lease's own code: the
//     renewal loop reads the fence when each renewal is due and revokes an
//     expired one (this turns an expiry into Lost for everyone);
//     a renewal and the final release read it after the checkpoint they
//     write, so a checkpoint read after a revocation is never written
//     (partition_lease.go); a new epoch's consumer is created, and earlier
//     epochs' consumers deleted, only while it holds (partition_consume.go);
//     and a stop whose lease expired meanwhile is a fenced stop — no drain,
//     no final snapshots (partition.go).
//
// Snapshots carry the writer's epoch: a worker loading a key
// refuses a snapshot of a newer epoch (the partition stops; unless the
// partition's record, read from the bucket stream's leader — not by a
// direct get, which a replica behind answers — still names its epoch: the
// snapshot then comes from another partition layout) or one naming
// another pipeline or key (corrupt), and claims any other (or a missing
// one) by writing it back with its own epoch (compare-and-set on the
// revision read) before it applies anything, so a stale owner's later save
// conflicts instead of overwriting acked work — and a read answered by a
// replica that has not applied the key's last save yet (a KV Get is a
// direct get, which any replica of an R3 bucket answers; a key unloaded
// and loaded again within an epoch met one) conflicts and is read again
// instead of restoring an older state (issue 28); a save that conflicts also stops the
// partition (it is never answered by reloading and dropping what was
// acked) — unless the stored snapshot is this epoch's own, no newer than
// the one being saved: an earlier save that landed with its answer lost
// (a connection cut), saved over again on its revision (issue 28). A graceful stop (Run's ctx cancelled, or the partition assigned
// to another member) drains the consumer, finishes the queued messages,
// writes the final snapshots and releases the record with the final
// checkpoint. Core NATS inputs are not fenced (epoch 0; a conflicting save
// unloads the key, which reloads the newer snapshot on its next message).
//
// Snapshots follow the policy (every N messages, every T, on shutdown, on
// unload); the worker hands a State copy to its snapshotter goroutine and
// never waits on the KV except to free a slot when unloading. A graceful
// stop waits (shutdown_timeout) for the queued outputs, except those whose
// publish was refused or failed three times, then saves the keys whose
// outputs are all acknowledged.
//
// # Bounded memory
//
// Each worker holds at most max(1, (memory_budget/partitions/workers −
// scratch)/size) learners, size being one key's fixed memory
// (keymodel.Model.Bytes: learner state, classifier stage, monitor,
// bookkeeping) and scratch the working memory its keys' learners share
// (learners.Scratch, given to a key's learner when it becomes resident:
// one key runs at a time), and at most its share
// ⌈max_keys/partitions⌉/workers of max_keys when that is set (memory.go);
// the least recently used one is snapshotted and unloaded, and loaded again
// on its next message. A key brought back while its unloading save is in
// flight unloads the next least recently used (machine.shrink), so the
// keys whose save is in flight are the only excess (at most the snapshot
// slots), and the learners of the keys being loaded (at most four a
// worker). With a local tier (local_dir, worker_local.go) a JetStream
// worker keeps the learners beyond its share in a file of its own on disk
// instead: the machine counts them as loaded (quota share/1 KiB), their
// snapshots follow the policy, and one comes back with a local read. Per
// message, memory is bounded by max_batch and the learner's dimension.
//
// # Operations
//
// Handler serves /metrics, /healthz, /readyz and the live page /ui/ with
// its JSON API /api/v1/ (internal/ops). A key's outputs are recorded for
// the page only while it is watched (ops.Watches): a request watches it
// for 30 s, the worker's hook (watchOut, views.go) then adds each output
// to the key's bounded record (internal/kpcaview) under the record's
// lock, and the record is dropped when the watch expires; unwatched, the
// hook is one atomic load. The keys list is a "keys" control request
// answered by each worker. The
// micro service
// (service_name, default "kpcastream") has endpoints <name>.stats (every
// pipeline run by a live member, each summed over the members that run
// it), <name>.pipelines (likewise), <name>.model, <name>.snapshot and
// <name>.reset; the first two take an optional {"pipeline":"…"}, the last
// three {"pipeline":"…","key":"…"}, forwarded to the member owning the
// key's partition — for a pipeline configured only on other members too,
// found from their heartbeats — so that any member, of any deployment
// sharing the service name and bucket, answers alike. <name>.i.<member>.*
// are one instance's own endpoints. Errors carry the service error codes
// of ops.StatusOf: 400, 404, 409, 503, 500 (a key with no learner is
// 404, a fenced partition 503: the shell marks its errors so, ops.Mark).
// Requests that arrive while Run stops are answered 503.
package processor
