package clustertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

// root is the repository root, relative to this package.
const root = "../.."

// node is one nats-server of the test cluster; its ports and store
// directory stay the same across restarts.
type node struct {
	name     string
	port     int // client port
	cport    int // cluster port
	storeDir string
	s        *server.Server
}

// cluster is three nats-servers on loopback with routes between them.
type cluster struct {
	t      *testing.T
	nodes  []*node
	routes string
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// newCluster starts nodes n0..n2 and waits for a JetStream meta leader.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	ports := freePorts(t, 6)
	c := &cluster{t: t}
	var routes []string
	for i := range 3 {
		n := &node{name: fmt.Sprintf("n%d", i), port: ports[i], cport: ports[3+i], storeDir: filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i))}
		c.nodes = append(c.nodes, n)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", n.cport))
	}
	c.routes = strings.Join(routes, ",")
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	for i := range c.nodes {
		c.start(i)
	}
	waitFor(t, 20*time.Second, "a JetStream meta leader", func() bool {
		for _, n := range c.nodes {
			if n.s != nil && n.s.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	return c
}

// start (re)starts node i from deploy/nats/nats.conf with the node's
// loopback ports, routes and store directory.
func (c *cluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	opts, err := server.ProcessConfigFile(filepath.Join(root, "deploy/nats/nats.conf"))
	if err != nil {
		c.t.Fatalf("load deploy/nats/nats.conf: %v", err)
	}
	opts.ServerName = n.name
	opts.Host, opts.Port = "127.0.0.1", n.port
	opts.HTTPPort = 0
	opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", n.cport
	opts.Routes = server.RoutesFromStr(c.routes)
	opts.StoreDir = n.storeDir
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		c.t.Fatalf("new server %s: %v", n.name, err)
	}
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		c.t.Fatalf("server %s not ready after 15s", n.name)
	}
	n.s = s
}

// stop shuts node i down and waits for it.
func (c *cluster) stop(i int) {
	n := c.nodes[i]
	if n.s == nil {
		return
	}
	n.s.Shutdown()
	n.s.WaitForShutdown()
	n.s = nil
}

// urls returns the client URLs of all nodes, node first first.
func (c *cluster) urls(first int) string {
	var us []string
	for j := range c.nodes {
		i := (first + j) % len(c.nodes)
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].port))
	}
	return strings.Join(us, ",")
}

func (c *cluster) index(name string) int {
	for i, n := range c.nodes {
		if n.name == name {
			return i
		}
	}
	c.t.Fatalf("no node named %q", name)
	return -1
}

// requestTimeout bounds each JetStream request of the test. A request is
// at most once: one lost with a server, or dropped by a server whose
// assets are changing leader, is never answered, and a request waiting on
// the test's own four-minute context would hold the test that long (it
// did: a consumer info sent while the restarted cluster settled held the
// drain check until the test's context ended, and the test reported
// partitions not drained that had drained long before). The test sends
// such a request again, as nats.go's own default timeout would have it.
const requestTimeout = 5 * time.Second

// request returns ctx bounded by requestTimeout.
func request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

