package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

// TestDeadLetters sends one message of every bad-input class and checks
// that each reaches the dead-letter subject with its reason, that the
// learner state is untouched and that the worker keeps going.
func TestDeadLetters(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("dlq")
	pc.MaxBatch = 4
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	dl, err := e.nc.SubscribeSync("kpca.dlq.dlq")
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.nc.SubscribeSync("kpca.out.dlq.s1")
	if err != nil {
		t.Fatal(err)
	}
	subj := "in.dlq.s1"
	for i, x := range vectors(3, pcaWarm) { // warm the learner up
		e.publish(t, subj, encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	if _, err := out.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("warm-up output: %v", err)
	}
	nan, _ := msgpack.Marshal(map[string]any{"x": []float64{1, math.NaN(), 2}})
	bad := []struct {
		name, reason string
		data         []byte
	}{
		{"undecodable", "malformed", []byte("{not json")},
		{"wrong dimension", "dimension", []byte(`{"x":[1,2]}`)},
		{"one value too many", "dimension", []byte(`{"x":[1,2,3,4]}`)},
		{"nan", "non_finite", nan},
		{"oversized batch", "too_large", []byte(`{"batch":[[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]}`)},
		{"panic", "panic", []byte(fmt.Sprintf(`{"x":[%v,1,1]}`, panicValue))},
		{"label of a bad type", "malformed", []byte(`{"x":[1,2,3],"y":[1]}`)},
		{"nested meta", "malformed", []byte(`{"x":[1,2,3],"meta":{"a":{"b":1}}}`)},
	}
	before := r.stats(pc.Name)
	for _, b := range bad {
		e.publish(t, subj, b.data, "")
	}
	for _, b := range bad {
		m, err := dl.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("dead letter for %s: %v", b.name, err)
		}
		if got := m.Header.Get(HeaderError); got != b.reason {
			t.Errorf("%s: reason got %q, want %q (detail %q)", b.name, got, b.reason, m.Header.Get(HeaderErrorDetail))
		}
		if m.Header.Get(HeaderSubject) != subj || m.Header.Get(HeaderStreamSeq) == "" || string(m.Data) != string(b.data) {
			t.Errorf("%s: headers %v, payload %q", b.name, m.Header, m.Data)
		}
	}
	// The worker keeps going, and the bad messages changed nothing.
	e.publish(t, subj, encodeObs(t, "json", []float64{1, 2, 3}, "after"), "")
	m, err := out.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("output after bad inputs: %v", err)
	}
	o, err := codec.DecodeOutput(m.Data, codec.JSON)
	if err != nil || o.ID != "after" {
		t.Fatalf("output after bad inputs: %+v, %v", o, err)
	}
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })
	after := r.stats(pc.Name)
	if d := after.DeadLettered - before.DeadLettered; d != int64(len(bad)) {
		t.Errorf("dead-lettered: got %d, want %d", d, len(bad))
	}
	if got := metricValue(t, r.p.met.deadLetters.WithLabelValues(pc.Name, "dimension")); got != 2 {
		t.Errorf("kpcastream_dead_letters_total{reason=dimension}: got %v, want 2", got)
	}
	// Stored by default, in the pipeline's dead-letter stream, each with
	// its reason, pipeline, key and input subject.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dst, err := e.js.Stream(ctx, "KPCA_DLQ_dlq")
	if err != nil {
		t.Fatalf("dead-letter stream: %v", err)
	}
	info, err := dst.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(bad)) || info.Config.MaxAge != DefaultDeadLetterMaxAge || info.Config.MaxBytes != DefaultDeadLetterMaxBytes {
		t.Errorf("dead-letter stream: %d messages (want %d), max_age %v, max_bytes %d", info.State.Msgs, len(bad), info.Config.MaxAge, info.Config.MaxBytes)
	}
	for i, b := range bad {
		sm, err := dst.GetMsg(ctx, info.State.FirstSeq+uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if sm.Header.Get(HeaderError) != b.reason || sm.Header.Get(HeaderPipeline) != pc.Name || sm.Header.Get(HeaderKey) != "s1" ||
			sm.Header.Get(HeaderInputSubject) != subj || string(sm.Data) != string(b.data) {
			t.Errorf("stored dead letter %d (%s): headers %v, payload %q", i, b.name, sm.Header, sm.Data)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	st, _ := e.loadState(t, pc.Name, "s1")
	if st.Seen != pcaWarm+1 {
		t.Errorf("learner seen %d observations, want %d (bad inputs must not count)", st.Seen, pcaWarm+1)
	}
}

// TestStaleWorkerCannotOverwrite commits a newer snapshot behind the
// processor's back: the processor's next save conflicts, it does not
// overwrite; the partition is fenced (it stops without further writes), is
// taken again with a new epoch, claims the newer snapshot and skips what
// it holds.
func TestStaleWorkerCannotOverwrite(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("stale")
	pc.Snapshot = SnapshotPolicy{EveryMessages: 2, Every: -1}
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1})
	subj := "in.stale.s"
	xs := vectors(5, 12)
	for i := range 2 {
		e.publish(t, subj, encodeObs(t, "json", xs[i], ""), "")
	}
	key := snapshot.JoinKey(pc.Name, "s")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var snap *codec.Snapshot
	var rev uint64
	waitFor(t, 5*time.Second, "snapshot after 2 messages", func() bool {
		var err error
		snap, rev, err = e.store.Load(ctx, key)
		return err == nil && snap.LastSeq == 2
	})
	// Another worker commits a newer snapshot (it claims sequence 1000).
	snap.LastSeq = 1000
	newer, err := e.store.Save(ctx, key, snap, rev)
	if err != nil {
		t.Fatalf("competing save: %v", err)
	}
	for i := 2; i < 4; i++ {
		e.publish(t, subj, encodeObs(t, "json", xs[i], ""), "")
	}
	waitFor(t, 5*time.Second, "conflict", func() bool {
		return metricValue(t, r.p.met.snapFailures.WithLabelValues(pc.Name, "conflict")) == 1
	})
	waitFor(t, 5*time.Second, "fenced", func() bool {
		return metricValue(t, r.p.met.fenced.WithLabelValues(pc.Name)) == 1
	})
	// The partition is taken again (epoch 2), which claims the competing
	// snapshot: same content, new epoch, a later revision.
	waitFor(t, 5*time.Second, "claimed by epoch 2", func() bool {
		got, gotRev, err := e.store.Load(ctx, key)
		return err == nil && got.LastSeq == 1000 && got.Epoch == 2 && gotRev > newer
	})
	// Messages 3 and 4 (replayed from the checkpoint) and the next one are
	// covered by the competing snapshot's sequence: skipped, not learned.
	skipped := r.stats(pc.Name).Skipped
	e.publish(t, subj, encodeObs(t, "json", xs[4], ""), "")
	waitFor(t, 5*time.Second, "skip by the claimed snapshot", func() bool { return r.stats(pc.Name).Skipped >= skipped+1 })
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if got, _, err := e.store.Load(ctx, key); err != nil || got.LastSeq != 1000 || got.State.Seen != snap.State.Seen {
		t.Fatalf("final snapshot: %+v (%v), want the competing one (last seq 1000, %d seen)", got, err, snap.State.Seen)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMaxKeys sends messages for many more keys than max_keys: the live
// learners stay bounded, unloaded ones are snapshotted and reloaded.
func TestMaxKeys(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("many")
	pc.MaxKeys = 4
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1}
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 2})
	const nkeys, rounds = 24, 3
	peak := int64(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				peak = max(peak, r.stats(pc.Name).Learners)
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for round := range rounds {
		for k := range nkeys {
			e.publish(t, fmt.Sprintf("in.many.key%02d", k), encodeObs(t, "msgpack", vectors(uint64(k), rounds)[round], ""), "")
		}
	}
	waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	close(stop)
	<-done
	if peak > int64(pc.MaxKeys) || peak == 0 {
		t.Errorf("live learners peaked at %d, want 1..%d", peak, pc.MaxKeys)
	}
	if got := metricValue(t, r.p.met.activeLearners.WithLabelValues(pc.Name)); got > float64(pc.MaxKeys) {
		t.Errorf("kpcastream_active_learners: got %v, want ≤ %d", got, pc.MaxKeys)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stats: %+v", r.stats(pc.Name))
	for k := range nkeys {
		st, last := e.loadState(t, pc.Name, fmt.Sprintf("key%02d", k))
		if st.Seen != rounds {
			t.Logf("key%02d last seq %d", k, last)
			t.Errorf("key%02d: seen %d, want %d (unloaded state lost?)", k, st.Seen, rounds)
		}
	}
}

// TestCorruptSnapshot refuses a key with a corrupt snapshot (fail policy)
// and starts it afresh with the reset policy.
func TestCorruptSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, snapshot.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := snapshot.EncodeKey(snapshot.JoinKey("bad", "c"))
	if _, err := kv.Put(ctx, k, []byte("KPCS garbage")); err != nil {
		t.Fatal(err)
	}
	pc := pipelineConfig("bad")
	pc.Snapshot.EveryMessages = 1
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	e.publish(t, "in.bad.c", encodeObs(t, "json", []float64{1, 2, 3}, ""), "")
	waitFor(t, 5*time.Second, "refusal", func() bool { return r.stats(pc.Name).Naks >= 2 })
	if n := r.stats(pc.Name).Learners; n != 0 {
		t.Errorf("a learner was loaded for a corrupt snapshot (%d live)", n)
	}
	// The reset request is the fix the refusal names: it does not decode
	// the corrupt snapshot, replaces it by compare-and-set (fenced), and the
	// key's held message is then applied to the fresh learner.
	k2, _ := snapshot.EncodeKey(snapshot.JoinKey("bad", "d"))
	if _, err := kv.Put(ctx, k2, []byte("KPCS garbage")); err != nil {
		t.Fatal(err)
	}
	e.publish(t, "in.bad.d", encodeObs(t, "json", []float64{1, 2, 3}, ""), "")
	naks := r.stats(pc.Name).Naks
	waitFor(t, 5*time.Second, "refusal of d", func() bool { return r.stats(pc.Name).Naks >= naks+1 })
	if err := r.p.Reset(ctx, pc.Name, "d"); err != nil {
		t.Fatalf("reset of a key with a corrupt snapshot: %v", err)
	}
	waitFor(t, 5*time.Second, "d applied after the reset", func() bool {
		st, _, err := e.store.Load(ctx, snapshot.JoinKey("bad", "d"))
		return err == nil && st.State.Seen == 1
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	pc.Snapshot.OnCorrupt = OnCorruptReset
	r = e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	waitFor(t, 5*time.Second, "fresh learner", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	st, _ := e.loadState(t, pc.Name, "c")
	if st.Seen != 1 {
		t.Errorf("reset key: seen %d, want 1", st.Seen)
	}
}

// TestOperations checks the micro endpoints and the HTTP endpoints.
func TestOperations(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("ops")
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	srv := httptest.NewServer(r.p.Handler())
	defer srv.Close()
	for i, x := range vectors(9, 6) {
		e.publish(t, "in.ops.m", encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })

	req := func(subject string, body any) *nats.Msg {
		t.Helper()
		var data []byte
		if body != nil {
			data, _ = json.Marshal(body)
		}
		m, err := e.nc.Request(subject, data, 5*time.Second)
		if err != nil {
			t.Fatalf("request %s: %v", subject, err)
		}
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
			t.Fatalf("request %s: error %s %s", subject, code, m.Header.Get(micro.ErrorHeader))
		}
		return m
	}
	var stats []PipelineStats
	if err := json.Unmarshal(req("kpcastream.stats", nil).Data, &stats); err != nil || len(stats) != 1 || stats[0].In != 6 {
		t.Errorf("stats: %+v, %v", stats, err)
	}
	var infos []PipelineInfo
	if err := json.Unmarshal(req("kpcastream.pipelines", nil).Data, &infos); err != nil || len(infos) != 1 || infos[0].Dim != 3 || !infos[0].OutputJS {
		t.Errorf("pipelines: %+v, %v", infos, err)
	}
	model, err := codec.DecodeModel(req("kpcastream.model", KeyRequest{Pipeline: "ops", Key: "m"}).Data)
	if err != nil || model.Seen != 6 {
		t.Errorf("model: %+v, %v", model, err)
	}
	var snapResp map[string]int
	_ = json.Unmarshal(req("kpcastream.snapshot", KeyRequest{Pipeline: "ops", Key: "m"}).Data, &snapResp)
	if snapResp["snapshots"] != 1 {
		t.Errorf("snapshot: got %v, want 1 snapshot", snapResp)
	}
	waitFor(t, 5*time.Second, "snapshot saved", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, _, err := e.store.Load(ctx, snapshot.JoinKey("ops", "m"))
		return err == nil && s.State.Seen == 6
	})
	req("kpcastream.reset", KeyRequest{Pipeline: "ops", Key: "m"})
	waitFor(t, 5*time.Second, "reset saved", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, _, err := e.store.Load(ctx, snapshot.JoinKey("ops", "m"))
		return err == nil && s.State.Seen == 0
	})
	for _, c := range []struct {
		subject, body, code string
	}{
		{"kpcastream.model", `{"pipeline":"nope","key":"m"}`, "404"},
		{"kpcastream.model", `{"pipeline":"ops","key":"never-seen"}`, "404"},
		{"kpcastream.reset", `{"pipeline":"ops","key":"never-seen"}`, "404"},
		{"kpcastream.snapshot", `{"pipeline":"ops","key":"never-seen"}`, "404"},
		{"kpcastream.model", `{"pipeline":"ops"}`, "400"},
		{"kpcastream.model", `{"pipeline":`, "400"},
	} {
		m, err := e.nc.Request(c.subject, []byte(c.body), 5*time.Second)
		if err != nil || m.Header.Get(micro.ErrorCodeHeader) != c.code {
			t.Errorf("%s %s: got %v %v, want error code %s", c.subject, c.body, m, err, c.code)
		}
	}
	// Read-only requests and refusals created nothing.
	if _, _, err := e.store.Load(context.Background(), snapshot.JoinKey("ops", "never-seen")); !errors.Is(err, snapshot.ErrNoSnapshot) {
		t.Errorf("snapshot of a key only asked about: %v, want none", err)
	}
	if got := r.stats("ops").Learners; got != 1 {
		t.Errorf("learners after requests for unknown keys: %d, want 1", got)
	}
	// The member's own endpoints answer for it alone.
	if err := json.Unmarshal(req("kpcastream.i."+r.p.ID()+".stats", nil).Data, &stats); err != nil || len(stats) != 1 || stats[0].In != 6 ||
		len(stats[0].Partitions) != 1 || stats[0].Partitions[0].Member != r.p.ID() {
		t.Errorf("own stats: %+v, %v", stats, err)
	}
	ping, err := e.nc.Request("$SRV.PING.kpcastream", nil, 5*time.Second)
	if err != nil || !strings.Contains(string(ping.Data), `"name":"kpcastream"`) {
		t.Errorf("$SRV.PING: %v %v", ping, err)
	}

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `kpcastream_messages_total{pipeline="ops",result="ok"} 3`) ||
		!strings.Contains(body, "kpcastream_learn_duration_seconds_bucket") || !strings.Contains(body, "kpcastream_active_learners") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz while running: %d", code)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz after stop: %d, want 503", code)
	}
	_ = jetstream.MsgIDHeader
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	t.Fatalf("metric %v is neither a counter nor a gauge", m.Desc())
	return 0
}

