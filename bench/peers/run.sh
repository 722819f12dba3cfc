#!/bin/sh
# Peers side by side: installs Debian's python3-sklearn, builds kpcastream and the similarity tool,
# writes the shared CSVs to $OUT (default /tmp/kpcastream-peers) and prints the tables of RESULTS.md.
#
#   bench/peers/run.sh            (from the module root; set KPCASTREAM_DATA to the shared data dir if needed)
set -eu
OUT=${OUT:-/tmp/kpcastream-peers}
PY=${PY:-/usr/bin/python3}  # Debian's python, where python3-sklearn installs
if ! "$PY" -c 'import sklearn, numpy' 2>/dev/null; then
	apt-get update
	apt-get install -y python3-sklearn
fi
mkdir -p "$OUT"
go build -o "$OUT/kpcastream" ./cmd/kpcastream
go build -o "$OUT/similarity" ./bench/cmd/similarity
exec "$PY" "$(dirname "$0")/peer.py" all "$OUT" "$OUT/kpcastream" "$OUT/similarity"