// call runs f, one JetStream call, each attempt bounded by requestTimeout,
// until it succeeds; it fails the test after 30 s of failures.
func call(ctx context.Context, t *testing.T, what string, f func(context.Context) error) {
	t.Helper()
	var err error
	waitFor(t, 30*time.Second, what, func() bool {
		rctx, cancel := request(ctx)
		defer cancel()
		err = f(rctx)
		return err == nil
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connect dials urls in order (no randomization), reconnecting forever.
func connect(t *testing.T, urls, name string, wait time.Duration) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(wait), nats.DontRandomize())
	if err != nil {
		t.Fatalf("connect %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// createStream creates the stream described by deploy/streams/<name>.json,
// decoded strictly (an unknown field fails the test).
func createStream(ctx context.Context, t *testing.T, js jetstream.JetStream, name string, edit ...func(*jetstream.StreamConfig)) jetstream.Stream {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy/streams", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sc jetstream.StreamConfig
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("deploy/streams/%s.json: %v", name, err)
	}
	if sc.Name != name || sc.Replicas != 3 {
		t.Fatalf("deploy/streams/%s.json: name %q replicas %d, want %q and 3", name, sc.Name, sc.Replicas, name)
	}
	for _, e := range edit {
		e(&sc)
	}
	// Placement needs the peers' storage statistics, which the servers
	// gossip a moment after a meta leader is elected: retry until then.
	var s jetstream.Stream
	deadline := time.Now().Add(15 * time.Second)
	for {
		rctx, cancel := request(ctx)
		s, err = js.CreateStream(rctx, sc)
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("create stream from deploy/streams/%s.json: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// workers counts the workers started, to name each one's log.
var workers atomic.Int32

// worker is one kpcastream process of the compose deployment.
type worker struct {
	name string
	cfg  *config.Config
	nc   *nats.Conn
	p    *processor.Processor
	stop func() error
	logs *observer.ObservedLogs
}

// lane reports whether the worker's setup put its pipeline's outputs
// through an ordered lane (its "pipeline" log line's output_lane).
func (w *worker) lane() bool {
	for _, e := range w.logs.FilterMessage("pipeline").All() {
		if v, ok := e.ContextMap()["output_lane"].(bool); ok {
			return v
		}
	}
	return false
}

// startWorker loads deploy/compose/<file> with the project's config loader,
// shortens its timers for the test, and runs a processor connected to urls.
func startWorker(t *testing.T, file, urls string, keyInFlight int, edit ...func(*config.Config)) *worker {
	t.Helper()
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.Load(filepath.Join(root, "deploy/compose", file), noEnv, config.Overrides{NATSURL: &urls})
	if err != nil {
		t.Fatalf("load deploy/compose/%s: %v", file, err)
	}
	// Snapshot and checkpoint often, so both happen around the outage;
	// a short lease so that a crashed worker's partitions move quickly.
	cfg.Processor.CheckpointEvery = 200 * time.Millisecond
	cfg.Processor.LeaseTTL = 6 * time.Second
	for i := range cfg.Pipelines {
		cfg.Pipelines[i].Snapshot.EveryMessages = 25
		cfg.Pipelines[i].Snapshot.Every = time.Second
		cfg.Pipelines[i].Input.NakDelay = 200 * time.Millisecond
		// Deliveries lost with the stopped node come back after ack_wait,
		// and their keys wait for them: keep that short.
		cfg.Pipelines[i].Input.AckWait = 5 * time.Second
		cfg.Pipelines[i].Output.KeyInFlight = keyInFlight
	}
	for _, e := range edit {
		e(cfg)
	}
	nc, js := connect(t, cfg.NATS.URL, cfg.NATS.Name, 250*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := snapshot.Open(ctx, js, cfg.Snapshots)
	if err != nil {
		t.Fatalf("open snapshot store: %v", err)
	}
	// Warnings to the test's log; everything down to debug to seen: the
	// setup's "pipeline" line tells whether the outputs go through a lane,
	// and a failed check prints the lines of its key and partition.
	seen, observed := observer.New(zap.DebugLevel)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel), zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, seen)
	}))).Named(cfg.NATS.Name)
	name := fmt.Sprintf("w%d", workers.Add(1))
	log = log.With(zap.String("proc", name))
	p, err := processor.New(cfg.ProcessorConfig(), processor.Deps{Conn: nc, JS: js, Snapshots: store, Logger: log})
	if err != nil {
		t.Fatalf("processor.New: %v", err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	var once sync.Once
	var runErr error
	w := &worker{name: name, cfg: cfg, nc: nc, p: p, logs: observed}
	w.stop = func() error {
		once.Do(func() {
			rcancel()
			select {
			case runErr = <-done:
			case <-time.After(40 * time.Second):
				runErr = errors.New("Run did not return within 40s")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = w.stop() })
	waitFor(t, 20*time.Second, file+" ready", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("%s: Run returned early: %v", file, err)
		default:
		}
		return p.Ready()
	})
	return w
}

// publisher publishes observations with deterministic message ids and
// retries until the cluster takes them, recording the stream sequence of
// each.
type publisher struct {
	js    jetstream.JetStream
	rng   *rand.Rand
	n     int
	keyOf map[uint64]string // input stream sequence → key
	per   map[string][]uint64
}

func (pb *publisher) publish(t *testing.T, keys []string, count int) {
	t.Helper()
	for range count {
		key := keys[pb.n%len(keys)]
		_, ack := publishObservation(t, pb.js, pb.rng, key, pb.n)
		if prev, dup := pb.keyOf[ack.Sequence]; dup && prev != key {
			t.Fatalf("message in-%d got sequence %d, already held by key %s", pb.n, ack.Sequence, prev)
		}
		if _, dup := pb.keyOf[ack.Sequence]; !dup {
			pb.keyOf[ack.Sequence] = key
			pb.per[key] = append(pb.per[key], ack.Sequence)
		}
		pb.n++
	}
}

// publishObservation publishes key's n-th observation of the schedule (4
// features, the second correlated with the first: some structure for the
// components) with the message id in-<n>, trying again every 100 ms while
// the cluster does not answer, for at most 20 s; a try that was stored but
// whose answer was lost is deduplicated by the id. It returns the
// observation and the answer.
func publishObservation(t *testing.T, js jetstream.JetStream, rng *rand.Rand, key string, n int) ([]float64, *jetstream.PubAck) {
	t.Helper()
	x := make([]float64, 4)
	for j := range x {
		x[j] = rng.NormFloat64()
	}
	x[1] += 0.8 * x[0]
	data, err := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{ID: fmt.Sprint("obs-", n), X: x}})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint("in-", n)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ack, err := js.Publish(ctx, "sensors."+key+".features", data, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			return x, ack
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: no success within 20s: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// streamLeader returns the index of the node leading stream name.
func streamLeader(ctx context.Context, t *testing.T, c *cluster, js jetstream.JetStream, name string) int {
	t.Helper()
	var leader string
	waitFor(t, 20*time.Second, "leader of "+name, func() bool {
		ctx, cancel := request(ctx)
		defer cancel()
		s, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return false
		}
		leader = info.Cluster.Leader
		return true
	})
	return c.index(leader)
}

// owned returns the number of partitions each worker runs.
func owned(ws ...*worker) []int {
	out := make([]int, len(ws))
	for i, w := range ws {
		for _, s := range w.p.Stats() {
			out[i] += len(s.Partitions)
		}
	}
	return out
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// outage stops node i, publishes meanwhile, and restarts it.
func outage(t *testing.T, c *cluster, i int, pb *publisher, keys []string, n int) {
	c.stop(i)
	down := time.Now()
	pb.publish(t, keys, n)
	time.Sleep(1500 * time.Millisecond) // keep the node down a while
	c.start(i)
	t.Logf("%s down for %v", c.nodes[i].name, time.Since(down).Round(time.Millisecond))
}

// TestClusterElastic runs the compose deployment (identical workers
// sharing the 8 partitions of deploy/compose/kpcastream.yaml; R3 streams
// and KV) on a three-node cluster while the workers come and go: two
// workers, a third joins mid-stream, one leaves gracefully while the
// coordination bucket's leader is down, one crashes (connection cut: no
// final snapshots, no release) while the input stream's leader is down,
// and the survivor takes everything over. Every message must be applied
// exactly once: per key, the learner's Seen and last sequence match what
// was published, and the projections form one contiguous run of the key's
// sequences (after its warm-up), none twice.
//
// It runs twice: with one output in flight per key, and through ordered
// lanes (output.key_in_flight 16, KPCA_OUT created with allow_batched),
// where the output stream's leader is also stopped mid-stream: a leader
// change must look to a lane like a gap, never reorder a key's outputs.
func TestClusterElastic(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster test (skipped under -short)")
	}
	t.Run("one-per-key", func(t *testing.T) { clusterElastic(t, 1) })
	t.Run("lane", func(t *testing.T) { clusterElastic(t, 16) })
}

func clusterElastic(t *testing.T, keyInFlight int) {
	lane := keyInFlight > 1
	start := time.Now()
	c := newCluster(t)
	adminNC, adminJS := connect(t, c.urls(0), "admin", 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // the test's own waits bound it; under CPU stress it ran past 80 s
	defer cancel()
	waitFor(t, 15*time.Second, "JetStream account info", func() bool {
		ctx, cancel := request(ctx)
		defer cancel()
		_, err := adminJS.AccountInfo(ctx)
		return err == nil
	})
	in := createStream(ctx, t, adminJS, "SENSORS")
	createStream(ctx, t, adminJS, "KPCA_OUT", func(sc *jetstream.StreamConfig) { sc.AllowBatchPublish = lane })
	first := streamLeader(ctx, t, c, adminJS, "SENSORS")

	// On a failure in any phase: what the servers, the clients and the
	// workers were doing (diagnose), from a little before the phase began.
	var w1, w2, w3 *worker
	var prodNC *nats.Conn
	phase := time.Now()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		conns := map[string]*nats.Conn{"admin": adminNC}
		if prodNC != nil {
			conns["producer"] = prodNC
		}
		var ws []*worker
		for _, w := range []*worker{w1, w2, w3} {
			if w != nil {
				ws = append(ws, w)
			}
		}
		diagnose(t, c, conns, ws, phase.Add(-5*time.Second))
	})
	w1 = startWorker(t, "kpcastream.yaml", c.urls(first), keyInFlight)
	w2 = startWorker(t, "kpcastream.yaml", c.urls(first+1), keyInFlight)
	pc := w1.cfg.ProcessorConfig().WithDefaults().Pipelines[0]
	if pc.Partitions < 4 {
		t.Fatalf("deploy/compose/kpcastream.yaml has %d partitions; the test needs at least 4", pc.Partitions)
	}
	waitFor(t, 20*time.Second, "w1 and w2 share the partitions", func() bool {
		o := owned(w1, w2)
		return sum(o) == pc.Partitions && o[0] > 0 && o[1] > 0
	})
	for _, b := range []string{w1.cfg.Snapshots.Bucket, processor.DefaultCheckpointBucket} {
		var st jetstream.KeyValueStatus
		call(ctx, t, "status of bucket "+b, func(ctx context.Context) error {
			kv, err := adminJS.KeyValue(ctx, b)
			if err == nil {
				st, err = kv.Status(ctx)
			}
			return err
		})
		// The checkpoint bucket follows snapshots.replicas (3 in the compose config).
		if got := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; got != w1.cfg.Snapshots.Replicas {
			t.Errorf("KV bucket %s: %d replicas, want snapshots.replicas = %d", b, got, w1.cfg.Snapshots.Replicas)
		}
	}

	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}
	var prodJS jetstream.JetStream
	prodNC, prodJS = connect(t, c.urls(first+2), "producer", 100*time.Millisecond)
	pb := &publisher{js: prodJS, rng: rand.New(rand.NewPCG(4, 2)), keyOf: map[uint64]string{}, per: map[string][]uint64{}}
	pb.publish(t, keys, 200)

	// A third worker joins: it gets its share, ⌊8/3⌋ or ⌈8/3⌉ partitions.
	phase = time.Now()
	w3 = startWorker(t, "kpcastream.yaml", c.urls(first+2), keyInFlight)
	pb.publish(t, keys, 100)
	waitFor(t, 20*time.Second, "w3 took its share", func() bool {
		o := owned(w1, w2, w3)
		return sum(o) == pc.Partitions && o[2] >= pc.Partitions/3
	})
	t.Logf("after the join: partitions per worker %v", owned(w1, w2, w3))
	for i, w := range []*worker{w1, w2, w3} {
		if w.lane() != lane {
			t.Fatalf("worker %d: outputs through a lane %v, want %v", i+1, w.lane(), lane)
		}
	}
	if lane {
		// The output stream's leader goes down with batches open.
		phase = time.Now()
		outage(t, c, streamLeader(ctx, t, c, adminJS, "KPCA_OUT"), pb, keys, 120)
	}

	// w2 leaves gracefully while the coordination bucket's leader is down.
	bucketLeader := streamLeader(ctx, t, c, adminJS, "KV_"+processor.DefaultCheckpointBucket)
	phase = time.Now()
	left := make(chan error, 1)
	go func() { left <- w2.stop() }()
	outage(t, c, bucketLeader, pb, keys, 120)
	if err := <-left; err != nil {
		t.Fatalf("graceful stop of w2: %v", err)
	}
	waitFor(t, 30*time.Second, "w1 and w3 share the partitions", func() bool {
		o := owned(w1, w3)
		return sum(o) == pc.Partitions && o[0] > 0 && o[1] > 0
	})
	t.Logf("after the leave: partitions per worker %v", owned(w1, w3))
	pb.publish(t, keys, 100)

	// w1 crashes while the input stream's leader is down.
	phase = time.Now()
	w1.nc.Close()
	crashed := time.Now()
	outage(t, c, streamLeader(ctx, t, c, adminJS, "SENSORS"), pb, keys, 120)
	waitFor(t, 40*time.Second, "w3 took every partition over", func() bool { return owned(w3)[0] == pc.Partitions })
	t.Logf("takeover after the crash: %v (lease_ttl %v)", time.Since(crashed).Round(time.Millisecond), w1.cfg.Processor.LeaseTTL)
	_ = w1.stop()
	pb.publish(t, keys, 160)
	total := pb.n

	// Wait until every partition's consumer has nothing pending or
	// unacknowledged and has acknowledged its partition's last message.
	// (NumPending alone is computed on the consumer leader's replica of the
	// stream, which may lag behind after a restart.)
	var ckpt jetstream.KeyValue
	call(ctx, t, "the checkpoint bucket", func(ctx context.Context) (err error) {
		ckpt, err = adminJS.KeyValue(ctx, processor.DefaultCheckpointBucket)
		return err
	})
	var why []string // the last check's reason per partition, logged on a timeout
	t.Cleanup(func() {
		if t.Failed() && len(why) > 0 {
			t.Logf("partitions not drained at the last check:\n%s", strings.Join(why, "\n"))
		}
	})
	told, waited := time.Now(), time.Now()
	checks, unanswered := 0, 0
	waitFor(t, 60*time.Second, "every partition drained", func() bool {
		why = why[:0]
		ok := true
		checks++
		for n := range pc.Partitions {
			if r := partitionDrained(ctx, ckpt, in, pc.Name, pc.Input.Durable, n); r != "" {
				why = append(why, fmt.Sprintf("partition %d: %s", n, r))
				ok = false
				if strings.Contains(r, context.DeadlineExceeded.Error()) {
					unanswered++
				}
			}
		}
		if !ok && time.Since(told) > 10*time.Second {
			told = time.Now()
			t.Logf("partitions not drained yet:\n%s", strings.Join(why, "\n"))
		}
		return ok
	})
	t.Logf("drained %v after the wait began: %d checks; %d requests unanswered within %v, each sent again at the next check",
		time.Since(waited).Round(time.Millisecond), checks, unanswered, requestTimeout)
	if err := w3.stop(); err != nil {
		t.Fatalf("w3: Run: %v", err)
	}
	t.Logf("w3 stats: %+v", w3.p.Stats()[0])

	// Inputs: exactly total messages, sequences 1..total.
	var info *jetstream.StreamInfo
	call(ctx, t, "SENSORS info", func(ctx context.Context) (err error) {
		info, err = in.Info(ctx)
		return err
	})
	if int(info.State.Msgs) != total || int(info.State.LastSeq) != total || len(pb.keyOf) != total {
		t.Fatalf("SENSORS holds %d messages (last seq %d), %d distinct acks; want %d", info.State.Msgs, info.State.LastSeq, len(pb.keyOf), total)
	}

	// Learner state: each key's final snapshot has Seen equal to its
	// message count and LastSeq its last sequence.
	var store *snapshot.Store
	call(ctx, t, "the snapshot store", func(ctx context.Context) (err error) {
		store, err = snapshot.Open(ctx, adminJS, w1.cfg.Snapshots)
		return err
	})
	for _, key := range keys {
		snap, err := loadLatest(ctx, t, adminNC, store, pc.Name, key)
		if err != nil {
			t.Errorf("load snapshot %s/%s: %v", pc.Name, key, err)
			continue
		}
		seqs := pb.per[key]
		if snap.State.Seen != int64(len(seqs)) || snap.LastSeq != seqs[len(seqs)-1] {
			t.Errorf("key %s: Seen %d, LastSeq %d; want %d and %d", key, snap.State.Seen, snap.LastSeq, len(seqs), seqs[len(seqs)-1])
			explainLag(ctx, t, ckpt, []*worker{w1, w2, w3}, pc.Name, key, seqs, snap)
		}
	}

	// Outputs: per key, the projected sequences are the key's sequences
	// after its warm-up, each once.
	outs := readOutputs(ctx, t, adminJS)
	for _, key := range keys {
		seqs := pb.per[key]
		got := outs[key]
		if len(got) == 0 || len(got) > len(seqs) {
			t.Errorf("key %s: %d projections for %d messages", key, len(got), len(seqs))
			continue
		}
		if want := seqs[len(seqs)-len(got):]; !slices.Equal(got, want) {
			t.Errorf("key %s: projected sequences\n got %v\nwant %v (the last %d of the key's)", key, got, want, len(got))
		}
	}
	for key := range outs {
		if !slices.Contains(keys, key) {
			t.Errorf("projection for unknown key %q", key)
		}
	}
	t.Logf("%d messages, %d keys, workers joining, leaving and crashing while nodes were down: all applied once; %v",
		total, len(keys), time.Since(start).Round(time.Millisecond))
}

