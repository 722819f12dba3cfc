#!/usr/bin/env bash
# Sharded pipelines on a 3-node NATS cluster in one machine (issue 29, item 4).
# Every program comes prebuilt in BIN (default .devbin; the machine needs no Go):
#
#   go build -ldflags='-s -w' -o .devbin/nats-server github.com/nats-io/nats-server/v2
#   go build -ldflags='-s -w' -o .devbin/kpcastream ./cmd/kpcastream
#   go test -c -ldflags='-s -w' -o .devbin/proctest.test ./internal/proctest
#   cp ~/go/bin/nats .devbin/        # natscli v0.5.1 (go install github.com/nats-io/natscli/nats@v0.5.1)
#
# Run from the repository root: bench/device/cluster.sh [OUTDIR]. For each
# replica count R (REPLICAS) and shard count S (SHARDS) it starts three
# nats-server processes as one cluster (file store in a temporary
# directory, tagged srv:0..2; with S > 1 every server has the subject
# mappings that partition the inputs: README, Sharding) and measures, in
# this order:
#   1. anchor: natscli's asynchronous deduplicated JetStream publish into S
#      streams at once (one natscli per stream, connected to the server the
#      stream is placed on: R1 streams pinned by tag, R3 leaders stepped
#      down onto n0..n2), summed;
#   2. kpcastream bench --mode raw,bare --input concurrent --shards S: the raw
#      relay (consume → publish → ack, one consumer per shard stream) and the
#      processor with a pass-through learner, input published while they
#      consume, in one process;
#   3. BenchmarkScaleOutShards: W `kpcastream run` processes (WORKERS, each
#      GOMAXPROCS=PROCS with workers: PROCS) sharing PARTS partitions over S
#      shard streams, input published concurrently, for each learner of
#      LEARNERS: light (ikpca d 3 B 16 k 2, KEYS_LIGHT keys) and cpu (ikpca
#      d 64 B 400 k 16, KEYS_CPU keys).
# The cluster is restarted empty for every (R, S). Figures go to stdout and
# OUTDIR/results.tsv (kind, R, S, W, learner, msgs/s, in-msgs/s); raw outputs
# and server logs to OUTDIR. Defaults are the 16-core run, about 15 minutes
# in all: a device command is limited to 10, so run it in parts, one call
# each, e.g.
#   REPLICAS=1 SHARDS=1,3 bench/device/cluster.sh $OUT/r1   (then SHARDS=6 if S=3 grew)
#   REPLICAS=3 SHARDS=1,3 bench/device/cluster.sh $OUT/r3
# (LEARNERS=light or cpu halves a part again). For a small machine, e.g.:
#   PARTS=6 SHARDS=1,3 WORKERS=1,2 MSGS=10000 BENCH_COUNT=10000 NATS_MSGS=50000 LEARNERS=light bench/device/cluster.sh
set -euo pipefail
BIN=${BIN:-.devbin}
OUT=${1:-/tmp/cluster-bench}
SHARDS=${SHARDS:-1,3,6}
REPLICAS=${REPLICAS:-1,3}
WORKERS=${WORKERS:-1,2,4,8}
PARTS=${PARTS:-12}           # divisible by every S
PROCS=${PROCS:-2}
MSGS=${MSGS:-200000}         # per BenchmarkScaleOutShards run, light learner
MSGS_CPU=${MSGS_CPU:-50000}  # per run, CPU-bound learner
BENCH_COUNT=${BENCH_COUNT:-200000}
NATS_MSGS=${NATS_MSGS:-500000}  # per natscli stream
LEARNERS=${LEARNERS:-light,cpu}
KEYS_LIGHT=${KEYS_LIGHT:-256}
KEYS_CPU=${KEYS_CPU:-32}
SYNC=${SYNC:-}               # jetstream sync_interval ("always" to fsync every write); empty: the server's default
PORT0=${PORT0:-4250}
mkdir -p "$OUT"
BIN=$(cd "$BIN" && pwd)
for p in nats-server nats kpcastream proctest.test; do
  [ -x "$BIN/$p" ] || { echo "missing $BIN/$p (see the header of $0)" >&2; exit 2; }
