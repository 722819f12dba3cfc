package proctest

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/snapshot"
)

// nodeLossParts is the pipeline's partition count in TestClusterNodeLoss.
const nodeLossParts = 12

// nodeLossTTL is the workers' lease_ttl in TestClusterNodeLoss.
const nodeLossTTL = 3 * time.Second

// TestClusterNodeLoss takes issue 28's two stall figures on real
// processes: three nats-server processes clustered on loopback (R3 input,
// output, checkpoint and snapshot buckets), three "kpcastream run"
// workers (lease_ttl 3 s, 12 partitions, each worker connected first to
// its own server) and a steady publisher over 96 keys.
//
//   - Phase 1, node loss: the server leading the coordination bucket is
//     SIGKILLed (the input and output streams' leaders are first stepped
//     off it, so that the pause measured is the coordination's and the
//     consumers', not the publisher's). A probe puts a key of its own into
//     the bucket every 50 ms to time when the bucket accepts writes again.
//     Figures: per partition the longest gap between its outputs across
//     the fault, and when it resumed after the bucket took writes again
//     (issue 28's target: within lease_ttl + 1 s, ≤ 8 s in all where the
//     election needs ~5 s). The server is then started again.
//   - Phase 2, server restart: another server — one a worker dialled, not
//     the meta leader — is SIGKILLed with messages in flight and started
//     again 2 s later (the streams' and buckets' leaders stepped off it
//     first: what it hits are its clients' connections and the consumers
//     on it); publishing goes on for 4 s more. Figures: per partition the
//     longest gap and its resumption after the restart, and the drain
//     after the last publish (target: processing resumes within 2 s, not
//     after the input's ack_wait of 30 s).
//
// A partition counts as paused when its longest gap across a fault is at
// least 1 s (at 200 messages/s its outputs come every ~60 ms); its
// resumption is that gap's end. Measured on the 2-core machine at load
// average 11–26 (issue 28): the latest resumption 0.3–3.2 s after the
// bucket took writes again (before the fixes: 14–18 s), the longest pause
// 5.0–8.8 s with the bucket back after 4.2–7.7 s (before: 13–23 s); drained
// 6–44 ms after the last publish (before: up to 24 s, acks lost with a
// consumer's leader waiting for ack_wait). After the restart, at load
// 15–19: 0.31–1.11 s (three runs of the final code; the restarted server's
// own first consumer leader came 0.9–2.0 s after its restart, 2.2 s once);
// before, 0.85–1.89 s this session and 2.76 s and 8.0 s earlier. The
// partitions that resumed last had their R1 consumer on the killed server:
// its pulls were answered "no responders" (at once on a worker that
// reconnected, after two missed heartbeats on the others), yet the
// partition was given up only lease_ttl/2 later; its new consumer was then
// placed on the killed server again (the cluster counts a crashed server
// live and caught up for ~3 s) and, created again under the same name,
// kept that placement until the server had recovered. Now a consumer
// whose pull finds no responders after it delivered is made anew at once,
// an unanswered create is deleted and placed anew, and a lane ends its
// batch when the connection is lost instead of waiting 2 s for answers
// lost with it. Each phase also logs the input's own longest gap (the
// publisher, on the killed server, pauses 1 s: every partition with it).
//
// The figures are logged ("figure:" lines), never asserted. Asserted: every
// partition resumes after each fault and the stream drains within 120 s;
// then, with the workers stopped, every key's snapshot equals a reference
// learner's fed the key's inputs in order, and the output stream holds one
// output per input of a ready learner, per key in input order, each once.
//
//	go test ./internal/proctest -run TestClusterNodeLoss -v -timeout 15m
//
// From prebuilt binaries on a machine without Go (the 16-core device):
//
//	go build -o .devbin/kpcastream ./cmd/kpcastream
//	go build -o .devbin/nats-server github.com/nats-io/nats-server/v2
//	go test -c -o .devbin/proctest.test ./internal/proctest
//	KPCASTREAM_BIN=.devbin/kpcastream KPCASTREAM_NATS_SERVER=.devbin/nats-server \
//	  KPCASTREAM_NODELOSS_LOGDIR=$OUT .devbin/proctest.test -test.run TestClusterNodeLoss -test.v -test.timeout 9m
//
// (-test.run 'TestClusterNodeLoss|TestFreshConsumersNodeDown|TestConsumersOnLostServer|TestConsumerServerBlip'
// runs this file's four tests, about 2 minutes here.)
// KPCASTREAM_NODELOSS_RATE sets the publisher's messages/s [200];
// KPCASTREAM_NODELOSS_LOGDIR keeps the servers' (TestClusterNodeLoss) and
// workers' logs there.
func TestClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level cluster fault test (execs nats-server and kpcastream; skipped under -short)")
	}
	binary(t)
	natsServerBinary(t)
	rate := 200
	if v := os.Getenv("KPCASTREAM_NODELOSS_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KPCASTREAM_NODELOSS_RATE=%q: want a positive integer", v)
		}
		rate = n
	}
	logDir := os.Getenv("KPCASTREAM_NODELOSS_LOGDIR")
	if logDir == "" {
		logDir = t.TempDir()
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("load average at start: %s", loadAvg())
	cl := startNATSCluster(t, logDir)
	nc, js := connectCluster(t, cl.urls())

	// Workers: worker i dials server i (and learns the others from it).
	var ws []*proc
	w := &world{t: t, js: js, parts: nodeLossParts, data: map[string][][]float64{}, sent: map[string]int{}}
	for i := range 3 {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "kpcastream.yaml")
		if err := os.WriteFile(cfg, []byte(nodeLossConfig(cl.url(i), dir)), 0o644); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, start(t, cfg))
		keepLogs(t, ws[i])
		if i == 0 {
			// The first creates the streams and buckets alone: three
			// processes creating them at once on a fresh cluster left two
			// waiting 30 s for an answer to the snapshot bucket's create
			// and exiting (seen here; left to the startup's owner).
			w.memberOf(ws[0].cmd.Process.Pid)
		}
	}
	ids := map[string]bool{}
	for _, p := range ws {
		ids[w.memberOf(p.cmd.Process.Pid)] = true
	}
	waitFor(t, 60*time.Second, "the three workers share the partitions", func() bool {
		by := map[string]int{}
		for _, r := range w.owners() {
			if !ids[r.Owner] {
				return false
			}
			by[r.Owner]++
		}
		return len(by) == 3
	})

	pub := newSteadyPublisher(t, cl.urls(), rate, 96)
	pub.start()
	time.Sleep(4 * time.Second)

	// Phase 1: SIGKILL the coordination bucket's leader.
	bucketStream := "KV_kpcastream-checkpoints"
	victimName := leaderOf(js, bucketStream)
	victim := cl.index(victimName)
	if victim < 0 {
		t.Fatalf("no leader of %s (%q)", bucketStream, victimName)
	}
	pin, pout := stepOff(nc, js, "PIN", victimName), stepOff(nc, js, "POUT", victimName)
	if pin == victimName || pout == victimName {
		t.Fatalf("could not step the input (%s) or output (%s) stream's leader off %s", pin, pout, victimName)
	}
	time.Sleep(time.Second)
	t.Logf("phase 1: killing %s, leader of the coordination bucket (and of the snapshots bucket: %v); input led by %s, output by %s; load average %s",
		victimName, leaderOf(js, "KV_kpcastream-snapshots") == victimName, pin, pout, loadAvg())
	probe := newBucketProbe(t, cl.url((victim+1)%3))
	cl.kill(victim)
	kill1 := time.Now()
	bucketOK := probe.firstWrite(60 * time.Second)
	t.Logf("phase 1: the coordination bucket accepts writes again %v after the kill", bucketOK.Sub(kill1).Round(time.Millisecond))
	time.Sleep(max(20*time.Second-time.Since(kill1), 0))
	cl.start(victim)
	cl.waitJetStream(victim, 60*time.Second)
	time.Sleep(6 * time.Second)

	// Phase 2: SIGKILL the server worker 1 dialled (not phase 1's), with
	// messages in flight, and start it again 2 s later.
	j := (victim + 1) % 3
	if cl.metaLeader(victim) == cl.nodes[j].name {
		j = (victim + 2) % 3
	}
	jn := cl.nodes[j].name
	for _, s := range []string{"PIN", "POUT", bucketStream, "KV_kpcastream-snapshots", "OBJ_kpcastream-state"} {
		if l := stepOff(nc, js, s, jn); l == jn {
			t.Fatalf("could not step %s's leader off %s", s, jn)
		}
	}
	t.Logf("phase 2: killing %s (meta leader: %v; the streams and buckets led elsewhere: its clients and the consumers on it are hit); load average %s",
		jn, cl.metaLeader(victim) == jn, loadAvg())
	cl.kill(j)
	kill2 := time.Now()
	time.Sleep(2 * time.Second)
	cl.start(j)
	restart := time.Now()
	time.Sleep(4 * time.Second)
	pub.stopAndWait()
	lastPub := time.Now()
	waitFor(t, 120*time.Second, "every partition drained", func() bool { return drainedCluster(js, nodeLossParts) })
	drain := time.Since(lastPub)
	for _, p := range ws {
		p.stop(t)
	}

	// Figures, then the checks.
	w.data, w.sent, w.nsent = pub.data, pub.sent, pub.n
	for k := range pub.data {
		w.keys = append(w.keys, k)
	}
	sort.Strings(w.keys)
	outs := readOutputs(t, js, "POUT")
	byPart := map[int][]time.Time{}
	for _, o := range outs {
		p := partitionOfN(o.key, nodeLossParts)
		byPart[p] = append(byPart[p], o.at)
	}
	inGap, _ := longestGap(pub.times, kill1, kill1.Add(20*time.Second))
	t.Logf("figure: phase 1 (node loss, lease_ttl %v): bucket writable again %v after the kill; the input's longest gap %v",
		nodeLossTTL, bucketOK.Sub(kill1).Round(time.Millisecond), inGap.Round(time.Millisecond))
	worst1, late1 := phasePauses(t, "phase 1", byPart, kill1, kill1.Add(20*time.Second), bucketOK, "bucket")
	t.Logf("figure: phase 1: longest pause of a partition %v; latest resumption of a paused one %v after the bucket took writes again (target ≤ lease_ttl + 1 s = %v)",
		worst1.Round(time.Millisecond), late1.Round(time.Millisecond), nodeLossTTL+time.Second)
	inGap2, inEnd2 := longestGap(pub.times, kill2, lastPub)
	t.Logf("figure: phase 2: the input's longest gap %v, ending %+.3fs after the kill (the publisher's own pause: every partition pauses with it)",
		inGap2.Round(time.Millisecond), inEnd2.Sub(kill2).Seconds())
	worst2, late2 := phasePauses(t, "phase 2", byPart, kill2, lastPub, restart, "restart")
	t.Logf("figure: phase 2 (server down %v, restarted): longest pause of a partition %v; latest resumption of a paused one %v after the restart (target ≤ 2 s); drained %v after the last publish",
		restart.Sub(kill2).Round(time.Millisecond), worst2.Round(time.Millisecond), late2.Round(time.Millisecond), drain.Round(time.Millisecond))
	ready, leader := serverRecovery(cl.nodes[j].log)
	t.Logf("figure: phase 2: the restarted server's own time (its log): ready for clients %s, first consumer leader on it %s after the restart "+
		"(a partition whose consumer it holds cannot resume with that consumer earlier)", sinceOr(ready, restart), sinceOr(leader, restart))
	t.Logf("load average at end: %s", loadAvg())
	w.checkRun(snapshot.Config{Replicas: 3}, outs)
}

