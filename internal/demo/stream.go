package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
)

// publish publishes the drifting stream at the configured rate: in
// phase 0 a noisy ellipse in (x0, x1), in phase 1 a larger one in (x2, x3),
// switching every --drift-every, with isotropic noise in every coordinate.
func publish(ctx context.Context, js jetstream.JetStream, o *Options, st *stats) error {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	x := make([]float64, o.Dim)
	obs := []codec.Observation{{X: x}}
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		el := time.Since(start)
		phase := int64(el/o.DriftEvery) % 2
		st.phase.Store(phase)
		due := int64(el.Seconds() * float64(o.Rate))
		for ; sent < due; sent++ {
			for j := range x {
				x[j] = 0.05 * rng.NormFloat64()
			}
			th := 2 * math.Pi * rng.Float64()
			r := 1 + 0.05*rng.NormFloat64()
			if o.Classify {
				r, obs[0].Y = ring(rng)
			}
			a, b, i, j := 1.0, 0.5, 0, 1
			if phase == 1 {
				a, b, i, j = 1.5, 0.75, 2, 3
			}
			x[i] += a * r * math.Cos(th)
			x[j] += b * r * math.Sin(th)
			obs[0].ID = fmt.Sprintf("m%d", sent)
			obs[0].TS = float64(time.Now().UnixNano()) / 1e9
			// A fresh buffer per message: PublishAsync keeps the payload
			// until the server acknowledges it (and may resend it).
			buf, err := codec.EncodeObservations(nil, codec.Msgpack, obs)
			if err != nil {
				return err
			}
			key := fmt.Sprintf("sensor-%d", sent%int64(o.Keys))
			if _, err := js.PublishAsync("demo.sensors."+key+".features", buf); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("publish: %w", err)
			}
			st.in.Add(1)
		}
		if sent%1024 == 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return nil
			}
		}
	}
}
