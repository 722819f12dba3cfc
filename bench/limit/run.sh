#!/bin/sh
# The processor at the messaging limit (issue 20): one nats-server in its own process (built from the
# module's nats-server version, file store in a temporary directory), then
#   1. natscli's reference figures, when `nats` is on PATH (go install github.com/nats-io/natscli/nats@v0.5.1):
#      asynchronous deduplicated JetStream publish, durable consumer with acks, synchronous publish;
#   2. `kpcastream bench` against that server: raw nats.go baseline, pass-through processor and ikpca,
#      directly and over a simulated 1 ms round trip, in one table;
#   3. BenchmarkScaleOut W=1 (its own embedded server; processes started by the test), unless SCALEOUT=0.
# Extra arguments go to `kpcastream bench` (e.g. --count 50000 --duration 3s).
#
#   bench/limit/run.sh            (from the module root)
set -eu
OUT=${OUT:-$(mktemp -d /tmp/kpcastream-limit.XXXXXX)}
PORT=${PORT:-4333}
URL=nats://127.0.0.1:$PORT
go build -o "$OUT/nats-server" github.com/nats-io/nats-server/v2
go build -o "$OUT/kpcastream" ./cmd/kpcastream
"$OUT/nats-server" -js -sd "$OUT/store" -a 127.0.0.1 -p "$PORT" >"$OUT/nats-server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT INT TERM
sleep 1
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load:$(cut -d' ' -f1-3 /proc/loadavg)"
if command -v nats >/dev/null; then
	echo "# natscli $(nats --version), nats-server $("$OUT/nats-server" --version)"
	nats -s "$URL" bench js pub async benchsubject --create --dedup --purge --msgs 200000 --no-progress 2>&1 | grep 'stats:'
	nats -s "$URL" bench js consume --msgs 200000 --no-progress 2>&1 | grep 'stats:'
	nats -s "$URL" bench js pub sync benchsubject --dedup --purge --msgs 10000 --no-progress 2>&1 | grep 'stats:'
else
	echo "# nats (natscli) not on PATH: no reference figures"
fi
"$OUT/kpcastream" bench --nats-url "$URL" --progress 0 "$@"
echo "# load:$(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${SCALEOUT:-1}" != 0 ]; then
	go test ./internal/proctest -run '^$' -bench 'ScaleOut/W=1$' -benchtime 1x | grep 'msgs/s'
fi
