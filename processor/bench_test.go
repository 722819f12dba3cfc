package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
)

func ikpcaConfig(d int) learners.Config {
	return learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: 3, Budget: 64,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(d)}, Seed: 1}
}

// BenchmarkApply measures the per-message computation (Learn + Score) of
// one warm ikpca learner, without NATS.
func BenchmarkApply(b *testing.B) {
	const d = 8
	l, err := learners.New(ikpcaConfig(d))
	if err != nil {
		b.Fatal(err)
	}
	a, c := vectors(1, 512), vectors(2, 512)
	xs := make([][]float64, len(a))
	for i := range xs {
		xs[i] = append(append(append([]float64{}, a[i]...), c[i]...), a[i][0]*c[i][1], a[i][2]-c[i][0])
	}
	m := modelOf(b, &pipeline{cfg: PipelineConfig{Learner: ikpcaConfig(d)}}, l)
	var res applied
	obs := make([]codec.Observation, 1)
	for i := range 256 {
		obs[0].X = xs[i%len(xs)]
		_ = m.Apply(&res, obs, "k", uint64(i+1))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		obs[0].X = xs[i%len(xs)]
		if err := m.Apply(&res, obs, "k", uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEndToEnd publishes b.N messages over 8 keys to a JetStream
// pipeline with the ikpca learner and waits until all are acknowledged.
func BenchmarkEndToEnd(b *testing.B) {
	e := newEnvB(b)
	pc := pipelineConfig("bench")
	pc.Learner = ikpcaConfig(3)
	r := e.startB(b, Config{Pipelines: []PipelineConfig{pc}, Workers: 2})
	xs := vectors(2, 1024)
	payloads := make([][]byte, len(xs))
	for i, x := range xs {
		payloads[i], _ = codec.EncodeObservations(nil, codec.Msgpack, []codec.Observation{{X: x}})
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := e.js.PublishAsync(fmt.Sprintf("in.bench.k%d", i%8), payloads[i%len(payloads)]); err != nil {
			b.Fatal(err)
		}
	}
	<-e.js.PublishAsyncComplete()
	for r.stats(pc.Name).In < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
