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
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

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
func createStream(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) jetstream.Stream {
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
	// Placement needs the peers' storage statistics, which the servers
	// gossip a moment after a meta leader is elected: retry until then.
	var s jetstream.Stream
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err = js.CreateStream(ctx, sc)
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("create stream from deploy/streams/%s.json: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// worker is one kpcastream process of the compose deployment.
type worker struct {
	cfg  *config.Config
	nc   *nats.Conn
	p    *processor.Processor
	stop func() error
}

// startWorker loads deploy/compose/<file> with the project's config loader,
// shortens its timers for the test, and runs a processor connected to urls.
func startWorker(t *testing.T, file, urls string) *worker {
	t.Helper()
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.Load(filepath.Join(root, "deploy/compose", file), noEnv, config.Overrides{NATSURL: &urls})
	if err != nil {
		t.Fatalf("load deploy/compose/%s: %v", file, err)
	}
	// Snapshot and checkpoint often, so both happen around the outage.
	cfg.Processor.CheckpointEvery = 200 * time.Millisecond
	for i := range cfg.Pipelines {
		cfg.Pipelines[i].Snapshot.EveryMessages = 25
		cfg.Pipelines[i].Snapshot.Every = time.Second
		cfg.Pipelines[i].Input.NakDelay = 200 * time.Millisecond
		// Deliveries lost with the stopped node come back after ack_wait,
		// and their keys wait for them: keep that short.
		cfg.Pipelines[i].Input.AckWait = 5 * time.Second
	}
	nc, js := connect(t, cfg.NATS.URL, cfg.NATS.Name, 250*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := snapshot.Open(ctx, js, cfg.Snapshots.Config())
	if err != nil {
		t.Fatalf("open snapshot store: %v", err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(cfg.NATS.Name)
	p, err := processor.New(cfg.ProcessorConfig(), processor.Deps{Conn: nc, JS: js, Snapshots: store, Logger: log})
	if err != nil {
		t.Fatalf("processor.New: %v", err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	var once sync.Once
	var runErr error
	w := &worker{cfg: cfg, nc: nc, p: p}
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
		x := make([]float64, 4)
		for j := range x {
			x[j] = pb.rng.NormFloat64()
		}
		x[1] += 0.8 * x[0] // some structure for the components
		data, err := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{ID: fmt.Sprint("obs-", pb.n), X: x}})
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint("in-", pb.n)
		deadline := time.Now().Add(20 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ack, err := pb.js.Publish(ctx, "sensors."+key+".features", data, jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				if prev, dup := pb.keyOf[ack.Sequence]; dup && prev != key {
					t.Fatalf("message %s got sequence %d, already held by key %s", id, ack.Sequence, prev)
				}
				if _, dup := pb.keyOf[ack.Sequence]; !dup {
					pb.keyOf[ack.Sequence] = key
					pb.per[key] = append(pb.per[key], ack.Sequence)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("publish %s: no success within 20s: %v", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		pb.n++
	}
}

// TestClusterFailover runs the compose deployment (two partitioned workers,
// R3 streams and KV) on a three-node cluster, shuts the input stream's
// leader down in the middle of the stream, restarts it, and checks that
// every message was applied exactly once: per key, the learner's Seen and
// last sequence match what was published, and the projections form one
// contiguous run of the key's sequences (after its warm-up), none twice.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster test (skipped under -short)")
	}
	start := time.Now()
	c := newCluster(t)
	_, adminJS := connect(t, c.urls(0), "admin", 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	waitFor(t, 15*time.Second, "JetStream account info", func() bool {
		_, err := adminJS.AccountInfo(ctx)
		return err == nil
	})
	in := createStream(ctx, t, adminJS, "SENSORS")
	createStream(ctx, t, adminJS, "KPCA_OUT")
	info, err := in.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("SENSORS has no leader: %+v", info.Cluster)
	}
	victim := c.index(info.Cluster.Leader)

	// Both workers connect to the victim first.
	workers := []*worker{startWorker(t, "kpcastream-p0.yaml", c.urls(victim)), startWorker(t, "kpcastream-p1.yaml", c.urls(victim))}
	for _, w := range workers {
		if got := w.nc.ConnectedServerName(); got != c.nodes[victim].name {
			t.Fatalf("worker %s connected to %s, want the stream leader %s", w.cfg.NATS.Name, got, c.nodes[victim].name)
		}
	}
	for _, b := range []string{workers[0].cfg.Snapshots.Bucket, processor.DefaultCheckpointBucket} {
		kv, err := adminJS.KeyValue(ctx, b)
		if err != nil {
			t.Fatalf("bucket %s: %v", b, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The checkpoint bucket follows snapshots.replicas (3 in the compose configs).
		if got := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas; got != workers[0].cfg.Snapshots.Replicas {
			t.Errorf("KV bucket %s: %d replicas, want snapshots.replicas = %d", b, got, workers[0].cfg.Snapshots.Replicas)
		}
	}

	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	_, prodJS := connect(t, c.urls((victim+1)%3), "producer", 100*time.Millisecond)
	pb := &publisher{js: prodJS, rng: rand.New(rand.NewPCG(4, 2)), keyOf: map[uint64]string{}, per: map[string][]uint64{}}
	pb.publish(t, keys, 320)
	c.stop(victim)
	down := time.Now()
	t.Logf("stopped %s (SENSORS leader, the workers' server) after %d messages", c.nodes[victim].name, pb.n)
	pb.publish(t, keys, 120)
	time.Sleep(1500 * time.Millisecond) // keep the node down a while
	pb.publish(t, keys, 120)
	c.start(victim)
	t.Logf("restarted %s after %v; %d messages published", c.nodes[victim].name, time.Since(down).Round(time.Millisecond), pb.n)
	pb.publish(t, keys, 240)
	const total = 800

	// Wait until both consumers have nothing pending or unacknowledged and
	// have acknowledged their partition's last message. (NumPending alone
	// is computed on the consumer leader's replica of the stream, which may
	// lag behind after the restart.)
	waitFor(t, 30*time.Second, "both consumers drained", func() bool {
		for _, w := range workers {
			pc := w.cfg.ProcessorConfig().WithDefaults().Pipelines[0]
			last, err := in.GetLastMsgForSubject(ctx, pc.Input.Subject)
			if err != nil {
				return false
			}
			cons, err := adminJS.Consumer(ctx, "SENSORS", pc.Input.Durable)
			if err != nil {
				return false
			}
			ci, err := cons.Info(ctx)
			if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 || ci.AckFloor.Stream < last.Sequence {
				return false
			}
		}
		return true
	})
	for _, w := range workers {
		if err := w.stop(); err != nil {
			t.Fatalf("worker %s: Run: %v", w.cfg.NATS.Name, err)
		}
		t.Logf("worker %s stats: %+v", w.cfg.NATS.Name, w.p.Stats()[0])
	}

	// Inputs: exactly total messages, sequences 1..total.
	info, err = in.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != total || info.State.LastSeq != total || len(pb.keyOf) != total {
		t.Fatalf("SENSORS holds %d messages (last seq %d), %d distinct acks; want %d", info.State.Msgs, info.State.LastSeq, len(pb.keyOf), total)
	}

	// Learner state: each key's final snapshot is in exactly one partition,
	// with Seen equal to its message count and LastSeq its last sequence.
	store, err := snapshot.Open(ctx, adminJS, workers[0].cfg.Snapshots.Config())
	if err != nil {
		t.Fatal(err)
	}
	perPartition := map[string]int{}
	for _, key := range keys {
		var found []string
		for _, w := range workers {
			name := w.cfg.Pipelines[0].Name
			snap, _, err := store.Load(ctx, snapshot.JoinKey(name, key))
			if errors.Is(err, snapshot.ErrNoSnapshot) {
				continue
			}
			if err != nil {
				t.Fatalf("load snapshot %s/%s: %v", name, key, err)
			}
			found = append(found, name)
			perPartition[name]++
			seqs := pb.per[key]
			if snap.State.Seen != int64(len(seqs)) || snap.LastSeq != seqs[len(seqs)-1] {
				t.Errorf("key %s (%s): Seen %d, LastSeq %d; want %d and %d", key, name, snap.State.Seen, snap.LastSeq, len(seqs), seqs[len(seqs)-1])
			}
		}
		if len(found) != 1 {
			t.Errorf("key %s has snapshots in %v, want exactly one partition", key, found)
		}
	}
	for _, w := range workers {
		if perPartition[w.cfg.Pipelines[0].Name] == 0 {
			t.Errorf("partition %s got no key: the workers did not share the load", w.cfg.Pipelines[0].Name)
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

	// The restarted node rejoined: SENSORS has two current followers.
	waitFor(t, 15*time.Second, "SENSORS replicas current", func() bool {
		info, err := in.Info(ctx)
		if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	})
	t.Logf("%d messages, %d keys, one node down for part of the stream: all applied once; %v", total, len(keys), time.Since(start).Round(time.Millisecond))
}

// readOutputs reads KPCA_OUT and returns, per key, the input sequences of
// the projections in stream order.
func readOutputs(ctx context.Context, t *testing.T, js jetstream.JetStream) map[string][]uint64 {
	t.Helper()
	s, err := js.Stream(ctx, "KPCA_OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != info.State.LastSeq-info.State.FirstSeq+1 {
		t.Fatalf("KPCA_OUT has %d messages in sequences %d..%d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	}
	outs := map[string][]uint64{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		var m *jetstream.RawStreamMsg
		waitFor(t, 10*time.Second, fmt.Sprint("output ", seq), func() bool {
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
