package proctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

// program is an executable the tests run: taken prebuilt from an
// environment variable (a machine without Go), else built once per test
// run.
type program struct {
	env, name, pkg string // the variable, the file's name, what go build builds
	once           sync.Once
	path           string
	err            error
}

// get returns the program's path, building it on first use.
func (pr *program) get(t testing.TB) string {
	t.Helper()
	pr.once.Do(func() {
		if bin := os.Getenv(pr.env); bin != "" {
			pr.path = bin
			return
		}
		dir, err := os.MkdirTemp("", "kpcastream-proctest")
		if err != nil {
			pr.err = err
			return
		}
		pr.path = filepath.Join(dir, pr.name)
		out, err := exec.Command("go", "build", "-o", pr.path, pr.pkg).CombinedOutput()
		if err != nil {
			pr.err = fmt.Errorf("go build %s: %v\n%s", pr.name, err, out)
		}
	})
	if pr.err != nil {
		t.Fatal(pr.err)
	}
	return pr.path
}

var kpcastreamProgram = &program{env: "KPCASTREAM_BIN", name: "kpcastream", pkg: "../../cmd/kpcastream"}

// binary returns the kpcastream executable (KPCASTREAM_BIN, or built
// once per test run).
func binary(t testing.TB) string { return kpcastreamProgram.get(t) }

const (
	ttl        = time.Second
	partitions = 4
)

var learnerCfg = learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 16,
	Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Forget: 0.99, Seed: 3}

func config(url string) string { return configParts(url, partitions) }

// configParts is config with n partitions.
func configParts(url string, n int) string {
	return fmt.Sprintf(`
nats: {url: %q}
log: {level: info, format: json}
http: {metrics_addr: "off"}
workers: 2
lease_ttl: %s
checkpoint_every: 100ms
shutdown_timeout: 5s
pipelines:
  - name: proc
    partitions: %d
    input: {stream: PIN, subject: "pin.*", create_stream: true, nak_delay: 100ms, ack_wait: 5s}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}, forget: 0.99, seed: 3}
    output: {subject: "pout.{key}", stream: POUT, create_stream: true, encoding: json, key_in_flight: 1}
    snapshot: {every_messages: 10, every: -1s}
`, url, ttl, n)
}

// proc is one running "kpcastream run".
type proc struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
	mu   *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func start(t testing.TB, cfgFile string) *proc {
	t.Helper()
	p := &proc{logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
	p.cmd = exec.Command(binary(t), "run", "--config", cfgFile)
	p.cmd.Stdout = lockedWriter{p.mu, p.logs}
	p.cmd.Stderr = lockedWriter{p.mu, p.logs}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		_, _ = p.cmd.Process.Wait()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("logs of pid %d:\n%s", p.cmd.Process.Pid, tail(p.logs.String(), 60))
			p.mu.Unlock()
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pid %d exited with %v", p.cmd.Process.Pid, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("pid %d did not exit 30s after SIGTERM", p.cmd.Process.Pid)
	}
}

// world is the server, a client and the workload of one test.
type world struct {
	t     testing.TB
	parts int // partitions of the pipeline; 0: partitions
	js    jetstream.JetStream
	coord jetstream.KeyValue
	cfg   string
	keys  []string
	data  map[string][][]float64
	sent  map[string]int
	nsent int
	rng   *rand.Rand
}

func newWorld(t *testing.T) *world { return newWorldEdit(t, nil) }

// newWorldEdit is newWorld with edit applied to the configuration's text.
func newWorldEdit(t *testing.T, edit func(string) string) *world {
	if testing.Short() {
		t.Skip("process-level fault test (builds and execs kpcastream; skipped under -short)")
	}
	binary(t)
	_, url := natstest.RunServer(t)
	_, js := natstest.Connect(t, url)
	cfg := filepath.Join(t.TempDir(), "kpcastream.yaml")
	text := config(url)
	if edit != nil {
		text = edit(text)
	}
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, js: js, cfg: cfg, data: map[string][][]float64{}, sent: map[string]int{}, rng: rand.New(rand.NewPCG(11, 12))}
	for i := range 12 {
		k := fmt.Sprintf("key%d", i)
		w.keys = append(w.keys, k)
		w.data[k] = make([][]float64, 0, 200)
	}
	return w
}

// publish publishes n observations over the keys, each acked by the stream.
func (w *world) publish(n int) { w.publishN(n, false) }

