#!/usr/bin/env bash
# Scale-out and messaging-limit figures on a bigger machine without Go: every
# program comes prebuilt in BIN (default .devbin). Build them here with
#
#   go build -ldflags='-s -w' -o .devbin/nats-server github.com/nats-io/nats-server/v2
#   go build -ldflags='-s -w' -o .devbin/kpcastream ./cmd/kpcastream
#   go test -c -ldflags='-s -w' -o .devbin/proctest.test ./internal/proctest
#   go install github.com/nats-io/natscli/nats@v0.5.1 && cp ~/go/bin/nats .devbin/
#
# and run it from the repository root: bench/device/scale.sh [OUTDIR]. It
# starts a nats-server in its own process (file store in a temporary
# directory), then measures in order: natscli's asynchronous deduplicated
# JetStream publish (the messaging limit), `kpcastream bench` (raw relay,
# pass-through processor, ikpca pipeline; 64 keys at 0 and 1 ms round
# trip, 1 key at 0), and BenchmarkScaleOut with W "kpcastream run"
# processes (SCALE_WORKERS, default 1,2,4,8) sharing SCALE_PARTITIONS
# (default 16) partitions; PROFILE=W adds one more ScaleOut run with W
# processes and 400,000 messages while the server's CPU is profiled;
# SKIP_BENCH=1 skips natscli and kpcastream bench.
set -euo pipefail
BIN=${BIN:-.devbin}
OUT=${1:-/tmp/scale-out}
mkdir -p "$OUT"
BIN=$(cd "$BIN" && pwd)
store=$(mktemp -d)
url=nats://127.0.0.1:4333
"$BIN/nats-server" -js -sd "$store" -a 127.0.0.1 -p 4333 --profile 6061 >"$OUT/nats-server.log" 2>&1 &
ns=$!
trap 'kill $ns 2>/dev/null; rm -rf "$store"' EXIT
sleep 1
echo "== machine: $(nproc) cores, $(uname -r)"
if [ -z "${SKIP_BENCH:-}" ]; then
echo "== natscli: async deduplicated JetStream publish (one client), then 4 clients"
"$BIN/nats" -s $url bench js pub async benchsubject --create --dedup --purge --msgs 500000 --no-progress 2>&1 | grep -E 'stats|Pub' || true
"$BIN/nats" -s $url bench js pub async benchsubject --create --dedup --purge --msgs 500000 --clients 4 --no-progress 2>&1 | grep -E 'stats|Pub' || true
"$BIN/nats" -s $url stream rm -f benchstream >/dev/null 2>&1 || true
echo "== kpcastream bench, 64 keys"
"$BIN/kpcastream" bench --nats-url $url --progress 0 --count 100000 --duration 5s --keys 64 2>&1
echo "== kpcastream bench, 1 key"
"$BIN/kpcastream" bench --nats-url $url --progress 0 --count 50000 --duration 5s --keys 1 --rtt 0 2>&1
fi
echo "== BenchmarkScaleOut, server in its own process"
KPCASTREAM_BIN="$BIN/kpcastream" KPCASTREAM_SCALE_URL=$url \
KPCASTREAM_SCALE_WORKERS=${SCALE_WORKERS:-1,2,4,8} KPCASTREAM_SCALE_PARTITIONS=${SCALE_PARTITIONS:-16} \
KPCASTREAM_SCALE_MSGS=${SCALE_MSGS:-100000} KPCASTREAM_SCALE_KEYS=${SCALE_KEYS:-256} \
  "$BIN/proctest.test" -test.run '^$' -test.bench ScaleOut -test.benchtime 1x -test.count ${SCALE_COUNT:-2} 2>&1 | grep -E 'Benchmark|ok|FAIL|---' 
if [ -n "${PROFILE:-}" ]; then
  echo "== the server's CPU profile (8 s) during BenchmarkScaleOut W=${PROFILE}: $OUT/server.pprof"
  (sleep 5; python3 -c 'import sys,urllib.request; open(sys.argv[2],"wb").write(urllib.request.urlopen(sys.argv[1]).read())' \
    "http://127.0.0.1:6061/debug/pprof/profile?seconds=8" "$OUT/server.pprof") &
  KPCASTREAM_BIN="$BIN/kpcastream" KPCASTREAM_SCALE_URL=$url KPCASTREAM_SCALE_WORKERS=$PROFILE \
  KPCASTREAM_SCALE_PARTITIONS=${SCALE_PARTITIONS:-16} KPCASTREAM_SCALE_MSGS=400000 KPCASTREAM_SCALE_KEYS=${SCALE_KEYS:-256} \
    "$BIN/proctest.test" -test.run '^$' -test.bench ScaleOut -test.benchtime 1x 2>&1 | grep -E 'Benchmark|FAIL|---'
  wait
fi
