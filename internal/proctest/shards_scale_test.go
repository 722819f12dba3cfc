package proctest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkScaleOutShards is BenchmarkScaleOut over S shard streams
// (input.shards, issue 29): W "kpcastream run" processes share P
// partitions spread over S input streams PIN-0..PIN-<S-1> (PIN when S =
// 1), their outputs following the shards into POUT-<s>. Each iteration
// starts the W processes, waits until they share the partitions,
// publishes the messages over the keys as fast as the streams take them
// (asynchronously, while the workers consume: the input arrives
// concurrently) and times until every partition has acknowledged
// everything. It reports msgs/s end to end and in-msgs/s, the input's own
// rate.
//
//	go test ./internal/proctest -run '^$' -bench ScaleOutShards -benchtime 1x
//
// With S > 1 the servers must partition the input subject pin.* by the
// subject mapping "pin.*" → "pin.{{wildcard(1)}}.{{partition(P,1)}}"
// (README, Sharding): the embedded server gets it from the benchmark; an
// external one (KPCASTREAM_SCALE_URL, e.g. three servers of a cluster:
// bench/device/cluster.sh) from its configuration. Environment (defaults
// in brackets): KPCASTREAM_SCALE_SHARDS the S to run ["1,3"],
// KPCASTREAM_SCALE_WORKERS the W ["1,2"], KPCASTREAM_SCALE_PARTITIONS P
// [6], KPCASTREAM_SCALE_REPLICAS of the created streams [1],
// KPCASTREAM_SCALE_LEARNER "dim,budget,components" of the ikpca learner
// ["3,16,2", light; "64,400,16" is CPU-bound], KPCASTREAM_SCALE_MSGS
// [20000], KPCASTREAM_SCALE_KEYS [64], KPCASTREAM_SCALE_PROCS GOMAXPROCS
// and workers of each process [2], KPCASTREAM_SCALE_KEY_IN_FLIGHT
// output.key_in_flight [the default, through a lane], KPCASTREAM_SCALE_TAGS
// server tags, shard s placed on tags[s mod n] [none],
// KPCASTREAM_SCALE_MEMORY the pipeline's memory_budget in bytes, e.g. far
// below the keys' size to run them through the local tier (issue 30) [the
// default]. An external server
// is wiped (every stream deleted) before each iteration.
func BenchmarkScaleOutShards(b *testing.B) {
	shardsList := envInts(b, "KPCASTREAM_SCALE_SHARDS", []int{1, 3})
	workersList := envInts(b, "KPCASTREAM_SCALE_WORKERS", []int{1, 2})
	parts := envInts(b, "KPCASTREAM_SCALE_PARTITIONS", []int{6})[0]
	replicas := envInts(b, "KPCASTREAM_SCALE_REPLICAS", []int{1})[0]
	lc := envInts(b, "KPCASTREAM_SCALE_LEARNER", []int{3, 16, 2})
	n := envInts(b, "KPCASTREAM_SCALE_MSGS", []int{20000})[0]
	nkeys := envInts(b, "KPCASTREAM_SCALE_KEYS", []int{64})[0]
	procs := envInts(b, "KPCASTREAM_SCALE_PROCS", []int{2})[0]
	kif := os.Getenv("KPCASTREAM_SCALE_KEY_IN_FLIGHT")
	memory := os.Getenv("KPCASTREAM_SCALE_MEMORY")
	var tags []string
	if t := os.Getenv("KPCASTREAM_SCALE_TAGS"); t != "" {
		tags = strings.Split(t, ",")
	}
	external := os.Getenv("KPCASTREAM_SCALE_URL")
	if len(lc) != 3 {
		b.Fatalf("KPCASTREAM_SCALE_LEARNER: want dim,budget,components, got %v", lc)
	}
	b.Setenv("GOMAXPROCS", strconv.Itoa(procs)) // inherited by the worker processes
	for _, shards := range shardsList {
		for _, workers := range workersList {
			b.Run(fmt.Sprintf("S=%d/W=%d", shards, workers), func(b *testing.B) {
				if shards > parts {
					b.Skipf("%d shards > %d partitions", shards, parts)
				}
				c := scaleCase{
					workers: workers, parts: parts, msgs: n, keys: nkeys, dim: lc[0], external: external,
					config: func(url string) string {
						return configShards(url, parts, shards, replicas, procs, lc, kif, memory, tags)
					},
					drained: func(w *world) bool { return drainedShards(w.js, shards, parts) },
				}
				if shards > 1 {
					c.mapping = [2]string{"pin.*", fmt.Sprintf("pin.{{wildcard(1)}}.{{partition(%d,1)}}", parts)}
				}
				c.run(b)
			})
		}
	}
}

// configShards is the benchmark's worker config: P partitions over S
// shard streams of the given replicas, outputs per shard, an ikpca
// learner of lc = dim, budget, components, procs workers.
func configShards(url string, parts, shards, replicas, procs int, lc []int, keyInFlight, memory string, tags []string) string {
	budget := ""
	if memory != "" {
		budget = "\n    memory_budget: " + memory
	}
	kif := ""
	if keyInFlight != "" {
		kif = ", key_in_flight: " + keyInFlight
	}
	place := ""
	if len(tags) > 0 {
		var ts []string
		for s := range shards {
			ts = append(ts, fmt.Sprintf("[%q]", tags[s%len(tags)]))
		}
		place = ", shard_tags: [" + strings.Join(ts, ", ") + "]"
	}
	return fmt.Sprintf(`
nats: {url: %q}
log: {level: info, format: json}
http: {metrics_addr: "off"}
workers: %d
lease_ttl: 5s
checkpoint_every: 1s
shutdown_timeout: 5s
pipelines:
  - name: proc
    partitions: %d
    input: {stream: PIN, subject: "pin.*", shards: %d, create_stream: true, replicas: %d, nak_delay: 100ms, ack_wait: 10s%s}
    learner: {kind: ikpca, dim: %d, budget: %d, components: %d, kernel: {name: rbf}, forget: 0.99, seed: 3}
    output: {subject: "pout.{shard}.{key}", stream: POUT, create_stream: true, replicas: %d, encoding: json%s}
    dead_letter: "pdlq.{shard}"
    dead_letters: {create_stream: true, replicas: %d}
    snapshot: {every_messages: 1000, every: 30s}%s
`, url, procs, parts, shards, replicas, place, lc[0], lc[1], lc[2], replicas, kif, replicas, budget)
}

// drainedShards reports whether every partition's consumer, on its shard's
// stream, has nothing pending or unacknowledged.
func drainedShards(js jetstream.JetStream, shards, parts int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := []string{"PIN"}
	if shards > 1 {
		names = names[:0]
		for s := range shards {
			names = append(names, "PIN-"+strconv.Itoa(s))
		}
	}
	filters := map[string]bool{}
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			if ci.NumPending != 0 || ci.NumAckPending != 0 {
				return false
			}
			if strings.HasPrefix(ci.Name, "kpcastream-proc-p") {
				filters[ci.Config.FilterSubject] = true
			}
		}
		if lister.Err() != nil {
			return false
		}
	}
	return len(filters) == parts
}