// publishAsync publishes n observations like publish, without waiting
// for each acknowledgement (as fast as the stream takes them), and then
// waits for all of them.
func (w *world) publishAsync(n int) { w.publishN(n, true) }

func (w *world) publishN(n int, async bool) {
	t := w.t
	for range n {
		k := w.keys[w.rng.IntN(len(w.keys))]
		a := w.rng.NormFloat64()
		x := []float64{a + 0.1*w.rng.NormFloat64(), 2*a + 0.1*w.rng.NormFloat64(), w.rng.NormFloat64()}
		w.data[k] = append(w.data[k], x)
		b, err := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{X: x, ID: fmt.Sprint(w.nsent)}})
		if err != nil {
			t.Fatal(err)
		}
		id := jetstream.WithMsgID(fmt.Sprint("in-", w.nsent))
		if async {
			_, err = w.js.PublishAsync("pin."+k, b, id)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = w.js.Publish(ctx, "pin."+k, b, id)
			cancel()
		}
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		w.sent[k]++
		w.nsent++
	}
	if !async {
		return
	}
	select {
	case <-w.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("input publishes not acknowledged within 30s")
	}
}

// outputs returns the number of messages in the output stream.
func (w *world) outputs() uint64 {
	s, err := w.js.Stream(context.Background(), "POUT")
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// bucket returns the coordination bucket once the workers created it.
func (w *world) bucket() jetstream.KeyValue {
	if w.coord == nil {
		waitFor(w.t, 20*time.Second, "coordination bucket", func() bool {
			kv, err := w.js.KeyValue(context.Background(), "kpcastream-checkpoints")
			w.coord = kv
			return err == nil
		})
	}
	return w.coord
}

type record struct {
	Owner      string `json:"owner"`
	Epoch      uint64 `json:"epoch"`
	Checkpoint uint64 `json:"checkpoint"`
}

// owners returns the record of each partition.
func (w *world) owners() []record {
	out := make([]record, w.partitions())
	for i := range out {
		e, err := w.bucket().Get(context.Background(), fmt.Sprintf("partitions.proc.%d", i))
		if err == nil {
			_ = json.Unmarshal(e.Value(), &out[i])
		}
	}
	return out
}

// memberOf returns the member id of process pid (from its heartbeat).
func (w *world) memberOf(pid int) string {
	var id string
	waitFor(w.t, 20*time.Second, fmt.Sprintf("heartbeat of pid %d", pid), func() bool {
		keys, err := w.bucket().ListKeys(context.Background())
		if err != nil {
			return false
		}
		for k := range keys.Keys() {
			if !strings.HasPrefix(k, "members.") {
				continue
			}
			e, err := w.bucket().Get(context.Background(), k)
			if err != nil {
				continue
			}
			var v struct {
				ID  string `json:"id"`
				PID int    `json:"pid"`
			}
			if json.Unmarshal(e.Value(), &v) == nil && v.PID == pid {
				id = v.ID
			}
		}
		return id != ""
	})
	return id
}

func (w *world) count(who string) int {
	n := 0
	for _, r := range w.owners() {
		if r.Owner == who {
			n++
		}
	}
	return n
}

// drained reports whether every partition's consumer acked everything.
func (w *world) drained() bool {
	ctx := context.Background()
	s, err := w.js.Stream(ctx, "PIN")
	if err != nil {
		return false
	}
	parts := map[string]bool{}
	names := s.ConsumerNames(ctx)
	var list []string
	for n := range names.Name() {
		list = append(list, n)
	}
	for _, n := range list {
		c, err := s.Consumer(ctx, n)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 {
			return false
		}
		parts[ci.Config.FilterSubject] = true
	}
	return len(parts) == w.partitions()
}

func (w *world) partitions() int {
	if w.parts > 0 {
		return w.parts
	}
	return partitions
}

// check compares every key's final snapshot with a reference learner fed
// the key's observations in order, and the output stream with the outputs
// the reference gives (one per observation of a ready learner).
//
// A partition whose owner was fenced while it stopped (under CPU stress a
// renewal can miss lease_ttl/2 = 0.5 s while the stop's final saves run)
// is released without those saves, at a checkpoint its next owner replays
// from: nothing is lost, but the stored states lag the stream. check then
// starts one more worker, lets it take every partition and drain, stops it
// and checks: the replay must bring every state to the uninterrupted run's
// (a checkpoint past an unsaved message would leave it behind for good).
func (w *world) check() {
	if lag := w.lagging(); len(lag) > 0 {
		w.t.Logf("%d keys' stored states lag the stream after the stop (e.g. %s; records %+v): replaying with a fresh worker", len(lag), lag[0], w.owners())
		w.replayAll()
	}
	w.checkRun(snapshot.Config{}, readOutputs(w.t, w.js, "POUT"))
}

// lagging returns the keys whose stored state has learned fewer
// observations than were published to them.
func (w *world) lagging() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := snapshot.Open(ctx, w.js, snapshot.Config{})
	if err != nil {
		w.t.Fatal(err)
	}
	var lag []string
	for _, k := range w.keys {
		if w.sent[k] == 0 {
			continue
		}
		if snap, _, err := store.Load(ctx, snapshot.JoinKey("proc", k)); err != nil || snap.State.Seen < int64(w.sent[k]) {
			lag = append(lag, k)
		}
	}
	return lag
}

