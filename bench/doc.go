// Package bench holds kpcastream's performance measurements that are not
// ordinary unit benchmarks: the learner floor table (TestFloor, run with
// KPCASTREAM_BENCH=1), the peer comparison with scikit-learn (peers/) and
// the similarity tool used by it (cmd/similarity). RESULTS.md records the
// figures and the commands that produced them.
//
// The package has no API of its own beyond process measurements shared by
// its tests and tools: ProcessCPU, ProcessRSS, ProcessRunDelay (time the
// process's threads waited in the OS run queue) and MachineCPU (CPU time of
// the whole machine, to tell how much other processes used).
package bench