// phasePauses logs, per partition, the longest gap of its output times
// (byPart) within [kill, end) and, for a paused partition, when it
// resumed after the kill and after ref (named refName: the event its
// resumption is measured from). It returns the longest gap of all and
// the latest resumption after ref of a paused partition (negative: all
// resumed before ref; zero when none paused); a partition with no output
// after the kill is an error. A partition paused when its
// longest gap is at least a second (its outputs come every ~60 ms at 200/s
// over 12 partitions); its resumption is that gap's end.
func phasePauses(t *testing.T, phase string, byPart map[int][]time.Time, kill, end, ref time.Time, refName string) (worst, late time.Duration) {
	t.Helper()
	const pauseMin = time.Second
	var rows []string
	paused := false
	for p := range nodeLossParts {
		g, resumed := longestGap(byPart[p], kill, end)
		if resumed.IsZero() || resumed.Before(kill) {
			t.Errorf("partition %d: no output after the %s kill", p, phase)
			continue
		}
		worst = max(worst, g)
		if g < pauseMin { // no pause: its longest gap may lie anywhere
			rows = append(rows, fmt.Sprintf("p%d gap %v (no pause)", p, g.Round(time.Millisecond)))
			continue
		}
		if r := resumed.Sub(ref); !paused || r > late {
			late = r
		}
		paused = true
		rows = append(rows, fmt.Sprintf("p%d gap %v resumed +%v (%s %+.3fs)", p, g.Round(time.Millisecond),
			resumed.Sub(kill).Round(time.Millisecond), refName, resumed.Sub(ref).Seconds()))
	}
	t.Logf("figure: %s per partition: %s", phase, strings.Join(rows, "; "))
	return worst, late
}

