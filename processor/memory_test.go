package processor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	dto "github.com/prometheus/client_model/go"
)

// TestMemoryQuota checks how memory_budget and max_keys become a worker's
// live keys.
func TestMemoryQuota(t *testing.T) {
	for _, tc := range []struct {
		budget         int64
		maxKeys, parts int
		n, keyBytes    int
		want           int
	}{
		{budget: 100 << 10, parts: 1, n: 1, keyBytes: 10 << 10, want: 10},
		{budget: 100 << 10, parts: 2, n: 2, keyBytes: 10 << 10, want: 2},             // 25 KiB a worker
		{budget: 100 << 10, maxKeys: 6, parts: 1, n: 2, keyBytes: 10 << 10, want: 3}, // the cap is lower
		{budget: 100 << 10, maxKeys: 1000, parts: 1, n: 1, keyBytes: 10 << 10, want: 10},
		{budget: 1 << 10, parts: 1, n: 1, keyBytes: 10 << 10, want: 1}, // at least one
	} {
		pc := PipelineConfig{MemoryBudget: tc.budget, MaxKeys: tc.maxKeys, Partitions: tc.parts}
		if got := memoryQuota(pc, tc.n, tc.keyBytes); got != tc.want {
			t.Errorf("budget %d max_keys %d partitions %d workers %d key %d B: %d keys a worker, want %d",
				tc.budget, tc.maxKeys, tc.parts, tc.n, tc.keyBytes, got, tc.want)
		}
	}
}

// TestMemoryPlan checks the plan lint prints: the key's size from its
// configuration, the keys that fit, and the cap.
func TestMemoryPlan(t *testing.T) {
	pc := pipelineConfig("plan")
	pc.MemoryBudget = 64 << 20
	c := Config{Workers: 2, Pipelines: []PipelineConfig{pc}}
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		t.Fatal(err)
	}
	if plan.KeyBytes <= 0 || plan.Keys != 2*plan.PerWorker || plan.Bytes()+2*int64(plan.Scratch) > pc.MemoryBudget ||
		plan.Bytes()+2*int64(plan.Scratch) < pc.MemoryBudget-2*int64(plan.KeyBytes) {
		t.Errorf("plan %+v: want 2 workers' keys and scratch filling 64 MiB to within a key each", plan)
	}
	if plan.Scratch != 0 {
		t.Errorf("plan's scratch %d B a worker for a %s learner, want 0", plan.Scratch, pc.Learner.Learner)
	}
	ipc := pc
	ipc.Learner = benchLearner(16, 2, 16)
	if ip, err := c.MemoryPlan(ipc); err != nil || ip.Scratch == 0 || ip.Bytes()+2*int64(ip.Scratch) > pc.MemoryBudget ||
		ip.Bytes()+2*int64(ip.Scratch) < pc.MemoryBudget-2*int64(ip.KeyBytes) {
		t.Errorf("ikpca plan %+v, %v: want 2 workers' keys and scratch filling 64 MiB to within a key each", ip, err)
	} else if want, _ := learners.ScratchBytes(ipc.Learner); ip.Scratch != want {
		t.Errorf("ikpca plan's scratch %d B a worker, want the learner's %d", ip.Scratch, want)
	}
	if s := plan.String(); !strings.Contains(s, "64.0 MiB") || !strings.Contains(s, groupDigits(plan.Keys)+" live keys") {
		t.Errorf("plan text %q", s)
	}
	if plan.Local != 0 {
		t.Errorf("no local_dir: %d keys with a local tier, want 0", plan.Local)
	}
	c.LocalDir = t.TempDir()
	if lp, err := c.MemoryPlan(pc); err != nil || lp.Local != 2*((64<<20/2-lp.Scratch-lp.KeyBytes)/localKeyBytes) || !strings.Contains(lp.String(), "with the local tier") ||
		lp.LocalDisk != int64(lp.Local)*int64(lp.KeyBytes) || !strings.Contains(lp.String(), "disk at most "+sizeText(lp.LocalDisk)) {
		t.Errorf("with local_dir: %+v (%q), %v; want 2 workers' (share − a key)/1 KiB", lp, lp.String(), err)
	}
	c.LocalDir = ""
	pc.MaxKeys = 10
	if plan, err := c.MemoryPlan(pc); err != nil || plan.Keys != 10 || !strings.Contains(plan.String(), "max_keys 10") {
		t.Errorf("with max_keys 10: %+v, %v", plan, err)
	}
	pc.Learner.Dim = -1
	if _, err := c.MemoryPlan(pc); err == nil {
		t.Error("a learner that cannot be built: no error")
	}
}