// partitionDrained says why partition n is not drained ("" when it is):
// its record, its consumer's pending, unacknowledged and ack floor.
func partitionDrained(ctx context.Context, ckpt jetstream.KeyValue, in jetstream.Stream, pipeline, durable string, n int) string {
	// A request that no server answers costs this check, not the test's
	// whole context (requestTimeout).
	ctx, cancel := request(ctx)
	defer cancel()
	e, err := ckpt.Get(ctx, fmt.Sprintf("partitions.%s.%d", pipeline, n))
	if err != nil {
		return "record: " + err.Error()
	}
	var rec struct {
		Owner      string `json:"owner"`
		Epoch      uint64 `json:"epoch"`
		Checkpoint uint64 `json:"checkpoint"`
	}
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Owner == "" {
		return fmt.Sprintf("record %s: no owner", e.Value())
	}
	name := fmt.Sprintf("%s-p%d-e%d", durable, n, rec.Epoch)
	cons, err := in.Consumer(ctx, name)
	if err != nil {
		return fmt.Sprintf("owner %s epoch %d checkpoint %d: consumer %s: %v", rec.Owner, rec.Epoch, rec.Checkpoint, name, err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return fmt.Sprintf("consumer %s info: %v", name, err)
	}
	last, lerr := in.GetLastMsgForSubject(ctx, ci.Config.FilterSubject)
	if ci.NumPending != 0 || ci.NumAckPending != 0 || (lerr == nil && ci.AckFloor.Stream < last.Sequence) {
		ls := uint64(0)
		if lerr == nil {
			ls = last.Sequence
		}
		return fmt.Sprintf("owner %s epoch %d checkpoint %d: consumer %s pending %d, ack pending %d, redelivered %d, delivered %d, ack floor %d, last %d",
			rec.Owner, rec.Epoch, rec.Checkpoint, name, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Delivered.Stream, ci.AckFloor.Stream, ls)
	}
	return ""
}

// readOutputs reads KPCA_OUT and returns, per key, the input sequences of
// the projections in stream order.
func readOutputs(ctx context.Context, t *testing.T, js jetstream.JetStream) map[string][]uint64 {
	t.Helper()
	var s jetstream.Stream
	var info *jetstream.StreamInfo
	call(ctx, t, "KPCA_OUT info", func(ctx context.Context) (err error) {
		if s, err = js.Stream(ctx, "KPCA_OUT"); err == nil {
			info, err = s.Info(ctx)
		}
		return err
	})
	if info.State.Msgs != info.State.LastSeq-info.State.FirstSeq+1 {
		t.Fatalf("KPCA_OUT has %d messages in sequences %d..%d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	}
	outs := map[string][]uint64{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		var m *jetstream.RawStreamMsg
		var err error
		waitFor(t, 10*time.Second, fmt.Sprint("output ", seq), func() bool {
			ctx, cancel := request(ctx)
			defer cancel()
			m, err = s.GetMsg(ctx, seq)
			return err == nil
		})
		o, err := codec.DecodeOutput(m.Data, codec.JSON)
		if err != nil {
			t.Fatalf("decode output %q: %v", m.Data, err)
		}
		if want := "kpca.out.sensors." + o.Key; m.Subject != want {
			t.Errorf("output of key %s on %s, want %s", o.Key, m.Subject, want)
		}
		outs[o.Key] = append(outs[o.Key], o.Seq)
	}
	return outs
}