// serverRecovery reads a nats-server log and returns when the server's
// last start logged "Server is ready" and its first "new consumer leader"
// (zero when not logged): the server's own part of a resumption.
func serverRecovery(path string) (ready, leader time.Time) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		// [pid] 2006/01/02 15:04:05.000000 [INF] text
		f := strings.SplitN(line, " ", 5)
		if len(f) < 5 {
			continue
		}
		at, err := time.ParseInLocation("2006/01/02 15:04:05.000000", f[1]+" "+f[2], time.Local)
		if err != nil {
			continue
		}
		switch msg := f[4]; {
		case strings.HasPrefix(msg, "Starting nats-server"):
			ready, leader = time.Time{}, time.Time{}
		case strings.HasPrefix(msg, "Server is ready"):
			ready = at
		case strings.Contains(msg, "new consumer leader") && leader.IsZero():
			leader = at
		}
	}
	return
}

// sinceOr formats at − ref, or "not logged" for a zero at.
func sinceOr(at, ref time.Time) string {
	if at.IsZero() {
		return "not logged"
	}
	return fmt.Sprintf("%+.3fs", at.Sub(ref).Seconds())
}

// nodeLossConfig is a worker's configuration dialling url, its data in dir.
func nodeLossConfig(url, dir string) string {
	return fmt.Sprintf(`
nats: {url: %q}
data_dir: %q
log: {level: info, format: json}
http: {metrics_addr: "off"}
workers: 2
lease_ttl: %s
shutdown_timeout: 10s
checkpoint_replicas: 3
snapshots: {replicas: 3}
pipelines:
  - name: proc
    partitions: %d
    input: {stream: PIN, subject: "pin.*", create_stream: true, replicas: 3}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}, forget: 0.99, seed: 3}
    output: {subject: "pout.{key}", stream: POUT, create_stream: true, replicas: 3, encoding: json, duplicates: 10m}
    dead_letters: {replicas: 3}
    snapshot: {every_messages: 50, every: 2s}
`, url, dir, nodeLossTTL, nodeLossParts)
}