done
work=$(mktemp -d)
pids=()
urls="nats://127.0.0.1:$PORT0,nats://127.0.0.1:$((PORT0 + 1)),nats://127.0.0.1:$((PORT0 + 2))"
url_of() { echo "nats://127.0.0.1:$((PORT0 + $1))"; }
stop_cluster() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  pids=()
  rm -rf "$work"/n*
}
trap 'stop_cluster; rm -rf "$work"' EXIT

# start_cluster MAPPED: three servers; MAPPED=1 adds the partition mappings
# of the shard streams (pin.* for the processes, bench.{r,a,b}0.in.* for
# kpcastream bench's phases).
start_cluster() {
  stop_cluster
  local i routes="" maps=""
  for i in 0 1 2; do routes="$routes${routes:+, }nats-route://127.0.0.1:$((PORT0 + 100 + i))"; done
  if [ "$1" = 1 ]; then
    maps="mappings: {
  \"pin.*\": \"pin.{{wildcard(1)}}.{{partition($PARTS,1)}}\"
  \"bench.r0.in.*\": \"bench.r0.in.{{wildcard(1)}}.{{partition($PARTS,1)}}\"
  \"bench.a0.in.*\": \"bench.a0.in.{{wildcard(1)}}.{{partition($PARTS,1)}}\"
  \"bench.b0.in.*\": \"bench.b0.in.{{wildcard(1)}}.{{partition($PARTS,1)}}\"
}"
  fi
  for i in 0 1 2; do
    mkdir -p "$work/n$i"
    cat >"$work/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$((PORT0 + i))
server_tags: ["srv:$i"]
jetstream {
  store_dir: "$work/n$i"
  max_file_store: 200G
  ${SYNC:+sync_interval: $SYNC}
}
cluster {
  name: bench
  listen: 127.0.0.1:$((PORT0 + 100 + i))
  routes: [$routes]
}
$maps
EOF
    "$BIN/nats-server" -c "$work/n$i.conf" >>"$OUT/n$i.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 60); do
    "$BIN/nats" -s "$urls" account info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "cluster not ready after 30 s (logs in $OUT)" >&2
  exit 1
}

# place_leader STREAM I: the leader of an R3 stream onto n<I>.
place_leader() {
  "$BIN/nats" -s "$urls" stream cluster step-down "$1" --preferred "n$2" >/dev/null 2>&1 || true
}

tsv() { printf '%s\n' "$*" | tr ' ' '\t' >>"$OUT/results.tsv"; }
printf 'kind\tR\tS\tW\tlearner\tmsgs/s\tin-msgs/s\n' >"$OUT/results.tsv"
echo "== machine: $(nproc) cores, $(uname -r); PARTS=$PARTS PROCS=$PROCS sync_interval=${SYNC:-default}"