// TestMemoryBudget sends messages for many more keys than memory_budget
// holds: the live learners stay within it, memory_used and the evictions
// say so, and unloaded keys are snapshotted and reloaded.
func TestMemoryBudget(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("mem")
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1}
	c := Config{Workers: 2, Pipelines: []PipelineConfig{pc}}
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		t.Fatal(err)
	}
	pc.MemoryBudget = int64(3*plan.KeyBytes)*2 + 100 // three keys a worker
	c.Pipelines[0] = pc
	r := e.start(t, c)
	const nkeys, rounds = 20, 3
	peak := int64(0)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				s := r.stats(pc.Name)
				peak = max(peak, s.Learners)
				if s.MemoryUsed > pc.MemoryBudget {
					t.Errorf("memory_used %d B over memory_budget %d B", s.MemoryUsed, pc.MemoryBudget)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	// Round by round: a key's messages that arrive while it loads wait
	// behind its load and are applied together, so a round published
	// before the last one drained would not miss on every message.
	for round := range rounds {
		for k := range nkeys {
			e.publish(t, fmt.Sprintf("in.mem.key%02d", k), encodeObs(t, "msgpack", vectors(uint64(k), rounds)[round], ""), "")
		}
		waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	}
	close(stop)
	<-done
	if peak > 6 || peak == 0 {
		t.Errorf("live learners peaked at %d, want 1..6", peak)
	}
	if got := metricValue(t, r.p.met.memoryBudget.WithLabelValues(pc.Name)); got != float64(pc.MemoryBudget) {
		t.Errorf("kpcastream_memory_budget_bytes %v, want %d", got, pc.MemoryBudget)
	}
	// Each worker's 10 keys a round pass through room for 3: a key's
	// message either finds it still loaded (a hit) or reloads it after an
	// eviction. Applied in delivery order, every message missed (54
	// evictions); with loads in flight, a key whose message finds its
	// unloading save still in flight comes back at once while others
	// wait for their loads, so the keys left loaded at a round's end are
	// not always its last ones and a few hit. At most 3 a worker can be
	// kept from one round into the next: at least 60 − 6 − 2·3·2.
	if got, least := metricValue(t, r.p.met.evictions.WithLabelValues(pc.Name)), nkeys*rounds-6-2*3*(rounds-1); got < float64(least) {
		t.Errorf("kpcastream_key_evictions_total %v, want ≥ %d (20 keys a round through room for 6)", got, least)
	}
	if used, live := metricValue(t, r.p.met.memoryUsed.WithLabelValues(pc.Name)), metricValue(t, r.p.met.activeLearners.WithLabelValues(pc.Name)); used != live*float64(plan.KeyBytes) {
		t.Errorf("kpcastream_memory_used_bytes %v, want active_learners %v × %d B", used, live, plan.KeyBytes)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for k := range nkeys {
		if st, _ := e.loadState(t, pc.Name, fmt.Sprintf("key%02d", k)); st.Seen != rounds {
			t.Errorf("key%02d: seen %d, want %d (unloaded state lost?)", k, st.Seen, rounds)
		}
	}
}

// saves is the number of snapshot saves the pipeline's workers made.
func saves(t *testing.T, r *running, name string) uint64 {
	t.Helper()
	var d dto.Metric
	if err := r.p.met.snapSeconds.WithLabelValues(name).(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.Histogram.GetSampleCount()
}

// TestLocalTier runs far more keys than memory_budget holds with a local
// tier: keys beyond memory go to disk and come back without a snapshot
// save (none while the policy asks for none: KV writes follow the
// schedule, not the evictions), memory stays within the budget, the final
// snapshots hold every message once, and a restart (a new epoch, an empty
// local tier) goes on from the snapshots.
func TestLocalTier(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("tier")
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1}
	dir := t.TempDir()
	c := Config{Workers: 2, Pipelines: []PipelineConfig{pc}, LocalDir: dir}
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		t.Fatal(err)
	}
	const nkeys, rounds = 40, 4
	// Per worker: three keys in memory beside 20 on disk.
	pc.MemoryBudget = 2 * (3*int64(plan.KeyBytes) + 23*localKeyBytes)
	c.Pipelines[0] = pc
	r := e.start(t, c)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				if s := r.stats(pc.Name); s.MemoryUsed > pc.MemoryBudget {
					t.Errorf("memory_used %d B over memory_budget %d B", s.MemoryUsed, pc.MemoryBudget)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for round := range rounds { // round by round: see TestMemoryBudget
		for k := range nkeys {
			e.publish(t, fmt.Sprintf("in.tier.key%02d", k), encodeObs(t, "msgpack", vectors(uint64(k), rounds)[round], ""), "")
		}
		waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	}
	close(stop)
	<-done
	spills, loads := metricValue(t, r.p.met.localSpills.WithLabelValues(pc.Name)), metricValue(t, r.p.met.localLoads.WithLabelValues(pc.Name))
	if spills < nkeys || loads < nkeys {
		t.Errorf("local tier: %v spills, %v loads; want at least %d each (each round passes every key through disk)", spills, loads, nkeys)
	}
	if n := saves(t, r, pc.Name); n != 0 {
		t.Errorf("%d snapshot saves while running with snapshots only on shutdown: evictions to the local tier must not save", n)
	}
	if got := metricValue(t, r.p.met.localBytes.WithLabelValues(pc.Name)); got <= 0 {
		t.Errorf("kpcastream_local_bytes %v, want the files' size", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if n := saves(t, r, pc.Name); n != nkeys {
		t.Errorf("%d snapshot saves at shutdown, want one per key (%d)", n, nkeys)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("local tier files left after the stop: %v", left)
	}
	for k := range nkeys {
		if st, _ := e.loadState(t, pc.Name, fmt.Sprintf("key%02d", k)); st.Seen != rounds {
			t.Errorf("key%02d: seen %d, want %d", k, st.Seen, rounds)
		}
	}
	// A restart goes on from the snapshots; a stale file of an earlier
	// owner in the directory is not read.
	if err := os.WriteFile(filepath.Join(dir, "tier-p0-e2-w0.db"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.start(t, c)
	for k := range nkeys {
		e.publish(t, fmt.Sprintf("in.tier.key%02d", k), encodeObs(t, "msgpack", vectors(uint64(k)+100, 1)[0], ""), "")
	}
	waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for k := range nkeys {
		if st, _ := e.loadState(t, pc.Name, fmt.Sprintf("key%02d", k)); st.Seen != rounds+1 {
			t.Errorf("after the restart key%02d: seen %d, want %d", k, st.Seen, rounds+1)
		}
	}
}

// TestLocalFailureIsNoBadInput: a failure of the local tier — a malformed
// local copy, say — is classified as the fence lost (nak: the partition
// replays under a new epoch), never as bad input to dead-letter.
func TestLocalFailureIsNoBadInput(t *testing.T) {
	f := newFence(time.Minute, time.Now())
	w := &worker{deps: deps{log: zaptest.NewLogger(t), fence: f}, tier: &tier{path: "x.db"}}
	err := w.localFailed(&entry{key: "k"}, "read", fmt.Errorf("decode: %w", codec.ErrMalformed))
	if f.OK() {
		t.Error("the fence holds after a local tier failure")
	}
	if a, reason := classify(err); a != actNak {
		t.Errorf("local tier failure classified %v (%s), want a nak", a, reason)
	}
}
