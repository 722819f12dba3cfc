package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/natsembed"
	"github.com/kpcastream/kpcastream/processor"
)

func init() {
	commands["demo"] = command{
		summary: "embedded NATS, one pipeline and a drifting synthetic stream, with a live status line",
		run:     runDemo,
	}
}

// demoOptions are the flags of kpcastream demo.
type demoOptions struct {
	duration   time.Duration
	rate       int
	keys       int
	dim        int
	components int
	budget     int
	learner    string
	gamma      float64
	forget     float64
	driftEvery time.Duration
	port       int
	every      time.Duration
	workers    int
	partitions int
	classify   bool // --classify (demo_classify.go)
	httpAddr   string
	httpSet    bool
}

// demoConfig is the demo's pipeline; the fields are the same as in a
// config file for kpcastream run (see examples/kpcastream.yaml).
const demoConfig = `
nats: {url: %q}
http: {metrics_addr: "off"}
log: {level: warn}
workers: 2
checkpoint_every: 2s
lease_ttl: 3s
pipelines:
  - name: demo
    partitions: %d
    input: {stream: DEMO, subject: demo.sensors.*.features, create_stream: true, max_ack_pending: 512}
    learner:
      kind: %s
      dim: %d
      components: %d
      budget: %d
      kernel: {name: rbf, gamma: %g}
      forget: %g
    output: {subject: "kpca.out.{pipeline}.{key}"}
    dead_letter: kpca.dlq.demo
    snapshot: {every_messages: 5000, every: 10s, on_shutdown: true}
    max_keys: 64
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o demoOptions
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (default: run until interrupted)")
	fs.IntVar(&o.rate, "rate", 2000, "messages per second published (all keys together)")
	fs.IntVar(&o.keys, "keys", 2, "number of sensors (partition keys, one learner each)")
	fs.IntVar(&o.dim, "dim", 8, "dimension of the feature vectors")
	fs.IntVar(&o.components, "components", 3, "number of components")
	fs.IntVar(&o.budget, "budget", 128, "dictionary budget B")
	fs.StringVar(&o.learner, "learner", "ikpca", "learner: ikpca, kha or window")
	fs.Float64Var(&o.gamma, "gamma", 0.5, "rbf kernel gamma")
	fs.Float64Var(&o.forget, "forget", 0.999, "forgetting factor per observation (ikpca)")
	fs.DurationVar(&o.driftEvery, "drift-every", 15*time.Second, "the stream's structure changes abruptly this often")
	fs.IntVar(&o.port, "port", 4222, "client port of the embedded NATS server (-1: any free port)")
	fs.DurationVar(&o.every, "every", time.Second, "interval of the status line")
	fs.IntVar(&o.workers, "workers", 1, "worker processes (members) to run in this process; they join one after the other and share the partitions")
	fs.IntVar(&o.partitions, "partitions", 0, "partitions of the pipeline (default: 1 with one worker, 4 × workers with more)")
	fs.BoolVar(&o.classify, "classify", false, "labelled stream (inner and outer ring) and a classifier stage; the status line shows its prequential accuracy")
	fs.StringVar(&o.httpAddr, "http", demoHTTP, `listen address of the first worker's live page /ui/, its JSON API and /metrics ("off": none; the default falls back to a free port when taken)`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	fs.Visit(func(f *flag.Flag) { o.httpSet = o.httpSet || f.Name == "http" })
	if o.partitions == 0 {
		o.partitions = 1
		if o.workers > 1 {
			o.partitions = 4 * o.workers
		}
	}
	if o.rate < 1 || o.keys < 1 || o.dim < 4 || o.every <= 0 || o.driftEvery <= 0 || o.workers < 1 || o.partitions < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "kpcastream demo: want --rate ≥ 1, --keys ≥ 1, --dim ≥ 4, --workers ≥ 1, --partitions ≥ 1, positive --every and --drift-every, no arguments")
		return errUsage
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	dir, err := os.MkdirTemp("", "kpcastream-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	srv, url, err := natsembed.StartEmbedded(sctx, natsembed.Options{Host: "127.0.0.1", Port: o.port, StoreDir: dir})
	cancel()
	if err != nil {
		return fmt.Errorf("embedded nats-server: %w", err)
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	yml := fmt.Sprintf(demoConfig, url, o.partitions, o.learner, o.dim, o.components, o.budget, o.gamma, o.forget) + demoClassifierConfig(&o)
	cfg, err := config.Read(strings.NewReader(yml), func(string) (string, bool) { return "", false }, config.Overrides{})
	if err != nil {
		return err
	}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(zapcore.AddSync(stderr)), zapcore.WarnLevel))

	nc, err := nats.Connect(url, nats.Name("kpcastream-demo"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st := &demoStats{last: map[string]codec.Output{}}
	sub, err := nc.Subscribe("kpca.out.demo.*", func(m *nats.Msg) {
		out, err := codec.DecodeOutput(m.Data, codec.Msgpack)
		if err != nil {
			return
		}
		st.out.Add(1)
		st.count(out)
		st.mu.Lock()
		st.last[out.Key] = *out
		st.mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	dlq, err := nc.Subscribe("kpca.dlq.demo", func(*nats.Msg) { st.dlq.Add(1) })
	if err != nil {
		return err
	}
	defer dlq.Unsubscribe()

	var ln net.Listener
	if o.httpAddr != "off" {
		if ln, err = net.Listen("tcp", o.httpAddr); err != nil && !o.httpSet {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			return fmt.Errorf("--http %s: %w", o.httpAddr, err)
		}
	}
	fmt.Fprintf(stdout, "kpcastream demo: embedded NATS with JetStream at %s\n", url)
	if ln != nil {
		fmt.Fprintf(stdout, "  live page http://%s/ui/  (JSON API under /api/v1/, Prometheus /metrics)\n", ln.Addr())
	}
	fmt.Fprintf(stdout, "  input  demo.sensors.<key>.features (stream DEMO), %s, d=%d, %d msgs/s; the structure changes every %s\n", plural(o.keys, "key"), o.dim, o.rate, o.driftEvery)
	fmt.Fprintf(stdout, "  learner %s (B=%d, k=%d, rbf γ=%g, forget %g); outputs on kpca.out.demo.<key>\n", o.learner, o.budget, o.components, o.gamma, o.forget)
	if o.workers > 1 {
		fmt.Fprintf(stdout, "  %d workers share %s; they join %s apart, and each change of owners is printed\n", o.workers, plural(o.partitions, "partition"), demoJoinEvery)
	}
	fmt.Fprintf(stdout, "  other programs can publish to and subscribe on this server while it runs; Ctrl-C stops\n\n")

	if ln != nil && o.workers > 1 {
		fmt.Fprintf(stdout, "  the page shows the keys of the partitions the first worker owns\n")
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range o.workers {
		g.Go(func() error {
			select {
			case <-gctx.Done():
				return nil
			case <-time.After(time.Duration(i) * demoJoinEvery):
			}
			var wln net.Listener
			if i == 0 {
				wln = ln // the first worker serves the page
			}
			err := serveOn(gctx, cfg, log, wln)
			if gctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("processor stopped")
			}
			return err
		})
	}
	if o.workers > 1 {
		g.Go(func() error { return demoOwners(gctx, nc, o.every, stdout) })
	}
	g.Go(func() error { return demoPublish(gctx, js, &o, st) })
	g.Go(func() error { return demoReport(gctx, nc, &o, st, stdout) })
	err = g.Wait()
	fmt.Fprintf(stdout, "\nkpcastream demo: published %d, projected %d, dead-lettered %d\n", st.in.Load(), st.out.Load(), st.dlq.Load())
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil // stopped by Ctrl-C or --duration
	}
	return err
}

// demoStats is shared by the demo's goroutines.
type demoStats struct {
	in, out, dlq atomic.Int64
	phase        atomic.Int64
	cls          demoAccuracy // --classify
	mu           sync.Mutex
	last         map[string]codec.Output
}

// demoPublish publishes the drifting stream at the configured rate: in
// phase 0 a noisy ellipse in (x0, x1), in phase 1 a larger one in (x2, x3),
// switching every --drift-every, with isotropic noise in every coordinate.
func demoPublish(ctx context.Context, js jetstream.JetStream, o *demoOptions, st *demoStats) error {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	x := make([]float64, o.dim)
	obs := []codec.Observation{{X: x}}
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		el := time.Since(start)
		phase := int64(el/o.driftEvery) % 2
		st.phase.Store(phase)
		due := int64(el.Seconds() * float64(o.rate))
		for ; sent < due; sent++ {
			for j := range x {
				x[j] = 0.05 * rng.NormFloat64()
			}
			th := 2 * math.Pi * rng.Float64()
			r := 1 + 0.05*rng.NormFloat64()
			if o.classify {
				r, obs[0].Y = demoRing(rng)
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
			key := fmt.Sprintf("sensor-%d", sent%int64(o.keys))
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

// demoReport prints the status every interval: a line of rates, then a
// line per key (the first demoMaxKeys) with its explained variance, top
// eigenvalues (from the model endpoint), novelty scores and basis version
// of its latest output.
func demoReport(ctx context.Context, nc *nats.Conn, o *demoOptions, st *demoStats, w io.Writer) error {
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	start := time.Now()
	var lastIn, lastOut int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		in, out := st.in.Load(), st.out.Load()
		secs := o.every.Seconds()
		st.mu.Lock()
		last := make(map[string]codec.Output, len(st.last))
		for k, v := range st.last {
			last[k] = v
		}
		st.mu.Unlock()
		line := fmt.Sprintf("%5.0fs phase %d  in %5.0f/s  out %5.0f/s  dlq %d", time.Since(start).Seconds(), st.phase.Load(),
			float64(in-lastIn)/secs, float64(out-lastOut)/secs, st.dlq.Load())
		lastIn, lastOut = in, out
		if b := demoBudget(ctx, nc); b != "" {
			line += "  budget " + b
		}
		line += st.cls.line()
		shown := min(o.keys, demoMaxKeys)
		for i := range shown {
			key := fmt.Sprintf("sensor-%d", i)
			out, ok := last[key]
			if !ok {
				line += "\n        " + key + ": warming up"
				continue
			}
			line += fmt.Sprintf("\n        %s: explained %.3f", key, out.Explained)
			if eig := demoEigenvalues(ctx, nc, key); eig != nil {
				line += "  eig"
				for _, v := range eig {
					line += fmt.Sprintf(" %.4f", v)
				}
			}
			line += fmt.Sprintf("  spe %.4f  t2 %.2f  basis v%d", out.SPE, out.T2, out.BasisVersion)
		}
		if o.keys > shown {
			line += fmt.Sprintf("\n        … and %s more (see the live page)", plural(o.keys-shown, "key"))
		}
		fmt.Fprintln(w, line)
	}
}

// demoMaxKeys bounds the keys of the status block.
const demoMaxKeys = 16

// demoEigenvalues asks the micro service for the key's model export.
func demoEigenvalues(ctx context.Context, nc *nats.Conn, key string) []float64 {
	req, _ := json.Marshal(map[string]string{"pipeline": "demo", "key": key})
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, "kpcastream.model", req)
	if err != nil || msg.Header.Get("Nats-Service-Error") != "" {
		return nil
	}
	m, err := codec.DecodeModel(msg.Data)
	if err != nil {
		return nil
	}
	return m.Eigenvalues
}

// demoHTTP is the default address of the demo's live page.
const demoHTTP = "127.0.0.1:8080"

// demoJoinEvery is the delay between the starts of the demo's workers.
const demoJoinEvery = 5 * time.Second

// demoOwners prints which member owns each partition whenever it changes,
// from the stats endpoint (summed over the members).
func demoOwners(ctx context.Context, nc *nats.Conn, every time.Duration, w io.Writer) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := ""
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := nc.RequestWithContext(rctx, "kpcastream.stats", nil)
		cancel()
		if err != nil || msg.Header.Get("Nats-Service-Error") != "" {
			continue
		}
		var stats []processor.PipelineStats
		if json.Unmarshal(msg.Data, &stats) != nil || len(stats) == 0 {
			continue
		}
		members := map[string]int{}
		for _, p := range stats[0].Partitions {
			members[p.Member]++
		}
		var parts []string
		for _, p := range stats[0].Partitions {
			parts = append(parts, fmt.Sprintf("p%d→%s(e%d)", p.Partition, p.Member[:min(6, len(p.Member))], p.Epoch))
		}
		line := fmt.Sprintf("%s: %s", plural(len(members), "member"), strings.Join(parts, " "))
		if line != last {
			fmt.Fprintf(w, "%5.0fs owners  %s\n", time.Since(start).Seconds(), line)
			last = line
		}
	}
}

// demoBudget returns the budget advice of the pipeline's learners from the
// stats endpoint, e.g. "ok 2" or "tight 1, ok 1" ("" when unknown).
func demoBudget(ctx context.Context, nc *nats.Conn) string {
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, "kpcastream.stats", nil)
	if err != nil || msg.Header.Get("Nats-Service-Error") != "" {
		return ""
	}
	var stats []processor.PipelineStats
	if json.Unmarshal(msg.Data, &stats) != nil || len(stats) == 0 {
		return ""
	}
	var parts []string
	for _, a := range []string{"too_small", "tight", "ok"} {
		if n := stats[0].Budget[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
	}
	return strings.Join(parts, ", ")
}