IFS=, read -ra Rs <<<"$REPLICAS"
IFS=, read -ra Ss <<<"$SHARDS"
IFS=, read -ra Ls <<<"$LEARNERS"
for R in "${Rs[@]}"; do
  for S in "${Ss[@]}"; do
    mapped=0
    [ "$S" -gt 1 ] && mapped=1
    start_cluster $mapped
    tags=""
    [ "$R" = 1 ] && tags="srv:0,srv:1,srv:2"

    echo "== R$R S=$S: natscli async deduplicated publish into $S stream(s)"
    for ((s = 0; s < S; s++)); do
      place=()
      [ "$R" = 1 ] && place=(--tag "srv:$((s % 3))")
      "$BIN/nats" -s "$urls" stream add "benchstream-$s" --subjects "benchsub.$s" --replicas "$R" "${place[@]}" \
        --storage file --dupe-window 2m --defaults >/dev/null
      [ "$R" -gt 1 ] && place_leader "benchstream-$s" $((s % 3))
    done
    for ((s = 0; s < S; s++)); do
      "$BIN/nats" -s "$(url_of $((s % 3)))" bench js pub async "benchsub.$s" --stream "benchstream-$s" --dedup \
        --msgs "$NATS_MSGS" --no-progress >"$OUT/natscli-R$R-S$S-$s.txt" 2>&1 &
    done
    wait_ok=0
    for j in $(jobs -p); do
      case " ${pids[*]} " in *" $j "*) ;; *) wait "$j" || wait_ok=1 ;; esac
    done
    rate=0
    for ((s = 0; s < S; s++)); do
      r=$(grep -oE '[0-9,]+ msgs/sec' "$OUT/natscli-R$R-S$S-$s.txt" | head -1 | tr -d ', ' | sed 's/msgs\/sec//')
      rate=$((rate + ${r:-0}))
    done
    echo "natscli R$R S=$S: $rate msgs/s (summed over $S concurrent publishers; exit status $wait_ok)"
    tsv natscli "$R" "$S" - - "$rate" -
    for ((s = 0; s < S; s++)); do "$BIN/nats" -s "$urls" stream rm -f "benchstream-$s" >/dev/null 2>&1 || true; done

    echo "== R$R S=$S: kpcastream bench, raw relay and pass-through processor, input arriving concurrently"
    "$BIN/kpcastream" bench --nats-url "$urls" --progress 0 --mode raw,bare --rtt 0 --input concurrent \
      --count "$BENCH_COUNT" --duration 0 --keys "$KEYS_LIGHT" --shards "$S" --partitions "$PARTS" --replicas "$R" \
      ${tags:+--placement-tags "$tags"} 2>&1 | tee "$OUT/bench-R$R-S$S.txt"
    for ph in raw bare; do
      r=$(awk -v p="$ph" '$1 == p && $2 == "0" {print $4; exit}' "$OUT/bench-R$R-S$S.txt")
      tsv "$ph" "$R" "$S" 1 pass "${r:-?}" -
    done

    for L in "${Ls[@]}"; do
      case $L in
        light) lc=3,16,2 keys=$KEYS_LIGHT msgs=$MSGS ;;
        cpu) lc=64,400,16 keys=$KEYS_CPU msgs=$MSGS_CPU ;;
        *) echo "LEARNERS: light or cpu, got $L" >&2; exit 2 ;;
      esac
      echo "== R$R S=$S: $L learner, W kpcastream run processes ($WORKERS)"
      (sleep 20; "$BIN/nats" -s "$urls" stream report >"$OUT/streams-R$R-S$S-$L.txt" 2>&1 || true) &
      KPCASTREAM_BIN="$BIN/kpcastream" KPCASTREAM_SCALE_URL="$urls" KPCASTREAM_SCALE_SHARDS="$S" \
      KPCASTREAM_SCALE_WORKERS="$WORKERS" KPCASTREAM_SCALE_PARTITIONS="$PARTS" KPCASTREAM_SCALE_REPLICAS="$R" \
      KPCASTREAM_SCALE_LEARNER="$lc" KPCASTREAM_SCALE_KEYS="$keys" KPCASTREAM_SCALE_MSGS="$msgs" \
      KPCASTREAM_SCALE_PROCS="$PROCS" KPCASTREAM_SCALE_TAGS="$tags" \
        "$BIN/proctest.test" -test.run '^$' -test.bench ScaleOutShards -test.benchtime 1x 2>&1 |
        tee "$OUT/run-R$R-S$S-$L.txt" | grep -E '^Benchmark|FAIL|---' || true
      awk -v R="$R" -v L="$L" '/^BenchmarkScaleOutShards\/S=/ {
          split($1, a, "[/=-]"); s = a[3]; w = a[5]; m = ""; im = ""
          for (i = 1; i <= NF; i++) { if ($(i+1) == "msgs/s") m = $i; if ($(i+1) == "in-msgs/s") im = $i }
          printf "run\t%s\t%s\t%s\t%s\t%s\t%s\n", R, s, w, L, m, im }' "$OUT/run-R$R-S$S-$L.txt" >>"$OUT/results.tsv"
    done
  done
done
echo "== results ($OUT/results.tsv)"
column -t -s $'\t' "$OUT/results.tsv" 2>/dev/null || cat "$OUT/results.tsv"
