// Package proctest holds process-level fault tests of kpcastream: they
// build the binary, run several "kpcastream run" processes against one
// embedded nats-server, and kill (SIGKILL), freeze (SIGSTOP) and resume
// (SIGCONT) them in the middle of a stream, then check from outside — the
// snapshots, the coordination bucket and the output stream — that every
// key's state equals an uninterrupted run's and every output is there
// once. Each test is bounded in time and skipped under -short.
//
// The same faults run with keys far beyond the live set (issue 30; a
// small memory_budget, the local tier under data_dir), so that eviction
// to disk, reads back from it and restores from the snapshots all happen
// under them: TestKillOwnerManyKeys (SIGKILL), TestPausedOwnerManyKeys
// (SIGSTOP), TestServerRestartManyKeys (the NATS server stopped and
// started again) and TestClusterNodeLossManyKeys (the server leading the
// coordination bucket of a 3-server cluster SIGKILLed and started again).
// The last two also check, from each worker's /metrics and debug log,
// that the tier spilled and read back after the fault and that the
// partitions taken again restored keys from their snapshots:
//
//	go test ./internal/proctest -run ManyKeys -v
//
// Its one reason to change is which process-level faults are tested and how.
package proctest