// TestCopiedSnapshotRefused copies key a's snapshot over key b's: b's
// messages are refused (nak, reason corrupt_snapshot) with an error that
// names what the snapshot holds, and b's learner is not loaded; a is
// untouched.
func TestCopiedSnapshotRefused(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("copy")
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	for i, x := range vectors(3, 4) {
		e.publish(t, "in.copy.a", encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, snapshot.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	ka, _ := snapshot.EncodeKey(snapshot.JoinKey("copy", "a"))
	kb, _ := snapshot.EncodeKey(snapshot.JoinKey("copy", "b"))
	ea, err := kv.Get(ctx, ka)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, kb, ea.Value()); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.p.store.Load(ctx, snapshot.JoinKey("copy", "b")) // the store itself reads it fine
	if err != nil {
		t.Fatalf("load of the copied bytes: %v", err)
	}
	r = e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	e.publish(t, "in.copy.b", encodeObs(t, "json", []float64{1, 2, 3}, ""), "")
	waitFor(t, 5*time.Second, "refusal", func() bool { return r.stats(pc.Name).Naks >= 1 })
	if n := r.stats(pc.Name).Learners; n != 0 {
		t.Errorf("a learner was loaded from another key's snapshot (%d live)", n)
	}
	_, err = r.p.Model(ctx, "copy", "b")
	if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), `holds pipeline "copy" key "a"`) {
		t.Errorf("model of b: %v, want a corrupt-snapshot error naming key a", err)
	}
	if m, err := r.p.Model(ctx, "copy", "a"); err != nil || len(m) == 0 {
		t.Errorf("model of a: %v", err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreKeepsBudgetPolicy restores snapshots taken with another
// budget policy (eviction lli, as under the earlier default) into a
// pipeline whose eviction is the default: the key goes on with its own
// policy. A snapshot whose learner differs otherwise (the budget) is
// refused.
func TestRestoreKeepsBudgetPolicy(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("policy")
	pc.Learner = learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 12,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	save := func(key string, lc learners.Config) *learners.State {
		l, err := learners.New(lc)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range vectors(17, 30) {
			if err := l.Learn(x); err != nil {
				t.Fatal(err)
			}
		}
		st := l.State()
		if _, err := e.store.Save(ctx, snapshot.JoinKey(pc.Name, key), &codec.Snapshot{Key: key, Pipeline: pc.Name, State: st}, 0); err != nil {
			t.Fatal(err)
		}
		return st
	}
	old := pc.Learner
	old.Eviction = "lli"
	save("old", old)
	other := pc.Learner
	other.Budget = 13
	save("other", other)
	r := e.startWith(t, Config{Pipelines: []PipelineConfig{pc}}, nil)
	e.publish(t, "in.policy.old", encodeObs(t, "json", []float64{0.1, 0.2, 0.3}, ""), "")
	e.publish(t, "in.policy.other", encodeObs(t, "json", []float64{0.1, 0.2, 0.3}, ""), "")
	waitFor(t, 5*time.Second, "old applied, other refused", func() bool {
		s := r.stats(pc.Name)
		return s.Out+s.Warming >= 1 && s.Naks >= 1
	})
	m, err := r.p.Model(ctx, pc.Name, "old")
	if err != nil {
		t.Fatalf("model of the restored key: %v", err)
	}
	model, err := codec.DecodeModel(m)
	if err != nil || model.Seen != 31 {
		t.Fatalf("restored key: %+v %v, want 31 observations seen", model, err)
	}
	if b := r.stats(pc.Name).Budget; len(b) != 1 || b["ok"]+b["tight"]+b["too_small"] != 1 {
		t.Errorf("budget advice of the loaded learners: %v, want one learner counted", b)
	}
	if _, err := r.p.Model(ctx, pc.Name, "other"); !errors.Is(err, errIncompatible) {
		t.Errorf("snapshot with another budget: %v, want %v", err, errIncompatible)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	snap, _, err := e.store.Load(ctx, snapshot.JoinKey(pc.Name, "old"))
	if err != nil || snap.State.Config.Eviction != "lli" || snap.State.Seen != 31 {
		t.Errorf("saved state of the old key: eviction %q seen %d (%v), want lli and 31", snap.State.Config.Eviction, snap.State.Seen, err)
	}
}

// TestJunkCreatesNoState publishes bad messages on many new keys of a
// pipeline whose one worker may hold two learners, one of them live: each
// is dead-lettered before its key is loaded, so none creates a learner, a
// claim or a snapshot, and the live key is not evicted.
func TestJunkCreatesNoState(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("junk")
	pc.MaxKeys = 2
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1})
	for i, x := range vectors(21, pcaWarm) {
		e.publish(t, "in.junk.live", encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	waitFor(t, 5*time.Second, "the live key learned", func() bool { return r.stats(pc.Name).In == pcaWarm })
	junk := []string{`{not json`, `{"x":[1,2]}`, `{"x":[1,2,3,4]}`, `{"x":[1,"a",3]}`, `{"batch":[]}`}
	const n = 20
	for i := range n {
		e.publish(t, fmt.Sprintf("in.junk.j%d", i), []byte(junk[i%len(junk)]), "")
	}
	waitFor(t, 5*time.Second, "junk dead-lettered", func() bool { return r.stats(pc.Name).DeadLettered == n })
	st := r.stats(pc.Name)
	if st.Learners != 1 {
		t.Errorf("live learners %d after %d bad messages on new keys, want 1 (the live key)", st.Learners, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range n {
		key := fmt.Sprintf("j%d", i)
		if _, _, err := e.store.Load(ctx, snapshot.JoinKey(pc.Name, key)); !errors.Is(err, snapshot.ErrNoSnapshot) {
			t.Errorf("key %s: snapshot load gives %v, want no snapshot (a bad message must not claim its key)", key, err)
		}
	}
	// The live key was never unloaded: its only snapshot is its claim,
	// written before it learned anything (an eviction saves what it learned).
	if st, _ := e.loadState(t, pc.Name, "live"); st.Seen != 0 {
		t.Errorf("the live key's snapshot holds %d observations: it was evicted by bad messages", st.Seen)
	}
}
