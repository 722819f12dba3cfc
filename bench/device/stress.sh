#!/usr/bin/env bash
# The stress loop of scripts/stress.sh on the lent 16-core machine (issue 28): P copies at once,
# each pinned by taskset to two cores of its own, with its test binaries at GOMAXPROCS=2 beside
# two busy loops pinned to the same two cores — P 2-core machines under CPU stress side by side.
# The machine has no Go: the test binaries and kpcastream are prebuilt here and gzip'ed into BIN:
#   for p in internal/clustertest internal/proctest processor; do
#     go test -c -o .devbin/$(echo $p | tr / _).test ./$p; done
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/kpcastream ./cmd/kpcastream
#   gzip -9 .devbin/*.test .devbin/kpcastream
# then (device tool): bash bench/device/stress.sh, carrying .devbin. Each copy starts a new round
# only while a whole round fits before DEADLINE seconds; the never-retried counts and every
# failing run's log go to OUT.
set -u
BIN=${BIN:-.devbin}
OUT=${OUT:-bench/out}
P=${P:-8}
DEADLINE=${DEADLINE:-420}
ROUND=${ROUND:-90} # the longest a round is expected to take; none starts with less left
RUN=${RUN:-'TestClusterElastic|TestKillWithPublishesInFlight|TestPausedOwner|TestJoinAfterKill'}
PKGS=${PKGS:-internal/clustertest internal/proctest processor}
command -v taskset >/dev/null || { echo "stress: taskset is missing"; exit 1; }
cores=$(nproc)
[ $((2 * P)) -le "$cores" ] || { echo "stress: P=$P copies need $((2 * P)) cores, the machine has $cores"; exit 1; }
mkdir -p "$OUT" /tmp/sbin
for f in "$BIN"/*.gz; do
	gunzip -c "$f" >"/tmp/sbin/$(basename "$f" .gz)"
done
chmod +x /tmp/sbin/*
root=$(pwd)
export KPCASTREAM_BIN=/tmp/sbin/kpcastream

copy() { # index: the copy's cores are 2i and 2i+1
	local i=$1 cpus="$((2 * $1)),$((2 * $1 + 1))" busy=() round=0
	for _ in 1 2; do
		taskset -c "$cpus" bash -c 'while :; do :; done' &
		busy+=($!)
	done
	while [ $((DEADLINE - SECONDS)) -ge "$ROUND" ]; do
		round=$((round + 1))
		for pkg in $PKGS; do
			local name log start status
			name=$(echo "$pkg" | tr / _)
			log="$OUT/$name.c$i.r$round.log"
			start=$SECONDS
			if (cd "$root/$pkg" && GOMAXPROCS=2 taskset -c "$cpus" "/tmp/sbin/$name.test" -test.run "$RUN" \
				-test.count=1 -test.timeout 10m -test.v >"$log" 2>&1); then
				status=ok
				rm -f "$log"
			else
				status="FAIL $(grep -m3 -- '--- FAIL' "$log" | tr '\n' ' ')log $(basename "$log")"
			fi
			echo "copy $i round $round $pkg: $status ($((SECONDS - start)) s)"
		done
	done
	kill "${busy[@]}" 2>/dev/null
}

for i in $(seq 0 $((P - 1))); do
	copy "$i" >"$OUT/copy$i.txt" 2>&1 &
done
wait
cat "$OUT"/copy*.txt >"$OUT/all.txt"
none=0
for pkg in $PKGS; do
	ok=$(grep -c " $pkg: ok" "$OUT/all.txt") failing=$(grep -c " $pkg: FAIL" "$OUT/all.txt")
	echo "$pkg: $ok ok, $failing failing"
	[ $((ok + failing)) -gt 0 ] || none=1
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
# No run at all (DEADLINE below ROUND) is not a pass.
[ "$none" = 0 ] || { echo "stress: a package never ran; DEADLINE=$DEADLINE must be at least ROUND=$ROUND"; exit 1; }
! grep -q FAIL "$OUT/all.txt"