// replayAll runs one fresh worker until it owns every partition and its
// own consumers have acked the whole stream, then stops it.
func (w *world) replayAll() {
	p := start(w.t, w.cfg)
	id := w.memberOf(p.cmd.Process.Pid)
	waitFor(w.t, 30*time.Second, "the fresh worker owns every partition", func() bool { return w.count(id) == w.partitions() })
	waitFor(w.t, 60*time.Second, "the fresh worker drained the stream", func() bool { return w.drainedBy(w.owners()) })
	p.stop(w.t)
}

// drainedBy reports whether each partition's consumer is the one of its
// record's epoch (kpcastream-proc-p<i>-e<epoch>) and has acked everything.
func (w *world) drainedBy(recs []record) bool {
	ctx := context.Background()
	s, err := w.js.Stream(ctx, "PIN")
	if err != nil {
		return false
	}
	want := map[string]bool{}
	for i, r := range recs {
		want[fmt.Sprintf("kpcastream-proc-p%d-e%d", i, r.Epoch)] = true
	}
	var list []string
	for n := range s.ConsumerNames(ctx).Name() {
		list = append(list, n)
	}
	for _, n := range list {
		if !want[n] {
			return false // an earlier owner's, not yet deleted
		}
		c, err := s.Consumer(ctx, n)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 {
			return false
		}
		delete(want, n)
	}
	return len(want) == 0
}

// checkRun checks a finished run: every key's stored state (read through
// a snapshot store opened with sc) equals an uninterrupted run over the
// messages published to it, and outs, the output stream in stream order,
// holds one output per observation of a ready learner, per key in input
// order, each id once.
func (w *world) checkRun(sc snapshot.Config, outs []output) {
	t := w.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := snapshot.Open(ctx, w.js, sc)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := 0
	for _, k := range w.keys {
		ref, err := learners.New(learnerCfg)
		if err != nil {
			t.Fatal(err)
		}
		z := make([]float64, learnerCfg.Components)
		for _, x := range w.data[k] {
			if err := ref.Learn(x); err != nil {
				t.Fatal(err)
			}
			if _, err := ref.Transform(z, x); err == nil {
				wantOut++
			}
		}
		snap, _, err := store.Load(ctx, snapshot.JoinKey("proc", k))
		if w.sent[k] == 0 { // a key of a many-keys world that drew no message
			if err == nil {
				t.Errorf("key %s: a snapshot, though nothing was published to it", k)
			}
			continue
		}
		if err != nil {
			t.Errorf("key %s: %v", k, err)
			continue
		}
		if snap.State.Seen != int64(w.sent[k]) {
			t.Errorf("key %s: learned %d observations, %d were published", k, snap.State.Seen, w.sent[k])
		} else if !reflect.DeepEqual(snap.State, ref.State()) {
			t.Errorf("key %s: state differs from an uninterrupted run", k)
		}
	}
	if len(outs) != wantOut {
		t.Errorf("output stream holds %d projections, want %d (one per observation of a ready learner)", len(outs), wantOut)
	}
	last := map[string]uint64{}
	ids := map[string]bool{}
	bad := 0
	for i, o := range outs {
		if o.seq <= last[o.key] || ids[o.id] {
			if bad++; bad <= 10 {
				t.Errorf("key %s: output %d (input %d, id %s) follows the output of input %d, or its id came before (out of order or twice)",
					o.key, i, o.seq, o.id, last[o.key])
			}
		}
		last[o.key], ids[o.id] = max(last[o.key], o.seq), true
	}
	if bad > 10 {
		t.Errorf("... %d outputs out of order or twice in all", bad)
	}
	t.Logf("%d messages over %d keys (%d with outputs): every state checked against the uninterrupted run's; %d outputs", w.nsent, len(w.keys), len(last), len(outs))
}

