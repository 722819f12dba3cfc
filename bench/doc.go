// Package bench holds kpcastream's performance measurements that are not
// ordinary unit benchmarks: the learner floor table (TestFloor, run with
// KPCASTREAM_BENCH=1), the learners' memory check, the peer comparison with
// scikit-learn (peers/) and the similarity tool used by it (cmd/similarity).
// The end-to-end benchmark behind "kpcastream bench" is bench/e2e;
// limit/run.sh puts it next to natscli's figures for the same server
// (issue 20's measurement of the messaging limit). bench/monitor is the
// process-monitoring benchmark (issue 21: batch KPCA, linear PCA and the
// online learner with its monitor on a simulated nonlinear process with
// faults). RESULTS.md
// records the figures and the commands that produced them. Process
// measurements (CPU, RSS, run-queue delay) are in internal/procstat.
//
// Its one reason to change is how kpcastream's performance is measured
// outside the ordinary unit benchmarks (the floor table, the memory check,
// the peer comparison).
package bench
