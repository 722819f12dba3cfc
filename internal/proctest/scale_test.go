package proctest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natstest"
)

// BenchmarkScaleOut measures end-to-end messages/s of W = 1, 2, 3
// "kpcastream run" processes sharing the partitions of one pipeline (the
// test config: ikpca d = 3, B = 16, 4 partitions, JetStream output), on
// one machine with one nats-server in the benchmark's process. Each
// iteration starts the W processes, waits until they share the
// partitions, publishes 20,000 messages over 64 keys as fast as the
// stream takes them, and times until every partition has acknowledged
// everything. On a machine with fewer cores than processes the figure
// shows the coordination's overhead rather than a speed-up.
//
//	go test ./internal/proctest -run '^$' -bench ScaleOut -benchtime 1x
//
// On a bigger machine the environment widens it (defaults in brackets):
// KPCASTREAM_SCALE_WORKERS the W to run ["1,2,3"], KPCASTREAM_SCALE_PARTITIONS
// [4], KPCASTREAM_SCALE_MSGS [20000], KPCASTREAM_SCALE_KEYS [64], and
// KPCASTREAM_SCALE_KEY_IN_FLIGHT the pipeline's output.key_in_flight [1],
// KPCASTREAM_SCALE_URL a nats-server in its own process (the deployed
// shape) instead of the embedded one — the benchmark deletes every stream
// on that server before each iteration, so give it a server of its own.
func BenchmarkScaleOut(b *testing.B) {
	workersList := envInts(b, "KPCASTREAM_SCALE_WORKERS", []int{1, 2, 3})
	parts := envInts(b, "KPCASTREAM_SCALE_PARTITIONS", []int{partitions})[0]
	n := envInts(b, "KPCASTREAM_SCALE_MSGS", []int{20000})[0]
	nkeys := envInts(b, "KPCASTREAM_SCALE_KEYS", []int{64})[0]
	external := os.Getenv("KPCASTREAM_SCALE_URL")
	kif := os.Getenv("KPCASTREAM_SCALE_KEY_IN_FLIGHT")
	for _, workers := range workersList {
		b.Run(fmt.Sprintf("W=%d", workers), func(b *testing.B) {
			scaleCase{
				workers: workers, parts: parts, msgs: n, keys: nkeys, dim: 3, external: external,
				config: func(url string) string {
					text := configParts(url, parts)
					if kif != "" {
						text = strings.Replace(text, "key_in_flight: 1}", "key_in_flight: "+kif+"}", 1)
					}
					return text
				},
				drained: (*world).drained,
			}.run(b)
		})
	}
}

// scaleCase is one run of the scale-out benchmarks: W "kpcastream run"
// processes on one pipeline, its configuration from config(url).
type scaleCase struct {
	workers, parts, msgs, keys, dim int
	external                        string    // a server of its own (wiped before each iteration), or "": an embedded one
	mapping                         [2]string // a subject mapping the embedded server needs (input.shards > 1), or none
	config                          func(url string) string
	drained                         func(*world) bool
}

// run times each iteration: start the W processes, wait until they share
// the partitions, publish the messages over the keys as fast as the input
// takes them while the workers consume, and wait until every partition has
// acknowledged everything. It reports msgs/s end to end and in-msgs/s, the
// input's own acknowledged publish rate in the same iteration: near
// msgs/s, the server's ingest, not the workers, sets the pace.
func (c scaleCase) run(b *testing.B) {
	binary(b)
	var total, ingest time.Duration
	for range b.N {
		b.StopTimer()
		url := c.external
		if url == "" {
			s, u := natstest.RunServer(b)
			url = u
			if c.mapping[0] != "" {
				if err := s.GlobalAccount().AddMapping(c.mapping[0], c.mapping[1]); err != nil {
					b.Fatal(err)
				}
			}
		}
		_, js := natstest.Connect(b, url)
		if c.external != "" {
			wipe(b, js)
		}
		cfg := filepath.Join(b.TempDir(), "kpcastream.yaml")
		if err := os.WriteFile(cfg, []byte(c.config(url)), 0o644); err != nil {
			b.Fatal(err)
		}
		w := &world{t: b, js: js, cfg: cfg, parts: c.parts}
		var procs []*proc
		for range c.workers {
			p := start(b, cfg)
			procs = append(procs, p)
			w.memberOf(p.cmd.Process.Pid)
		}
		waitFor(b, 60*time.Second, "the workers share the partitions", func() bool {
			owners := map[string]bool{}
			for _, r := range w.owners() {
				if r.Owner == "" {
					return false
				}
				owners[r.Owner] = true
			}
			return len(owners) == min(c.workers, c.parts)
		})
		rng := rand.New(rand.NewPCG(1, 2))
		x := make([]float64, c.dim)
		b.StartTimer()
		begin := time.Now()
		for i := range c.msgs {
			for j := range x {
				x[j] = rng.NormFloat64()
			}
			data, _ := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{X: x}})
			if _, err := js.PublishAsync(fmt.Sprintf("pin.key%d", i%c.keys), data, jetstream.WithMsgID(fmt.Sprint(i)), jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(120 * time.Second):
			b.Fatal("publishes not acknowledged within 120s")
		}
		ingest += time.Since(begin)
		waitFor(b, 300*time.Second, "drained", func() bool { return c.drained(w) })
		elapsed := time.Since(begin)
		b.StopTimer()
		total += elapsed
		for _, p := range procs {
			p.stop(b)
		}
	}
	b.ReportMetric(float64(c.msgs*b.N)/total.Seconds(), "msgs/s")
	b.ReportMetric(float64(c.msgs*b.N)/ingest.Seconds(), "in-msgs/s")
}

// envInts reads a comma-separated list of positive integers from the
// environment variable name, or returns def when it is unset.
func envInts(b *testing.B, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want positive integers separated by commas", name, v)
		}
		out = append(out, n)
	}
	return out
}

// wipe deletes every stream (KV buckets included) of the server js talks
// to, so that an iteration on an external server starts clean.
func wipe(b *testing.B, js jetstream.JetStream) {
	ctx := context.Background()
	names := js.StreamNames(ctx)
	var list []string
	for n := range names.Name() {
		list = append(list, n)
	}
	for _, n := range list {
		if err := js.DeleteStream(ctx, n); err != nil {
			b.Fatalf("wipe the external server: delete stream %s: %v", n, err)
		}
	}
}