// steadyPublisher publishes rate observations a second over its keys,
// each acknowledged by the input stream before the next (per-key order),
// retrying one (same message id) until the stream takes it.
type steadyPublisher struct {
	t          testing.TB
	js         jetstream.JetStream
	rate       int
	keys       []string
	rng        *rand.Rand
	stop, done chan struct{}

	mu    sync.Mutex
	data  map[string][][]float64
	sent  map[string]int
	times []time.Time // when each publish was acknowledged
	n     int
}

func newSteadyPublisher(t testing.TB, urls string, rate, keys int) *steadyPublisher {
	_, js := connectCluster(t, urls)
	p := &steadyPublisher{t: t, js: js, rate: rate, rng: rand.New(rand.NewPCG(28, 29)), stop: make(chan struct{}), done: make(chan struct{}),
		data: map[string][][]float64{}, sent: map[string]int{}}
	for i := range keys {
		p.keys = append(p.keys, fmt.Sprintf("k%02d", i))
	}
	return p
}

func (p *steadyPublisher) start() {
	go func() {
		defer close(p.done)
		tick := time.NewTicker(time.Second / time.Duration(p.rate))
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			k := p.keys[p.rng.IntN(len(p.keys))]
			a := p.rng.NormFloat64()
			x := []float64{a + 0.1*p.rng.NormFloat64(), 2*a + 0.1*p.rng.NormFloat64(), p.rng.NormFloat64()}
			b, _ := codec.EncodeObservations(nil, codec.JSON, []codec.Observation{{X: x, ID: strconv.Itoa(p.n)}})
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := p.js.Publish(ctx, "pin."+k, b, jetstream.WithMsgID("in-"+strconv.Itoa(p.n)))
				cancel()
				if err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			p.mu.Lock()
			p.data[k] = append(p.data[k], x)
			p.sent[k]++
			p.times = append(p.times, time.Now())
			p.n++
			p.mu.Unlock()
		}
	}()
}

