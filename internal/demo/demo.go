package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/kpcastream/kpcastream/internal/words"
)

// Options are the demo's settings (kpcastream demo's flags).
type Options struct {
	Duration   time.Duration // stop after this long (0: at ctx's end)
	Rate       int           // messages per second, all keys together
	Keys       int
	Dim        int
	Components int
	Budget     int
	Learner    string
	Gamma      float64
	Forget     float64
	DriftEvery time.Duration // the stream's structure changes this often
	Port       int           // of the embedded NATS server (-1: any free port)
	Every      time.Duration // interval of the status line
	Workers    int
	Partitions int
	Classify   bool   // labelled stream and a classifier stage (classify.go)
	HTTPAddr   string // the first worker's live page ("off": none)
	HTTPSet    bool   // HTTPAddr was given: no fallback to a free port
}

// Serve runs one worker of the pipeline cfg until ctx ends, with its
// live page on ln (nil: none): the command's own serve.
type Serve func(ctx context.Context, cfg *config.Config, log *zap.Logger, ln net.Listener) error

// DefaultHTTP is the default address of the demo's live page.
const DefaultHTTP = "127.0.0.1:8080"

// joinEvery is the delay between the starts of the demo's workers.
const joinEvery = 5 * time.Second

// pipelineConfig is the demo's pipeline; the fields are the same as in a
// config file for kpcastream run (see examples/kpcastream.yaml).
const pipelineConfig = `
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

// stats is shared by the demo's goroutines.
type stats struct {
	in, out, dlq atomic.Int64
	phase        atomic.Int64
	cls          accuracy // --classify
	mu           sync.Mutex
	last         map[string]codec.Output
}

// Run runs the demo until ctx ends or o.Duration has passed: an embedded
// NATS server, o.Workers workers of one pipeline run by serve, a drifting
// synthetic stream and a status line every o.Every on stdout.
func Run(ctx context.Context, o Options, serve Serve, stdout, stderr io.Writer) error {
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	dir, err := os.MkdirTemp("", "kpcastream-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	srv, url, err := natsembed.StartEmbedded(sctx, natsembed.Options{Host: "127.0.0.1", Port: o.Port, StoreDir: dir})
	cancel()
	if err != nil {
		return fmt.Errorf("embedded nats-server: %w", err)
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	yml := fmt.Sprintf(pipelineConfig, url, o.Partitions, o.Learner, o.Dim, o.Components, o.Budget, o.Gamma, o.Forget) + classifierConfig(&o)
	cfg, err := config.Read(strings.NewReader(yml), func(string) (string, bool) { return "", false }, config.Overrides{})
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, nats.Name("kpcastream-demo"))
	if err != nil {
		return err
	}
	defer nc.Close()
	st := &stats{last: map[string]codec.Output{}}
	unsubscribe, err := st.subscribe(nc)
	if err != nil {
		return err
	}
	defer unsubscribe()
	ln, err := listen(&o)
	if err != nil {
		return err
	}
	intro(stdout, &o, url, ln)
	err = runAll(ctx, &o, cfg, serve, nc, ln, st, stdout, stderr)
	fmt.Fprintf(stdout, "\nkpcastream demo: published %d, projected %d, dead-lettered %d\n", st.in.Load(), st.out.Load(), st.dlq.Load())
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil // stopped by Ctrl-C or --duration
	}
	return err
}

// subscribe counts the pipeline's outputs (keeping each key's last) and
// dead letters; the returned function unsubscribes.
func (st *stats) subscribe(nc *nats.Conn) (func(), error) {
	sub, err := nc.Subscribe("kpca.out.demo.*", func(m *nats.Msg) {
		out, err := codec.DecodeOutput(m.Data, codec.Msgpack)
		if err != nil {
			return
		}
		st.out.Add(1)
		st.cls.count(out)
		st.mu.Lock()
		st.last[out.Key] = *out
		st.mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	dlq, err := nc.Subscribe("kpca.dlq.demo", func(*nats.Msg) { st.dlq.Add(1) })
	if err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	return func() {
		dlq.Unsubscribe()
		sub.Unsubscribe()
	}, nil
}

// listen opens the live page's listener (nil with "off"); the default
// address falls back to a free port when taken.
func listen(o *Options) (net.Listener, error) {
	if o.HTTPAddr == "off" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil && !o.HTTPSet {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", o.HTTPAddr, err)
	}
	return ln, nil
}

// intro prints what runs where.
func intro(w io.Writer, o *Options, url string, ln net.Listener) {
	fmt.Fprintf(w, "kpcastream demo: embedded NATS with JetStream at %s\n", url)
	if ln != nil {
		fmt.Fprintf(w, "  live page http://%s/ui/  (JSON API under /api/v1/, Prometheus /metrics)\n", ln.Addr())
	}
	fmt.Fprintf(w, "  input  demo.sensors.<key>.features (stream DEMO), %s, d=%d, %d msgs/s; the structure changes every %s\n", words.Plural(o.Keys, "key"), o.Dim, o.Rate, o.DriftEvery)
	fmt.Fprintf(w, "  learner %s (B=%d, k=%d, rbf γ=%g, forget %g); outputs on kpca.out.demo.<key>\n", o.Learner, o.Budget, o.Components, o.Gamma, o.Forget)
	if o.Workers > 1 {
		fmt.Fprintf(w, "  %d workers share %s; they join %s apart, and each change of owners is printed\n", o.Workers, words.Plural(o.Partitions, "partition"), joinEvery)
	}
	fmt.Fprintf(w, "  other programs can publish to and subscribe on this server while it runs; Ctrl-C stops\n\n")
	if ln != nil && o.Workers > 1 {
		fmt.Fprintf(w, "  the page shows the keys of the partitions the first worker owns\n")
	}
}

// runAll runs the workers (joining joinEvery apart; the first serves the
// page on ln), the owners' line, the stream and the status lines until
// ctx ends or one of them fails.
func runAll(ctx context.Context, o *Options, cfg *config.Config, serve Serve, nc *nats.Conn, ln net.Listener, st *stats, stdout, stderr io.Writer) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(zapcore.AddSync(stderr)), zapcore.WarnLevel))
	g, gctx := errgroup.WithContext(ctx)
	for i := range o.Workers {
		g.Go(func() error {
			select {
			case <-gctx.Done():
				return nil
			case <-time.After(time.Duration(i) * joinEvery):
			}
			var wln net.Listener
			if i == 0 {
				wln = ln // the first worker serves the page
			}
			err := serve(gctx, cfg, log, wln)
			if gctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("processor stopped")
			}
			return err
		})
	}
	if o.Workers > 1 {
		g.Go(func() error { return owners(gctx, nc, o.Every, stdout) })
	}
	g.Go(func() error { return publish(gctx, js, o, st) })
	g.Go(func() error { return status(gctx, nc, o, st, stdout) })
	return g.Wait()
}