// partitionOf is the partition of key: FNV-1a 32 mod partitions, as the
// input stream's subject transform computes it.
func partitionOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % partitions)
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKillOwner SIGKILLs the member owning the most partitions in the
// middle of the stream; the other takes its partitions over after
// lease_ttl and replays them from their checkpoints.
func TestKillOwner(t *testing.T) {
	w := newWorld(t)
	a, b := start(t, w.cfg), start(t, w.cfg)
	ida, idb := w.memberOf(a.cmd.Process.Pid), w.memberOf(b.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "both own partitions", func() bool { return w.count(ida) == 2 && w.count(idb) == 2 })
	w.publish(300)
	victim, survivor, sid := a, b, idb
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = victim.cmd.Process.Wait()
	killed := time.Now()
	w.publish(100)
	waitFor(t, 20*time.Second, "survivor owns every partition", func() bool { return w.count(sid) == partitions })
	took := time.Since(killed)
	t.Logf("takeover after SIGKILL: %v (lease_ttl %v)", took.Round(time.Millisecond), ttl)
	if took > 3*ttl {
		t.Errorf("takeover took %v, more than 3 × lease_ttl", took)
	}
	w.publish(200)
	waitFor(t, 30*time.Second, "drained", w.drained)
	survivor.stop(t)
	w.check()
}

// TestKillWithPublishesInFlight SIGKILLs an owner while its output
// window is busy — inputs arriving as fast as the stream takes them, the
// output stream growing, the partitions not drained — so that it dies
// with publishes in flight and outputs queued: the survivor's replay must
// give every key the state of an uninterrupted run, and the output stream
// each output once, per key in input order.
//
// It runs twice: with one output in flight per key (key_in_flight: 1, the
// test configuration's), and with up to 16 per key through ordered lanes (output.key_in_flight: 16, an
// output stream created with allow_batched), whose batch dies with the
// process.
func TestKillWithPublishesInFlight(t *testing.T) {
	t.Run("one-per-key", func(t *testing.T) { killWithPublishesInFlight(t, newWorld(t)) })
	t.Run("lane", func(t *testing.T) {
		ranLanes(t, killWithPublishesInFlight(t, newWorldEdit(t, laneConfig(t)))...)
	})
}

// ranLanes checks that every process published through lanes (its setup
// log line's output_lane).
func ranLanes(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		p.mu.Lock()
		logs := p.logs.String()
		p.mu.Unlock()
		if !strings.Contains(logs, `"output_lane":true`) {
			t.Errorf("pid %d ran without lanes (no \"output_lane\":true in its log)", p.cmd.Process.Pid)
		}
	}
}

// laneConfig edits the test configuration to publish through ordered
// lanes with up to 16 outputs of a key in flight.
func laneConfig(t *testing.T) func(string) string {
	return func(c string) string {
		const out = `create_stream: true, encoding: json, key_in_flight: 1}`
		if !strings.Contains(c, out) {
			t.Fatalf("the test config has no output line ending %q", out)
		}
		return strings.Replace(c, out, `create_stream: true, encoding: json, key_in_flight: 16}`, 1)
	}
}

// killWithPublishesInFlight runs the test in w and returns the killed
// process and the survivor.
func killWithPublishesInFlight(t *testing.T, w *world) []*proc {
	a, b := start(t, w.cfg), start(t, w.cfg)
	ida, idb := w.memberOf(a.cmd.Process.Pid), w.memberOf(b.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "both own partitions", func() bool { return w.count(ida) == 2 && w.count(idb) == 2 })
	done := make(chan struct{})
	go func() { // no t.Fatal here: the test goroutine checks what the kill hit
		defer close(done)
		for end := time.Now().Add(20 * time.Second); w.outputs() <= 100 && time.Now().Before(end); {
			time.Sleep(2 * time.Millisecond)
		}
		_ = a.cmd.Process.Kill()
	}()
	w.publishAsync(3000)
	<-done
	_, _ = a.cmd.Process.Wait()
	atKill := w.outputs()
	if w.drained() {
		t.Fatalf("everything was processed before the kill (%d outputs): the test did not kill a busy worker", atKill)
	}
	t.Logf("killed with %d of about 3000 outputs in the stream", atKill)
	waitFor(t, 20*time.Second, "survivor owns every partition", func() bool { return w.count(idb) == partitions })
	w.publishAsync(300)
	waitFor(t, 30*time.Second, "drained", w.drained)
	b.stop(t)
	w.check()
	return []*proc{a, b}
}