// stopAndWait stops publishing after the publish in progress lands.
func (p *steadyPublisher) stopAndWait() {
	close(p.stop)
	<-p.done
}

// bucketProbe puts a key of its own into the coordination bucket every
// 50 ms, through one server, to time when the bucket takes writes.
type bucketProbe struct {
	kv jetstream.KeyValue
}

func newBucketProbe(t testing.TB, url string) *bucketProbe {
	_, js := connectCluster(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "kpcastream-checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	return &bucketProbe{kv: kv}
}

// firstWrite returns when the first put from now on was acknowledged.
func (b *bucketProbe) firstWrite(timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		_, err := b.kv.Put(ctx, "probe.nodeloss", []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		cancel()
		if err == nil {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}
}

// drainedCluster reports whether the partitions' consumers of PIN (one
// per partition) have nothing pending or unacknowledged; each request is
// bounded.
func drainedCluster(js jetstream.JetStream, parts int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "PIN")
	if err != nil {
		return false
	}
	filters := map[string]bool{}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		if ci.NumPending != 0 || ci.NumAckPending != 0 {
			return false
		}
		filters[ci.Config.FilterSubject] = true
	}
	return lister.Err() == nil && len(filters) == parts
}

// output is one output as stored: its key, input sequence, id and time.
type output struct {
	key string
	seq uint64
	id  string
	at  time.Time
}

// readOutputs reads every message of stream with an ordered consumer.
func readOutputs(t testing.TB, js jetstream.JetStream, stream string) []output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var outs []output
	for uint64(len(outs)) < info.State.Msgs {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			o, err := codec.DecodeOutput(m.Data(), codec.JSON)
			if err != nil {
				t.Fatalf("output %d: %v", md.Sequence.Stream, err)
			}
			outs = append(outs, output{key: o.Key, seq: o.Seq, id: o.ID, at: md.Timestamp})
		}
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d messages after 120s (%v)", stream, len(outs), info.State.Msgs, batch.Error())
		}
	}
	return outs
}

// longestGap returns the longest gap between consecutive times of ts (in
// order) that overlaps [from, to], and the time that ended it. A gap still
// open at to ends at the first time after it, if any.
func longestGap(ts []time.Time, from, to time.Time) (time.Duration, time.Time) {
	var best time.Duration
	var end time.Time
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		if b.Before(from) || a.After(to) {
			continue
		}
		if g := b.Sub(a); g > best {
			best, end = g, b
		}
	}
	return best, end
}

// partitionOfN is the partition of key among n (FNV-1a 32 mod n, as the
// input stream's subject transform computes it).
func partitionOfN(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// keepLogs writes the logs of procs into KPCASTREAM_NODELOSS_LOGDIR, if
// set, when the test ends (w<pid>.log).
func keepLogs(t testing.TB, procs ...*proc) {
	dir := os.Getenv("KPCASTREAM_NODELOSS_LOGDIR")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.mu.Lock()
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("w%d.log", p.cmd.Process.Pid)), p.logs.Bytes(), 0o644)
			p.mu.Unlock()
		}
	})
}

