package proctest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
func BenchmarkScaleOut(b *testing.B) {
	const n = 20000
	for _, workers := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("W=%d", workers), func(b *testing.B) {
			binary(b)
			var total time.Duration
			for range b.N {
				b.StopTimer()
				_, url := natstest.RunServer(b)
				_, js := natstest.Connect(b, url)
				cfg := filepath.Join(b.TempDir(), "kpcastream.yaml")
				if err := os.WriteFile(cfg, []byte(config(url)), 0o644); err != nil {
					b.Fatal(err)
				}
				w := &world{t: b, js: js, cfg: cfg}
				var procs []*proc
				ids := map[string]bool{}
				for range workers {
					p := start(b, cfg)
					procs = append(procs, p)
					ids[w.memberOf(p.cmd.Process.Pid)] = true
				}
				waitFor(b, 20*time.Second, "the workers share the partitions", func() bool {
					owners := map[string]bool{}
					for _, r := range w.owners() {
						if r.Owner == "" {
							return false
						}
						owners[r.Owner] = true
					}
					return len(owners) == workers
				})
				rng := rand.New(rand.NewPCG(1, 2))
				b.StartTimer()
				begin := time.Now()
				for i := range n {
					x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
					data, _ := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{X: x}})
					if _, err := js.PublishAsync(fmt.Sprintf("pin.key%d", i%64), data, jetstream.WithMsgID(fmt.Sprint(i))); err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(60 * time.Second):
					b.Fatal("publishes not acknowledged within 60s")
				}
				waitFor(b, 120*time.Second, "drained", w.drained)
				elapsed := time.Since(begin)
				b.StopTimer()
				total += elapsed
				for _, p := range procs {
					p.stop(b)
				}
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "msgs/s")
		})
	}
}
