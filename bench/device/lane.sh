#!/usr/bin/env bash
# One key and 64 keys with one output in flight per key and through ordered
# lanes (output.key_in_flight 128), on one machine in one call, a
# nats-server in its own process. Programs prebuilt in BIN as for
# scale.sh. Run from the repository root: bench/device/lane.sh [OUTDIR].
set -euo pipefail
BIN=${BIN:-.devbin}
OUT=${1:-/tmp/lane-out}
mkdir -p "$OUT"
BIN=$(cd "$BIN" && pwd)
store=$(mktemp -d)
url=nats://127.0.0.1:4333
"$BIN/nats-server" -js -sd "$store" -a 127.0.0.1 -p 4333 >"$OUT/nats-server.log" 2>&1 &
ns=$!
trap 'kill $ns 2>/dev/null; rm -rf "$store"' EXIT
sleep 1
echo "== machine: $(nproc) cores"
for keys in 1 64; do
  rtt=0,1ms
  [ "$keys" = 64 ] && rtt=0
  for kif in 128 1; do
    echo "== keys $keys, key_in_flight $kif"
    "$BIN/kpcastream" bench --nats-url $url --progress 0 --count 50000 --duration 4s --keys $keys --rtt $rtt \
      --key-in-flight $kif 2>&1 | sed -n '/^phase /,/^raw = /p' | grep -v '^raw = '
  done
done