// TestPausedOwner freezes an owner with SIGSTOP past lease_ttl while
// messages keep coming, lets the other member take its partitions over,
// then resumes it with SIGCONT: the resumed zombie must write nothing
// under its old epochs — no snapshot, no record — and the final state and
// outputs must equal an uninterrupted run's.
//
// It runs with one output in flight per key and through ordered lanes.
func TestPausedOwner(t *testing.T) {
	t.Run("one-per-key", func(t *testing.T) { pausedOwner(t, newWorld(t)) })
	t.Run("lane", func(t *testing.T) { ranLanes(t, pausedOwner(t, newWorldEdit(t, laneConfig(t)))...) })
}

// pausedOwner runs the test in w and returns its two processes.
func pausedOwner(t *testing.T, w *world) []*proc {
	a, b := start(t, w.cfg), start(t, w.cfg)
	ida, idb := w.memberOf(a.cmd.Process.Pid), w.memberOf(b.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "both own partitions", func() bool { return w.count(ida) == 2 && w.count(idb) == 2 })
	w.publish(200)
	old := map[int]uint64{} // partitions of a, with a's epoch
	for i, r := range w.owners() {
		if r.Owner == ida {
			old[i] = r.Epoch
		}
	}
	// Watch every snapshot and record write from here on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, err := w.js.KeyValue(ctx, "kpcastream-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bad []string
	watch := func(kv jetstream.KeyValue, check func(jetstream.KeyValueEntry) string) {
		wt, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for e := range wt.Updates() {
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				if msg := check(e); msg != "" {
					mu.Lock()
					bad = append(bad, msg)
					mu.Unlock()
				}
			}
		}()
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	w.publish(100)
	waitFor(t, 20*time.Second, "b took a's partitions over", func() bool { return w.count(idb) == partitions })
	t.Logf("takeover of a frozen owner: %v (lease_ttl %v)", time.Since(stopped).Round(time.Millisecond), ttl)
	w.publish(100)
	waitFor(t, 30*time.Second, "b drained the stream", w.drained)
	taken := w.owners()
	watch(snaps, func(e jetstream.KeyValueEntry) string {
		if codec.IsManifest(e.Value()) {
			return ""
		}
		s, err := codec.DecodeSnapshot(e.Value())
		if err != nil {
			return fmt.Sprintf("snapshot %s: %v", e.Key(), err)
		}
		i := partitionOf(s.Key)
		if ep, ok := old[i]; ok && s.Epoch <= ep {
			// An old epoch of one of a's partitions: only a could write it.
			return fmt.Sprintf("snapshot of %s written by epoch %d after the takeover (partition %d now at epoch %d)", s.Key, s.Epoch, i, taken[i].Epoch)
		}
		return ""
	})
	watch(w.bucket(), func(e jetstream.KeyValueEntry) string {
		if !strings.HasPrefix(e.Key(), "partitions.") {
			return ""
		}
		var r record
		_ = json.Unmarshal(e.Value(), &r)
		if r.Owner == ida {
			for i, ep := range old {
				if e.Key() == fmt.Sprintf("partitions.proc.%d", i) && r.Epoch <= ep {
					return fmt.Sprintf("record %s rewritten by the zombie at epoch %d", e.Key(), r.Epoch)
				}
			}
		}
		return ""
	})
	resumed := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The resumed member finds its fences expired, stops its old
	// partitions, rejoins and gets its share back under new epochs.
	waitFor(t, 20*time.Second, "a rejoined with new epochs", func() bool { return w.count(ida) == 2 && w.count(idb) == 2 })
	t.Logf("zombie resumed; rebalanced after %v", time.Since(resumed).Round(time.Millisecond))
	w.publish(100)
	waitFor(t, 30*time.Second, "drained", w.drained)
	a.stop(t)
	b.stop(t)
	mu.Lock()
	for _, m := range bad {
		t.Error(m)
	}
	mu.Unlock()
	w.check()
	return []*proc{a, b}
}

