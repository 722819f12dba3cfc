// Package proctest holds process-level fault tests of kpcastream: they
// build the binary, run several "kpcastream run" processes against one
// embedded nats-server, and kill (SIGKILL), freeze (SIGSTOP) and resume
// (SIGCONT) them in the middle of a stream, then check from outside — the
// snapshots, the coordination bucket and the output stream — that every
// key's state equals an uninterrupted run's and every output is there
// once. Each test is bounded in time and skipped under -short.
//
// Its one reason to change is which process-level faults are tested and how.
package proctest
