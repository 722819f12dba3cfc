// Package sim is a deterministic simulation of a kpcastream fleet, in the
// spirit of FoundationDB's simulator and TigerBeetle's VOPR: members,
// partitions, their consumers with redelivery, the coordination bucket
// with compare-and-set and revisions, the snapshot store, the input stream
// and the output stream with its duplicate window — all in one goroutine,
// on a simulated clock, every choice drawn from one seeded PRNG, so a seed
// replays bit for bit.
//
// It drives the real pure code of the processor: the worker's state
// machine and replay tracker (internal/machine: Machine, Tracker, Intake)
// and the ownership rules (internal/ownership: Candidates, AssignTargets,
// Decide, Backdate, Lease). The I/O shell around them (processor's
// coordinator, partition and worker) is modelled here action for action
// on fakes of its ports: where the shell decides something (the order of
// a renewal's checkpoint read and its fence check, what a failed look-up
// of lost deliveries does, how takes are scheduled, where the fence's
// clock is read: by the renewals and, in a worker, only at the last
// moment before an output goes out), the model follows the shell's code,
// and a change of one is made in the other.
//
// Faults: member crash and restart, pauses past the lease (zombies),
// delay and loss on every link (deliveries, acks, naks, publishes and
// their PubAcks, KV replies, watch updates), a server down per service
// (calls time out, then fail; sometimes a rolling outage: the output
// stream down past ack_wait, then the snapshot store, so that dead
// letters are retried while their inputs come again, whose keys then
// fail to load), compare-and-set conflicts, lost replies of
// writes that landed (a save's among them: the shell's worker.ambiguous
// then saves again over its own epoch's earlier save, modelled here),
// slow disks, clock skew between members, and reads answered by a
// replica behind the bucket's leader (stale.go: a KV or snapshot get may
// return any earlier committed version within a bounded lag, even of a
// key the member just wrote; compare-and-set still decides at the
// latest; the snapshot store's large snapshots are objects named by
// manifests, and its read back after a commit whose answer was lost —
// sometimes with its connection, known at once — decides whether the
// object is deleted, and a load reads an object again while a replica
// behind answers not found: store.go). After
// every run it checks: each bad input (refused at decoding, by the
// learner, or numerically after learning part of it) dead-lettered
// unless the shell gave its dead letter up by policy; each input applied
// exactly once per key, in order
// (every output carries the key's state after its input; the final
// snapshots equal a fault-free run); outputs once and in per-key order;
// no output sent under an ended epoch, and no snapshot of an ended epoch
// landing over a newer epoch's (saves and claims are fenced by their
// compare-and-set, not by a reading of the lease: one that lands before
// the newer owner claims its key is allowed, and counted); and every
// partition owned and drained within a bound after the last fault.
//
// Its one reason to change is what the fleet is checked against: the
// faults it simulates, the invariants, and the model of the shell (which
// follows the shell's code).
package sim