// TestServerRestart restarts the NATS server under a worker that owns
// every partition while messages keep coming, and measures how long each
// partition's outputs stop: the stall should be the outage plus a
// reconnect and one publish attempt, not a publish timeout per lost
// acknowledgement. Exactly-once is checked as in the other tests. With
// lease_ttl 1s (the default here) the outage outlasts lease_ttl/2, so the
// worker also fences and retakes its partitions;
// KPCASTREAM_TEST_LEASE_TTL=10s measures the path without fencing.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test (builds and execs kpcastream; skipped under -short)")
	}
	binary(t)
	srv := natstest.RunRestartable(t, server.JSLimitOpts{})
	url := srv.URL()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "kpcastream.yaml")
	yml := strings.Replace(config(url), "nats: {", "nats: {reconnect_wait: 100ms, ", 1)
	if v := os.Getenv("KPCASTREAM_TEST_LEASE_TTL"); v != "" {
		yml = strings.Replace(yml, "lease_ttl: 1s", "lease_ttl: "+v, 1)
	}
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, js: js, cfg: cfg, data: map[string][][]float64{}, sent: map[string]int{}, rng: rand.New(rand.NewPCG(21, 22))}
	for i := range 12 {
		w.keys = append(w.keys, fmt.Sprintf("key%d", i))
	}
	p := start(t, cfg)
	keepLogs(t, p) // into KPCASTREAM_NODELOSS_LOGDIR, when set
	id := w.memberOf(p.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "the worker owns every partition", func() bool { return w.count(id) == partitions })

	// Publish about 400 messages/s, retrying each (same message id)
	// through the outage.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2500 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			k := w.keys[w.rng.IntN(len(w.keys))]
			a := w.rng.NormFloat64()
			x := []float64{a + 0.1*w.rng.NormFloat64(), 2*a + 0.1*w.rng.NormFloat64(), w.rng.NormFloat64()}
			b, _ := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{X: x, ID: fmt.Sprint(w.nsent)}})
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				_, err := js.Publish(ctx, "pin."+k, b, jetstream.WithMsgID(fmt.Sprint("in-", w.nsent)))
				cancel()
				if err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			w.data[k] = append(w.data[k], x)
			w.sent[k]++
			w.nsent++
		}
	}()
	time.Sleep(2 * time.Second)
	srv.Stop()
	down := time.Now()
	time.Sleep(time.Second)
	srv.Start()
	outage := time.Since(down)
	t.Logf("server stopped at %s, started again at %s", down.UTC().Format("15:04:05.000"), time.Now().UTC().Format("15:04:05.000"))
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	stopped := time.Now()
	waitFor(t, 30*time.Second, "drained", w.drained)
	t.Logf("drained %v after the last publish", time.Since(stopped).Round(time.Millisecond))
	p.stop(t)
	w.check()

	// Stall per partition: the largest gap between consecutive outputs of
	// the partition's keys, as the output stream stored them.
	ctx := context.Background()
	s, err := js.Stream(ctx, "POUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := map[int]time.Time{}
	gap := map[int]time.Duration{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		part := partitionOf(strings.TrimPrefix(m.Subject, "pout."))
		if prev, ok := last[part]; ok && m.Time.Sub(prev) > gap[part] {
			gap[part] = m.Time.Sub(prev)
		}
		last[part] = m.Time
	}
	worst := time.Duration(0)
	for _, g := range gap {
		worst = max(worst, g)
	}
	t.Logf("server down %v: largest gap between outputs of one partition %v (per partition %v); stall beyond the outage %v",
		outage.Round(time.Millisecond), worst.Round(time.Millisecond), gap, (worst - outage).Round(time.Millisecond))
}

