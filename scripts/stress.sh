#!/usr/bin/env bash
# stress.sh — run the process-level and cluster tests N times under CPU
# stress: each test binary with GOMAXPROCS limited, while BUSY busy loops
# compete for the cores. A test that fails once under load is a product
# bug until a root cause says otherwise: the script never retries, it
# counts every failure and fails when there is one.
#
#   scripts/stress.sh                      # 5 runs of the default tests
#   N=50 scripts/stress.sh                 # 50 runs
#   N=2 RUN='TestClusterElastic|TestKillWithPublishesInFlight' scripts/stress.sh   # what CI runs
#
# Environment (defaults in brackets):
#   N       runs of each test binary [5]
#   RUN     go test -run pattern [TestClusterElastic|TestKillWithPublishesInFlight|TestPausedOwner|TestJoinAfterKill]
#   PKGS    packages [./internal/clustertest ./internal/proctest ./processor]
#   PROCS   GOMAXPROCS of the tests [2]
#   BUSY    busy loops beside them [2]
#   TIMEOUT go test -timeout of one run [15m]
#   LOGDIR  where each failing run's output is kept [a temporary directory, printed]
#   KEEP    1: keep every run's output, passing runs' too (to count what a
#           passing run logs, e.g. TestClusterElastic's unanswered requests) [0]
set -uo pipefail
cd "$(dirname "$0")/.."

N=${N:-5}
RUN=${RUN:-'TestClusterElastic|TestKillWithPublishesInFlight|TestPausedOwner|TestJoinAfterKill'}
PKGS=${PKGS:-./internal/clustertest ./internal/proctest ./processor}
PROCS=${PROCS:-2}
BUSY=${BUSY:-2}
TIMEOUT=${TIMEOUT:-15m}
LOGDIR=${LOGDIR:-$(mktemp -d)}
mkdir -p "$LOGDIR" || { echo "cannot create LOGDIR $LOGDIR"; exit 1; }
KEEP=${KEEP:-0}
bindir=$(mktemp -d)

busy=()
cleanup() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$bindir"
}
trap cleanup EXIT

# Build each package's test binary once.
for pkg in $PKGS; do
  name=$(echo "$pkg" | tr '/.' '__')
  go test -c -o "$bindir/$name.test" "$pkg" || { echo "build $pkg failed"; exit 1; }
done

for _ in $(seq "$BUSY"); do
  ( while :; do :; done ) &
  busy+=($!)
done
echo "stress: $N runs of -run '$RUN' in $PKGS, GOMAXPROCS=$PROCS beside $BUSY busy loops; failing logs in $LOGDIR"

fails=0
runs=0
for i in $(seq "$N"); do
  for pkg in $PKGS; do
    name=$(echo "$pkg" | tr '/.' '__')
    log="$LOGDIR/$name.$i.log"
    start=$(date +%s)
    # Each test binary runs in its package directory, as go test does.
    if (cd "$pkg" && GOMAXPROCS=$PROCS "$bindir/$name.test" -test.run "$RUN" -test.count=1 -test.timeout "$TIMEOUT" -test.v >"$log" 2>&1); then
      status=ok
      [ "$KEEP" = 1 ] || rm -f "$log"
    else
      status=FAIL
      fails=$((fails + 1))
    fi
    runs=$((runs + 1))
    line="run $i $pkg: $status ($(( $(date +%s) - start ))s, load average $(cut -d' ' -f1-3 /proc/loadavg))"
    if [ "$status" = FAIL ]; then
      line="$line; $(grep -m3 -- '--- FAIL' "$log" | tr '\n' ' ')log $log"
    fi
    echo "$line"
  done
done
echo "stress: $fails failing of $runs package runs ($N runs of each)"
[ "$fails" -eq 0 ]
