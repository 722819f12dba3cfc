#!/usr/bin/env bash
# Key cardinality on the lent machine (issue 30, RESULTS §18): kpcastream bench at 64 and 20,000
# interleaved keys, the pass-through and the ikpca pipeline, with the binaries prebuilt in BIN
# (default .devbin; the machine needs no Go), gzip'ed to fit the carry limit:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/kpcastream ./cmd/kpcastream
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/nats-server github.com/nats-io/nats-server/v2
#   gzip -9 .devbin/kpcastream .devbin/nats-server     # (and a kpcastream-before to compare)
# Which runs: PART=compare (every binary kpcastream*.gz at 64 and 20,000 keys, W workers),
# PART=rss (20,000 keys, 128 MiB, a nats-server of its own so the process's RSS is the
# processor's), PART=realistic (ikpca d=16 k=8 B=64 at 64 and 20,000 keys), PART=scale (W = 1…8
# workers at 64 and 20,000 keys, both pipelines; a realistic learner at W 1 and 8; 100,000 keys at
# W 8; the whole part ends by DEADLINE seconds, the runs that would not fit are skipped and say so).
# Outputs go to OUT (one file per run). Each run is bounded by LIMIT seconds.
set -u
BIN=${BIN:-.devbin}
OUT=${OUT:-bench/out}
PART=${PART:-compare}
W=${W:-2}
LIMIT=${LIMIT:-150}
mkdir -p "$OUT" /tmp/kbin
for f in "$BIN"/*.gz; do
	[ -e "/tmp/kbin/$(basename "$f" .gz)" ] || gunzip -c "$f" >"/tmp/kbin/$(basename "$f" .gz)"
done
chmod +x /tmp/kbin/*
small="--components 2 --budget 16 --dim 16"
common="--rtt 0 --progress 0 --idle-timeout 60s --workers $W"
DEADLINE=${DEADLINE:-0}
run() { # name, binary, args…
	local name=$1 bin=$2 limit=$LIMIT
	shift 2
	if [ "$DEADLINE" -gt 0 ]; then
		[ $((DEADLINE - SECONDS)) -lt "$limit" ] && limit=$((DEADLINE - SECONDS))
		if [ "$limit" -lt 20 ]; then
			echo "== $name: skipped, $((DEADLINE - SECONDS)) s left of the deadline"
			return
		fi
	fi
	echo "== $name: $bin bench $* (limit $limit s)" | tee "$OUT/$name.txt"
	local t0=$SECONDS
	timeout "$limit" "/tmp/kbin/$bin" bench "$@" >>"$OUT/$name.txt" 2>&1
	echo "rc $? in $((SECONDS - t0)) s" | tee -a "$OUT/$name.txt"
	grep -E '^(bare|ikpca) ' "$OUT/$name.txt" | head -4
}
case $PART in
compare)
	for bin in $(cd /tmp/kbin && ls kpcastream*); do
		for keys in 64 20000; do
			run "$bin-k$keys-w$W" "$bin" --mode bare,pipeline --warmup 4 $small --count 60000 $common --keys $keys
		done
	done
	;;
rss)
	/tmp/kbin/nats-server -js -sd /tmp/ns -p 4333 -a 127.0.0.1 >"$OUT/nats-server.log" 2>&1 &
	ns=$!
	sleep 2
	run "rss-k20000-128MiB-w$W" kpcastream --mode pipeline --warmup 4 $small --count 60000 $common --keys 20000 \
		--memory 128MiB --nats-url nats://127.0.0.1:4333
	echo "nats-server RSS: $(grep VmRSS /proc/$ns/status)" | tee -a "$OUT/rss-k20000-128MiB-w$W.txt"
	kill $ns
	;;
scale)
	small1="$small --rtt 0 --progress 0 --idle-timeout 30s --duration 20s"
	for w in 1 8 2 4; do
		for keys in 64 20000; do
			run "scale-k$keys-w$w" kpcastream --mode bare,pipeline --warmup 4 $small1 --count 60000 --workers $w --keys $keys
		done
	done
	for w in 1 8; do
		run "realistic-k20000-w$w" kpcastream --mode pipeline --warmup 2 --components 8 --budget 64 --dim 16 \
			--count 20000 --rtt 0 --progress 0 --idle-timeout 30s --duration 20s --workers $w --keys 20000
	done
	run "scale-k100000-w8" kpcastream --mode bare,pipeline --warmup 1 --components 1 --budget 16 --dim 16 \
		--count 100000 --rtt 0 --progress 0 --idle-timeout 30s --duration 20s --workers 8 --keys 100000
	;;
realistic)
	for keys in 64 20000; do
		run "realistic-k$keys-w$W" kpcastream --mode pipeline --warmup 2 --components 8 --budget 64 --dim 16 \
			--count 20000 $common --keys $keys
	done
	;;
esac