// TestJoinAfterKill SIGKILLs a member (its heartbeat stays in the bucket)
// and starts two members after it, one within lease_ttl of the kill and
// one after: the newcomers judge the dead member from the bucket's
// timestamps, so its partitions run again within lease_ttl + 1 s of the
// kill whatever the joins; every state and output is that of an
// uninterrupted run.
func TestJoinAfterKill(t *testing.T) {
	w := newWorld(t)
	a, b := start(t, w.cfg), start(t, w.cfg)
	ida, idb := w.memberOf(a.cmd.Process.Pid), w.memberOf(b.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "both own partitions", func() bool { return w.count(ida) == 2 && w.count(idb) == 2 })
	w.publish(200)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = a.cmd.Process.Wait()
	killed := time.Now()
	c := start(t, w.cfg)
	var d *proc
	var took time.Duration
	for took == 0 || d == nil {
		if d == nil && time.Since(killed) >= ttl*12/10 {
			d = start(t, w.cfg) // the second join, while the wait goes on
		}
		if took == 0 && !slices.ContainsFunc(w.owners(), func(r record) bool { return r.Owner == "" || r.Owner == ida }) {
			took = time.Since(killed)
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatal("timed out after 20s waiting for every partition owned by a live member")
		}
		time.Sleep(10 * time.Millisecond)
	}
	live := map[string]bool{idb: true}
	t.Logf("partitions of the SIGKILLed member owned again %v after the kill (lease_ttl %v, joins at 0 and %v)",
		took.Round(time.Millisecond), ttl, ttl*12/10)
	if took > ttl+time.Second {
		t.Errorf("partitions of a killed member taken %v after the kill, want ≤ lease_ttl + 1s = %v", took, ttl+time.Second)
	}
	idd := w.memberOf(d.cmd.Process.Pid)
	live[w.memberOf(c.cmd.Process.Pid)], live[idd] = true, true
	// The later joiner gets its share too: partitions released to it are
	// taken at once (it does not count the dead member alive).
	joined := time.Now()
	waitFor(t, 20*time.Second, "every partition owned by b, c or d, d among them", func() bool {
		for _, r := range w.owners() {
			if !live[r.Owner] {
				return false
			}
		}
		return w.count(idd) > 0
	})
	t.Logf("the member joining after the kill owns its share %v after its heartbeat appeared", time.Since(joined).Round(time.Millisecond))
	w.publish(200)
	waitFor(t, 30*time.Second, "drained", w.drained)
	for _, p := range []*proc{b, c, d} {
		p.stop(t)
	}
	w.check()
}

// TestFleetStop SIGTERMs every member at once, right after a member
// joined (partitions moving): no record may be left naming a member that
// exited, so the next fleet runs every partition at once rather than
// after lease_ttl; every state and output is that of an uninterrupted run.
func TestFleetStop(t *testing.T) {
	w := newWorld(t)
	for round := range 2 {
		ps := []*proc{start(t, w.cfg), start(t, w.cfg)}
		started := time.Now()
		ids := map[string]bool{w.memberOf(ps[0].cmd.Process.Pid): true, w.memberOf(ps[1].cmd.Process.Pid): true}
		waitFor(t, 20*time.Second, "the fleet owns every partition", func() bool {
			n := 0
			for _, r := range w.owners() {
				if ids[r.Owner] {
					n++
				}
			}
			return n == partitions
		})
		if took := time.Since(started); round > 0 && took > 5*time.Second {
			t.Errorf("round %d: the fleet took %v to own every partition after the previous fleet stopped", round, took)
		}
		w.publish(150)
		ps = append(ps, start(t, w.cfg))
		// The third has joined (its heartbeat is in the bucket): partitions
		// move to it as the fleet stops. A fixed 200 ms here signalled it, at
		// load 10, before its runtime had installed the handler (killed by the
		// signal) or while it was starting (then exit status 1, since fixed).
		w.memberOf(ps[2].cmd.Process.Pid)
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range ps {
			p.stop(t)
		}
		for n, r := range w.owners() {
			if r.Owner != "" {
				t.Errorf("round %d: partition %d still owned by %s (epoch %d) after the whole fleet stopped", round, n, r.Owner, r.Epoch)
			}
		}
	}
	last := start(t, w.cfg)
	id := w.memberOf(last.cmd.Process.Pid)
	started := time.Now()
	waitFor(t, 20*time.Second, "one member owns every partition", func() bool { return w.count(id) == partitions })
	if took := time.Since(started); took > ttl {
		t.Errorf("a member started after a fleet stop took %v to own every partition, want < lease_ttl %v (nothing left owned)", took, ttl)
	}
	waitFor(t, 30*time.Second, "drained", w.drained)
	last.stop(t)
	w.check()
}