// loadAvg is the machine's load average (Linux), for the figures' context.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// TestFreshConsumersNodeDown starts a worker on the cluster 4 s after one
// of its three servers was SIGKILLed (the input stream's and the buckets'
// leaders stepped off it first), so that every partition takes a fresh
// consumer while a server is down, as the takeovers after a node loss do
// (TestClusterNodeLoss, phase 1). Each partition must start once and
// deliver with its first consumer: none may be stopped as "consumer
// unreachable for lease_ttl" and taken again.
//
// With consumers replicated like the input stream (R3), the server gave
// each fresh consumer a preferred leader at random among its peers not
// known offline, the killed server among them (a crash is not announced):
// about one consumer in three then waited for a raft election (4–9 s), past
// the partition's lease_ttl of patience, and its partition was stopped and
// taken again with another fresh consumer — the node-loss pauses of
// 12–18 s (issue 28).
func TestFreshConsumersNodeDown(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level cluster fault test (execs nats-server and kpcastream; skipped under -short)")
	}
	binary(t)
	logDir := t.TempDir()
	cl := startNATSCluster(t, logDir)
	nc, js := connectCluster(t, cl.urls())
	w := &world{t: t, js: js, parts: nodeLossParts, data: map[string][][]float64{}, sent: map[string]int{}}
	cfgFor := func(i int) string {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "kpcastream.yaml")
		if err := os.WriteFile(cfg, []byte(nodeLossConfig(cl.url(i), dir)), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// A first worker creates the streams and buckets, runs every
	// partition, and leaves (releasing them, deleting its consumers).
	first := start(t, cfgFor(0))
	id := w.memberOf(first.cmd.Process.Pid)
	waitFor(t, 60*time.Second, "the first worker owns every partition", func() bool { return w.count(id) == nodeLossParts })
	// Not the meta leader: a worker starting during a meta election sent
	// the snapshot bucket's create once and waited its whole 30 s for the
	// answer (seen here once; cmd/kpcastream's startup, left alone).
	victim := 2
	if cl.metaLeader(0) == cl.nodes[victim].name {
		victim = 1
	}
	vn := cl.nodes[victim].name
	for _, s := range []string{"PIN", "POUT", "KV_kpcastream-checkpoints", "KV_kpcastream-snapshots", "OBJ_kpcastream-state", "KPCA_DLQ_proc"} {
		if l := stepOff(nc, js, s, vn); l == vn || l == "" {
			t.Fatalf("could not step %s's leader off %s (leader %q)", s, vn, l)
		}
	}
	first.stop(t)
	cl.kill(victim)
	time.Sleep(4 * time.Second)
	second := start(t, cfgFor(0))
	// (Not memberOf: listing the bucket's keys made an ephemeral consumer
	// that did not answer while the server was down.)
	waitFor(t, 60*time.Second, "the second worker owns every partition", func() bool {
		rs := w.owners()
		for _, r := range rs {
			if r.Owner == "" || r.Owner == id || r.Owner != rs[0].Owner {
				return false
			}
		}
		return true
	})
	first1 := id
	id = w.owners()[0].Owner
	pub := newSteadyPublisher(t, cl.url(0), 300, 96)
	pub.start()
	time.Sleep(3 * time.Second)
	pub.stopAndWait()
	waitFor(t, 90*time.Second, "every partition drained", func() bool { return drainedCluster(js, nodeLossParts) })
	for n, r := range w.owners() {
		if r.Owner != id || r.Owner == first1 || r.Epoch != 2 {
			t.Errorf("partition %d: record at epoch %d owned by %q, want epoch 2 (taken once) by the second worker %s", n, r.Epoch, r.Owner, id)
		}
	}
	second.mu.Lock()
	logs := second.logs.String()
	second.mu.Unlock()
	if n := strings.Count(logs, "consumer unreachable for"); n > 0 {
		t.Errorf("%d partitions stopped for a fresh consumer found unreachable while a server was down", n)
	}
	t.Logf("%d inputs; load average %s", pub.n, loadAvg())
}

