package proctest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/snapshot"
)

// The faults of TestServerRestart and TestClusterNodeLoss with keys far
// beyond the live set (issue 30): most keys of each worker live in its
// local tier, so the faults hit spills, local reads, and restores from
// the snapshots under a new epoch. What the tier did is read from each
// process's /metrics (kpcastream_local_spills_total,
// kpcastream_local_loads_total, kpcastream_key_evictions_total) and from
// its debug log ("restored": a key loaded from its KV snapshot, with the
// loading worker's epoch and the snapshot's), before and after the fault.

// tierCounters are the local tier's counters of one process, or a sum.
type tierCounters struct {
	spills, loads, evictions float64
}

func (c tierCounters) add(o tierCounters) tierCounters {
	return tierCounters{c.spills + o.spills, c.loads + o.loads, c.evictions + o.evictions}
}

func (c tierCounters) String() string {
	return fmt.Sprintf("spills %.0f, local loads %.0f, evictions %.0f", c.spills, c.loads, c.evictions)
}

var httpAddrRE = regexp.MustCompile(`"msg":"http listening"[^\n]*"addr":"([^"]+)"`)

// metricsAddr returns the address of p's HTTP listener (its log's "http
// listening"), for a process started with http.metrics_addr 127.0.0.1:0.
func metricsAddr(t testing.TB, p *proc) string {
	t.Helper()
	var addr string
	waitFor(t, 30*time.Second, fmt.Sprintf("the http listener of pid %d", p.cmd.Process.Pid), func() bool {
		p.mu.Lock()
		m := httpAddrRE.FindStringSubmatch(p.logs.String())
		p.mu.Unlock()
		if m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// scrapeTier reads the tier's counters from the /metrics of the process
// listening at addr.
func scrapeTier(t testing.TB, addr string) tierCounters {
	t.Helper()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	var c tierCounters
	seen := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if i := strings.LastIndexByte(line, ' '); i >= 0 {
			rest = line[i+1:]
		}
		var dst *float64
		switch name {
		case "kpcastream_local_spills_total":
			dst = &c.spills
		case "kpcastream_local_loads_total":
			dst = &c.loads
		case "kpcastream_key_evictions_total":
			dst = &c.evictions
		default:
			continue
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			t.Fatalf("scrape %s: %q: %v", addr, line, err)
		}
		*dst += v
		seen++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	if seen < 3 {
		t.Fatalf("scrape %s: %d of the 3 tier counters found (local_spills_total, local_loads_total, key_evictions_total)", addr, seen)
	}
	return c
}

// restoreLine is a worker's debug line for a key loaded from its KV
// snapshot.
type restoreLine struct {
	Msg       string `json:"msg"`
	Partition *int   `json:"partition"`
	Epoch     uint64 `json:"epoch"`
	SnapEpoch uint64 `json:"snapshot_epoch"`
	Key       string `json:"key"`
}

// logLen is the length of p's log so far (a mark for restoresSince).
func logLen(p *proc) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Len()
}

// restoresSince counts, per partition, the restores from KV that p
// logged after mark under an epoch newer than the partition's in before
// (the records at the fault): restores of a partition taken again after
// the fault. It adds them to into.
func restoresSince(into map[int]int, p *proc, mark int, before []record) {
	p.mu.Lock()
	logs := p.logs.String()[mark:]
	p.mu.Unlock()
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"restored"`) {
			continue
		}
		var r restoreLine
		if json.Unmarshal([]byte(line), &r) != nil || r.Partition == nil || *r.Partition < 0 || *r.Partition >= len(before) {
			continue
		}
		if r.Epoch > before[*r.Partition].Epoch {
			into[*r.Partition]++
		}
	}
}

// checkRestores checks that every partition whose record's epoch in after
// is newer than in before (taken again after the fault) restored keys
// from KV (restores, per partition), and logs what was retaken.
func checkRestores(t testing.TB, before, after []record, restores map[int]int) {
	t.Helper()
	var taken []string
	total := 0
	for i := range before {
		total += restores[i]
		if after[i].Epoch <= before[i].Epoch {
			continue
		}
		taken = append(taken, fmt.Sprintf("p%d e%d→e%d %d restores", i, before[i].Epoch, after[i].Epoch, restores[i]))
		if restores[i] == 0 {
			t.Errorf("partition %d taken again after the fault (epoch %d → %d) restored no key from its KV snapshot under a new epoch", i, before[i].Epoch, after[i].Epoch)
		}
	}
	if len(taken) == 0 {
		t.Logf("no partition taken again after the fault: the keys stayed in memory and in the local tier; no restore from KV to test")
		return
	}
	t.Logf("%d of %d partitions taken again after the fault, %d keys restored from KV under their new epochs: %s", len(taken), len(before), total, strings.Join(taken, "; "))
}

// debugWithMetrics edits a configuration to log at debug (the restores)
// and to serve /metrics on a free port.
func debugWithMetrics(t testing.TB, cfg string) string {
	t.Helper()
	for _, r := range [][2]string{
		{`log: {level: info, format: json}`, `log: {level: debug, format: json}`},
		{`http: {metrics_addr: "off"}`, `http: {metrics_addr: "127.0.0.1:0"}`},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("the test config has no %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg
}

// TestServerRestartManyKeys is TestServerRestart with keys far beyond the
// live set: one worker owns every partition of a pipeline fed 400 keys by
// a publisher ticking at 400 messages/s (each acked before the next: 120–
// 300/s landed on the shared 2-core machine), holding about two keys per
// partition in memory
// (memory_budget 600000 B) and the rest in its local tier, and the NATS
// server is stopped for a second and started again with messages in
// flight while keys go to disk and come back. The outage outlasts
// lease_ttl/2 (1 s here), so the worker fences its partitions and takes
// them again under new epochs, with empty local tiers, loading its keys
// from their KV snapshots. Asserted: the tier spilled and read back both
// before and after the outage (the worker's counters grew across it);
// every partition taken again restored keys from KV; every key's state is
// an uninterrupted run's and every output is there once, per key in
// input order. The stall is logged as a figure.
func TestServerRestartManyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level fault test (builds and execs kpcastream; skipped under -short)")
	}
	binary(t)
	t.Logf("load average at start: %s", loadAvg())
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
	dir := t.TempDir()
	yml := strings.Replace(config(url), "nats: {", "nats: {reconnect_wait: 100ms, ", 1)
	yml = debugWithMetrics(t, manyKeysConfig(t, yml, dir))
	// Time-based snapshots too, so that keys on disk are saved from the
	// tier and the checkpoint moves: the retake then restores from KV.
	yml = strings.Replace(yml, "every_messages: 10, every: -1s", "every_messages: 10, every: 1s", 1)
	cfg := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "local")
	w := &world{t: t, js: js, cfg: cfg, data: map[string][][]float64{}, sent: map[string]int{}}
	p := start(t, cfg)
	keepLogs(t, p) // KPCASTREAM_NODELOSS_LOGDIR, if set
	addr := metricsAddr(t, p)
	id := w.memberOf(p.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "the worker owns every partition", func() bool { return w.count(id) == partitions })

	pub := newSteadyPublisher(t, url, 400, manyKeys)
	pub.start()
	started := time.Now()
	// Keys went to disk and came back before the fault.
	waitFor(t, 30*time.Second, "keys spilled to and read back from the local tier", func() bool {
		c := scrapeTier(t, addr)
		return c.spills > 0 && c.loads > 0 && len(tierFiles(local)) == partitions
	})
	time.Sleep(max(2*time.Second-time.Since(started), 0))
	before := w.owners()
	atStop := scrapeTier(t, addr)
	mark := logLen(p)
	srv.Stop()
	down := time.Now()
	time.Sleep(time.Second)
	srv.Start()
	outage := time.Since(down)
	time.Sleep(3 * time.Second)
	pub.stopAndWait()
	lastPub := time.Now()
	waitFor(t, 60*time.Second, "drained", w.drained)
	drain := time.Since(lastPub)
	after := w.owners()
	atEnd := scrapeTier(t, addr)
	restores := map[int]int{}
	restoresSince(restores, p, mark, before)
	t.Logf("tier before the outage: %v; after it: %v; tier files now %d", atStop, atEnd, len(tierFiles(local)))
	if atEnd.spills <= atStop.spills || atEnd.loads <= atStop.loads {
		t.Errorf("the local tier was not used after the outage: %v before it, %v at the end", atStop, atEnd)
	}
	checkRestores(t, before, after, restores)
	p.stop(t)

	w.data, w.sent, w.nsent = pub.data, pub.sent, pub.n
	w.keys = append(w.keys, pub.keys...)
	w.check()

	byPart := map[int][]time.Time{}
	for _, o := range readOutputs(t, js, "POUT") {
		byPart[partitionOf(o.key)] = append(byPart[partitionOf(o.key)], o.at)
	}
	var rows []string
	worst := time.Duration(0)
	for part := range partitions {
		g, _ := longestGap(byPart[part], down, lastPub)
		worst = max(worst, g)
		rows = append(rows, fmt.Sprintf("p%d %v", part, g.Round(time.Millisecond)))
	}
	inGap, _ := longestGap(pub.times, down, lastPub)
	t.Logf("figure: server down %v with %d keys (%d messages): longest gap between outputs of one partition %v (%s), of the input %v; drained %v after the last publish; load average %s",
		outage.Round(time.Millisecond), manyKeys, pub.n, worst.Round(time.Millisecond), strings.Join(rows, ", "),
		inGap.Round(time.Millisecond), drain.Round(time.Millisecond), loadAvg())
}

// nodeLossKeys is how many keys TestClusterNodeLossManyKeys publishes to:
// 50 per partition, of which a worker holds about 3 in memory.
const nodeLossKeys = 600

// TestClusterNodeLossManyKeys is TestClusterNodeLoss's node loss, leaner,
// with keys far beyond the live set: three nats-server processes
// clustered on loopback (R3 streams and buckets), three workers (12
// partitions, lease_ttl 3 s) each holding about 3 keys of a partition in
// memory (memory_budget 1500000 B: 125000 B a partition, 21.1 KiB a key
// and 1 KiB for each of its 50 keys) and the rest in its local tier, and
// a steady publisher over 600 keys. The server leading the coordination
// bucket is SIGKILLed (the input and output streams' leaders stepped off
// it first), started again 12 s later, and publishing goes on for 4 s
// after it answers. Asserted: the local tiers spilled and read back after
// the kill (the workers' counters grew across it); every partition taken
// again after the kill restored keys from KV; every partition has outputs
// after the kill; every key's state is an uninterrupted run's and every
// output is there once, per key in input order. The pauses are logged as
// figures, never asserted.
//
//	go test ./internal/proctest -run TestClusterNodeLossManyKeys -v
func TestClusterNodeLossManyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level cluster fault test (execs nats-server and kpcastream; skipped under -short)")
	}
	binary(t)
	natsServerBinary(t)
	t.Logf("load average at start: %s", loadAvg())
	cl := startNATSCluster(t, t.TempDir())
	nc, js := connectCluster(t, cl.urls())
	w := &world{t: t, js: js, parts: nodeLossParts, data: map[string][][]float64{}, sent: map[string]int{}}
	var ws []*proc
	var addrs []string
	var locals []string
	for i := range 3 {
		dir := t.TempDir()
		yml := debugWithMetrics(t, nodeLossConfig(cl.url(i), dir))
		const snap = "    snapshot: {every_messages: 50, every: 2s}\n"
		if !strings.Contains(yml, snap) {
			t.Fatalf("the node-loss config has no line %q", snap)
		}
		yml = strings.Replace(yml, snap, snap+"    memory_budget: 1500000\n", 1)
		cfg := filepath.Join(dir, "kpcastream.yaml")
		if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, start(t, cfg))
		keepLogs(t, ws[i])
		locals = append(locals, filepath.Join(dir, "local"))
		addrs = append(addrs, metricsAddr(t, ws[i]))
		if i == 0 {
			w.memberOf(ws[0].cmd.Process.Pid) // the first creates the streams and buckets alone (TestClusterNodeLoss)
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
	tiers := func() tierCounters {
		var c tierCounters
		for _, a := range addrs {
			c = c.add(scrapeTier(t, a))
		}
		return c
	}
	files := func() int {
		n := 0
		for _, l := range locals {
			n += len(tierFiles(l))
		}
		return n
	}

	pub := newSteadyPublisher(t, cl.urls(), 200, nodeLossKeys)
	pub.start()
	started := time.Now()
	waitFor(t, 30*time.Second, "keys spilled to and read back from the local tiers", func() bool {
		c := tiers()
		return c.spills > 0 && c.loads > 0
	})
	time.Sleep(max(4*time.Second-time.Since(started), 0))

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
	time.Sleep(time.Second) // the step-downs' own pause over before the kill
	before := w.owners()
	atKill := tiers()
	var marks []int
	for _, p := range ws {
		marks = append(marks, logLen(p))
	}
	t.Logf("killing %s, leader of the coordination bucket; tier so far: %v, %d tier files; load average %s", victimName, atKill, files(), loadAvg())
	probe := newBucketProbe(t, cl.url((victim+1)%3))
	cl.kill(victim)
	kill := time.Now()
	bucketOK := probe.firstWrite(60 * time.Second)
	if bucketOK.IsZero() {
		t.Fatalf("the coordination bucket took no write within 60 s of the kill of %s", victimName)
	}
	time.Sleep(max(12*time.Second-time.Since(kill), 0))
	cl.start(victim)
	cl.waitJetStream(victim, 60*time.Second)
	restarted := time.Now()
	time.Sleep(4 * time.Second)
	pub.stopAndWait()
	lastPub := time.Now()
	waitFor(t, 90*time.Second, "every partition drained", func() bool { return drainedCluster(js, nodeLossParts) })
	drain := time.Since(lastPub)
	// Every partition owned by a live worker before the workers stop (a
	// takeover still in progress would be stopped half-way).
	waitFor(t, 30*time.Second, "every partition owned by a worker", func() bool {
		for _, r := range w.owners() {
			if !ids[r.Owner] {
				return false
			}
		}
		return true
	})
	after := w.owners()
	atEnd := tiers()
	restores := map[int]int{}
	for i, p := range ws {
		restoresSince(restores, p, marks[i], before)
	}
	t.Logf("tier at the kill: %v; at the end: %v; %d tier files", atKill, atEnd, files())
	if atEnd.spills <= atKill.spills || atEnd.loads <= atKill.loads {
		t.Errorf("the local tiers were not used after the kill: %v at the kill, %v at the end", atKill, atEnd)
	}
	checkRestores(t, before, after, restores)
	for _, p := range ws {
		p.stop(t)
	}

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
	worst, late := phasePauses(t, "node loss, many keys", byPart, kill, lastPub, bucketOK, "bucket")
	t.Logf("figure: node loss with %d keys (%d messages, lease_ttl %v): bucket writable again %v after the kill; longest pause of a partition %v; latest resumption of a paused one %v after the bucket took writes again; server back %v after the kill; drained %v after the last publish; load average %s",
		nodeLossKeys, pub.n, nodeLossTTL, bucketOK.Sub(kill).Round(time.Millisecond), worst.Round(time.Millisecond), late.Round(time.Millisecond),
		restarted.Sub(kill).Round(time.Millisecond), drain.Round(time.Millisecond), loadAvg())
	w.checkRun(snapshot.Config{Replicas: 3}, outs)
}