// TestConsumersOnLostServer SIGKILLs a server that leads nothing (the
// streams' and buckets' leaders stepped off it, not the meta leader, no
// worker dialled it) and at once stops one of the two workers gracefully,
// so that the other takes its partitions within the first seconds after
// the crash: while the cluster still counts the lost server live and
// caught up, so that about one fresh consumer in three is placed on it,
// and while the earlier owners' consumers on it can be deleted without an
// answer. The server stays down. Every partition must run again and the
// stream drain within 25 s of the kill (a liveness bound below the 30 s
// that a create was retried for before; 6–14 s were seen at load 20–26 on
// 2 cores, logged as a figure), with every state and output that of an
// uninterrupted run.
//
// Before, a create placed on the lost server was sent again under the
// same name until its 30 s bound (the name's placement stood), and a
// delete of a consumer on it was sent again until the cluster saw the
// server offline: partitions stayed stopped that long.
func TestConsumersOnLostServer(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level cluster fault test (execs nats-server and kpcastream; skipped under -short)")
	}
	binary(t)
	cl := startNATSCluster(t, t.TempDir())
	nc, js := connectCluster(t, cl.urls())
	var meta string
	waitFor(t, 30*time.Second, "a meta leader", func() bool { meta = cl.metaLeader(0); return meta != "" })
	victim := 2
	if cl.nodes[victim].name == meta {
		victim = 1
	}
	var live []int
	for i := range 3 {
		if i != victim {
			live = append(live, i)
		}
	}
	w := &world{t: t, js: js, parts: nodeLossParts, data: map[string][][]float64{}, sent: map[string]int{}}
	cfgFor := func(i int) string {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "kpcastream.yaml")
		if err := os.WriteFile(cfg, []byte(nodeLossConfig(cl.url(i), dir)), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	a := start(t, cfgFor(live[0]))
	ida := w.memberOf(a.cmd.Process.Pid)
	b := start(t, cfgFor(live[1]))
	keepLogs(t, a, b)
	idb := w.memberOf(b.cmd.Process.Pid)
	waitFor(t, 60*time.Second, "the two workers share the partitions", func() bool {
		return w.count(ida) == nodeLossParts/2 && w.count(idb) == nodeLossParts/2
	})
	vn := cl.nodes[victim].name
	for _, s := range []string{"PIN", "POUT", "KV_kpcastream-checkpoints", "KV_kpcastream-snapshots", "OBJ_kpcastream-state", "KPCA_DLQ_proc"} {
		if l := stepOff(nc, js, s, vn); l == vn || l == "" {
			t.Fatalf("could not step %s's leader off %s (leader %q)", s, vn, l)
		}
	}
	pub := newSteadyPublisher(t, cl.url(live[0])+","+cl.url(live[1]), 200, 96)
	pub.start()
	time.Sleep(2 * time.Second)
	cl.kill(victim)
	killed := time.Now()
	a.stop(t)
	time.Sleep(4 * time.Second)
	pub.stopAndWait()
	waitFor(t, max(25*time.Second-time.Since(killed), time.Second), "every partition drained within 25 s of the kill", func() bool {
		return w.count(idb) == nodeLossParts && drainedCluster(js, nodeLossParts)
	})
	t.Logf("figure: %s killed, a worker stopped at once: the other owns every partition and has drained %v after the kill (lease_ttl %v; load average %s)",
		vn, time.Since(killed).Round(time.Millisecond), nodeLossTTL, loadAvg())
	b.stop(t)
	w.data, w.sent, w.nsent = pub.data, pub.sent, pub.n
	for k := range pub.data {
		w.keys = append(w.keys, k)
	}
	sort.Strings(w.keys)
	w.checkRun(snapshot.Config{Replicas: 3}, readOutputs(t, js, "POUT"))
}

// TestConsumerServerBlip SIGKILLs the server holding some of the
// partitions' consumers (not the worker's, not the meta leader; the
// streams' and buckets' leaders stepped off it) while messages are in
// flight, and starts it again at once, so that the consumers come back,
// with their state, while their partitions still run — with the acks the
// worker sent meanwhile lost, though its own connection never broke (a
// partition whose pull finds no responders before its consumer is back
// is taken again at once with a new consumer instead). The stream must
// drain within 15 s of the last publish: half the
// input's ack_wait (30 s, the default), after which the server would
// deliver the unacknowledged messages again by itself (issue 28's 30 s
// drains). Every state and output is that of an uninterrupted run.
func TestConsumerServerBlip(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level cluster fault test (execs nats-server and kpcastream; skipped under -short)")
	}
	binary(t)
	cl := startNATSCluster(t, t.TempDir())
	nc, js := connectCluster(t, cl.urls())
	w := &world{t: t, js: js, parts: nodeLossParts, data: map[string][][]float64{}, sent: map[string]int{}}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(cfg, []byte(nodeLossConfig(cl.url(0), dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, cfg)
	keepLogs(t, p)
	id := w.memberOf(p.cmd.Process.Pid)
	waitFor(t, 60*time.Second, "the worker owns every partition", func() bool { return w.count(id) == nodeLossParts })
	// The victim: the server other than the worker's and the meta
	// leader's that holds the most consumers. When it holds none (all
	// twelve placed on the other two: seen once), a partition's consumer
	// is deleted — its partition is taken again with a new one, placed
	// anew — until it holds some.
	meta := cl.metaLeader(0)
	var held map[string]int
	var owners []record
	victim := -1
	for try := 0; ; try++ {
		waitFor(t, 30*time.Second, "every partition's consumer answers", func() bool {
			held = map[string]int{}
			owners = w.owners()
			for n := range nodeLossParts {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, err := js.Consumer(ctx, "PIN", fmt.Sprintf("kpcastream-proc-p%d-e%d", n, owners[n].Epoch))
				if err == nil {
					if info, err := c.Info(ctx); err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
						held[info.Cluster.Leader]++
					}
				}
				cancel()
			}
			n := 0
			for _, c := range held {
				n += c
			}
			return n == nodeLossParts
		})
		victim = -1
		for i := 1; i < 3; i++ {
			if n := cl.nodes[i].name; n != meta && (victim < 0 || held[n] > held[cl.nodes[victim].name]) {
				victim = i
			}
		}
		if held[cl.nodes[victim].name] > 0 {
			break
		}
		if try == 10 {
			t.Fatalf("no consumer on %s after %d placements anew (consumers per server %v, meta leader %s): nothing to test", cl.nodes[victim].name, try, held, meta)
		}
		part := try % nodeLossParts
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := js.DeleteConsumer(ctx, "PIN", fmt.Sprintf("kpcastream-proc-p%d-e%d", part, owners[part].Epoch))
		cancel()
		if err != nil {
			t.Fatalf("delete the consumer of partition %d: %v", part, err)
		}
		waitFor(t, 30*time.Second, "the partition taken again", func() bool {
			r := w.owners()[part]
			return r.Owner == id && r.Epoch > owners[part].Epoch
		})
	}
	vn := cl.nodes[victim].name
	for _, s := range []string{"PIN", "POUT", "KV_kpcastream-checkpoints", "KV_kpcastream-snapshots", "OBJ_kpcastream-state", "KPCA_DLQ_proc"} {
		if l := stepOff(nc, js, s, vn); l == vn || l == "" {
			t.Fatalf("could not step %s's leader off %s (leader %q)", s, vn, l)
		}
	}
	pub := newSteadyPublisher(t, cl.url(0), 300, 96)
	pub.start()
	time.Sleep(3 * time.Second)
	cl.kill(victim)
	cl.start(victim)
	killed := time.Now()
	time.Sleep(3 * time.Second)
	pub.stopAndWait()
	last := time.Now()
	waitFor(t, 15*time.Second, "every partition drained within 15 s of the last publish", func() bool { return drainedCluster(js, nodeLossParts) })
	t.Logf("figure: %s (%d of %d consumers) killed and started again at once: drained %v after the last publish, %v after the kill (load average %s)",
		vn, held[vn], nodeLossParts, time.Since(last).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), loadAvg())
	p.stop(t)
	w.data, w.sent, w.nsent = pub.data, pub.sent, pub.n
	for k := range pub.data {
		w.keys = append(w.keys, k)
	}
	sort.Strings(w.keys)
	w.checkRun(snapshot.Config{Replicas: 3}, readOutputs(t, js, "POUT"))
}
