package processor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natstest"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/kpcastream/kpcastream/snapshot"
)

// TestShardLayoutOneShard: with input.shards left out, every name and
// subject of the layout is the one of versions before shards.
func TestShardLayoutOneShard(t *testing.T) {
	pc := PipelineConfig{Name: "sensors", Partitions: 8,
		Input: InputConfig{Stream: "SENSORS", Subject: "sensors.*.features", Replicas: 3, MaxAge: time.Hour}}.WithDefaults()
	if pc.Input.Shards != 1 {
		t.Fatalf("default shards %d, want 1", pc.Input.Shards)
	}
	if got := pc.InputStreams(); !slices.Equal(got, []string{"SENSORS"}) {
		t.Errorf("streams %v, want [SENSORS]", got)
	}
	sc := pc.inputStreamConfig(0)
	want := jetstream.StreamConfig{Name: "SENSORS", Subjects: []string{"sensors.*.features"}, Replicas: 3, MaxAge: time.Hour, MaxBytes: -1,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "sensors.*.features", Destination: "sensors.{{wildcard(1)}}.features.{{partition(8,1)}}"}}
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("stream config\n got %+v\nwant %+v", sc, want)
	}
	for n := range pc.Partitions {
		if pc.shardOf(n) != 0 || pc.inputStream(n) != "SENSORS" {
			t.Errorf("partition %d: shard %d stream %s, want 0 and SENSORS", n, pc.shardOf(n), pc.inputStream(n))
		}
	}
	if got := consumerName(pc, 3, 7); got != "kpcastream-sensors-p3-e7" {
		t.Errorf("consumer %s", got)
	}
	if got := recordKey(pc, 3); got != "partitions.sensors.3" {
		t.Errorf("record key %s", got)
	}
	if got, want := layoutOf(pc), ownership.Layout("SENSORS", "sensors.*.features", 1, 8); got != want {
		t.Errorf("layout fingerprint %s, want the one of versions before shards %s", got, want)
	}
	if got := pc.deadLetterID(0, 42); got != "dlq/sensors/42" {
		t.Errorf("dead-letter id %s", got)
	}
	if src, dst := pc.ShardMapping(); src != "" || dst != "" {
		t.Errorf("one shard needs no server mapping, got %s → %s", src, dst)
	}
	pc.Output.Stream, pc.Output.Subject = "OUT", "kpca.out.{pipeline}.{shard}.{key}"
	if pc.outputStreamName(0) != "OUT" || pc.outputShards(pc.Output.Subject) != 1 {
		t.Errorf("one shard: output stream %s, %d output shards; want OUT, 1", pc.outputStreamName(0), pc.outputShards(pc.Output.Subject))
	}
	if got := expandShard(pc.Output.Subject, pc.Name, "k", 0); got != "kpca.out.sensors.0.k" {
		t.Errorf("output subject %s", got)
	}
}

// TestShardLayout: partition p in shard p mod S, shard s's stream
// capturing the subjects of its partitions, the server mapping, and the
// names that follow the shards.
func TestShardLayout(t *testing.T) {
	pc := PipelineConfig{Name: "sensors", Partitions: 8, DeadLetter: "kpca.dlq.{pipeline}.{shard}",
		Input:  InputConfig{Stream: "SENSORS", Subject: "sensors.*.features", Shards: 3, ShardTags: [][]string{{"az:a"}, {"az:b"}, {"az:c"}}},
		Output: OutputConfig{Stream: "OUT", Subject: "kpca.out.{pipeline}.{shard}.{key}"}}.WithDefaults()
	if got := pc.InputStreams(); !slices.Equal(got, []string{"SENSORS-0", "SENSORS-1", "SENSORS-2"}) {
		t.Errorf("streams %v", got)
	}
	wantShard := []int{0, 1, 2, 0, 1, 2, 0, 1}
	for n, s := range wantShard {
		if pc.shardOf(n) != s || pc.inputStream(n) != "SENSORS-"+strconv.Itoa(s) {
			t.Errorf("partition %d: shard %d stream %s, want %d", n, pc.shardOf(n), pc.inputStream(n), s)
		}
	}
	subjects := [][]string{
		{"sensors.*.features.0", "sensors.*.features.3", "sensors.*.features.6"},
		{"sensors.*.features.1", "sensors.*.features.4", "sensors.*.features.7"},
		{"sensors.*.features.2", "sensors.*.features.5"},
	}
	for s, want := range subjects {
		sc := pc.inputStreamConfig(s)
		if !slices.Equal(sc.Subjects, want) || sc.SubjectTransform != nil || sc.Placement == nil || !slices.Equal(sc.Placement.Tags, pc.Input.ShardTags[s]) {
			t.Errorf("shard %d: subjects %v transform %v placement %+v; want %v, none, tags %v", s, sc.Subjects, sc.SubjectTransform, sc.Placement, want, pc.Input.ShardTags[s])
		}
	}
	src, dst := pc.ShardMapping()
	if src != "sensors.*.features" || dst != "sensors.{{wildcard(1)}}.features.{{partition(8,1)}}" {
		t.Errorf("mapping %s → %s", src, dst)
	}
	for _, key := range []string{"a", "k17", "sensor-0042"} {
		if got, want := pc.shardOfKey(key), int(ownership.FNV32a(key)%8)%3; got != want {
			t.Errorf("key %s: shard %d, want %d", key, got, want)
		}
	}
	if pc.outputStreamName(2) != "OUT-2" || pc.deadLetterStreamName(1) != "KPCA_DLQ_sensors-1" || pc.outputShards(pc.Output.Subject) != 3 {
		t.Errorf("per-shard streams: %s %s %d", pc.outputStreamName(2), pc.deadLetterStreamName(1), pc.outputShards(pc.Output.Subject))
	}
	if got := pc.DeadLetterSubjects(); got != "kpca.dlq.sensors.*" {
		t.Errorf("dead-letter subjects %s, want every shard's (kpca.dlq.sensors.*)", got)
	}
	if got := pc.deadLetterID(2, 42); got != "dlq/sensors/s2/42" {
		t.Errorf("dead-letter id %s: several shards' sequences overlap, the id must name the shard", got)
	}
	one := pc
	one.Input.Shards = 1
	if layoutOf(one) == layoutOf(pc) {
		t.Error("the layout fingerprint does not tell 1 shard from 3")
	}
	// Consumer and record names do not depend on the shards.
	if consumerName(pc, 5, 2) != consumerName(one, 5, 2) || recordKey(pc, 5) != recordKey(one, 5) {
		t.Error("consumer or record names depend on the shards")
	}
}

// TestShardConfigErrors: what input.shards and the {shard} token need.
func TestShardConfigErrors(t *testing.T) {
	base := func() PipelineConfig {
		pc := pipelineConfig("s")
		pc.Partitions = 4
		return pc
	}
	cases := []struct {
		name string
		edit func(*PipelineConfig)
		want string
	}{
		{"more shards than partitions", func(pc *PipelineConfig) { pc.Input.Shards = 5 }, "pipelines[0].input.shards: must be ≤ partitions (4)"},
		{"negative", func(pc *PipelineConfig) { pc.Input.Shards = -1 }, "pipelines[0].input.shards: must be in [1, 1024]"},
		{"core NATS", func(pc *PipelineConfig) {
			pc.Input.Stream, pc.Input.CreateStream, pc.Partitions, pc.Input.Shards = "", false, 1, 2
		},
			"pipelines[0].input.shards: 2 shards need a JetStream input"},
		{"tags per shard", func(pc *PipelineConfig) { pc.Input.Shards, pc.Input.ShardTags = 2, [][]string{{"a"}} },
			"pipelines[0].input.shard_tags: must list the placement tags of each of the 2 shards"},
		{"empty tag", func(pc *PipelineConfig) { pc.Input.Shards, pc.Input.ShardTags = 2, [][]string{{"a"}, {" "}} }, "pipelines[0].input.shard_tags[1][0]: empty tag"},
		{"shard token on core NATS", func(pc *PipelineConfig) {
			pc.Input.Stream, pc.Input.CreateStream, pc.Partitions, pc.Output.Subject = "", false, 1, "out.{shard}.{key}"
		}, "pipelines[0].output.subject: {shard} needs a JetStream input"},
	}
	for _, c := range cases {
		pc := base()
		c.edit(&pc)
		err := Config{Pipelines: []PipelineConfig{pc}}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	ok := base()
	ok.Input.Shards = 4
	ok.Output.Subject = "out.{pipeline}.{shard}.{key}"
	ok.DeadLetter = "dlq.{pipeline}.{shard}"
	if err := (Config{Pipelines: []PipelineConfig{ok}}).Validate(); err != nil {
		t.Errorf("4 shards of 4 partitions: %v", err)
	}
}

// shardEnv is an embedded nats-server whose global account can be given
// subject mappings (the servers' partitioning of a sharded input).
type shardEnv struct {
	*env
	s *server.Server
}

func newShardEnv(t *testing.T) *shardEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test against an embedded nats-server (skipped under -short)")
	}
	s, url := natstest.RunServer(t)
	nc, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := snapshot.Open(ctx, js, snapshot.Config{})
	if err != nil {
		t.Fatalf("open snapshot store: %v", err)
	}
	return &shardEnv{env: &env{url: url, nc: nc, js: js, store: st}, s: s}
}

// mapShards adds the account mapping pc's shards need.
func (e *shardEnv) mapShards(t *testing.T, pc PipelineConfig) {
	t.Helper()
	src, dst := pc.WithDefaults().ShardMapping()
	if src == "" {
		t.Fatalf("pipeline %s has no shard mapping", pc.Name)
	}
	if err := e.s.GlobalAccount().AddMapping(src, dst); err != nil {
		t.Fatalf("mapping %s → %s: %v", src, dst, err)
	}
}

// shardKeys are the keys of the sharded tests: enough that every one of
// 6 partitions has some.
var shardKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}

// shardOrder is a seeded order of messages over shardKeys, and each key's count.
func shardOrder(total int) (order []int, counts []int) {
	rng := rand.New(rand.NewPCG(11, 3))
	counts = make([]int, len(shardKeys))
	for range total {
		j := rng.IntN(len(shardKeys))
		order = append(order, j)
		counts[j]++
	}
	return order, counts
}

// TestShardsExactlyOnce runs a pipeline with 6 partitions over 3 shards
// (the servers' mapping partitions the input, each shard a stream), with
// outputs and dead letters per shard, is stopped abruptly in the middle
// (no final snapshots) and restarted: every key's state equals an
// uninterrupted one-stream run's, its outputs are in its shard's output
// stream, once each and in order, and the server stored each key in the
// partition and shard the processor expects.
func TestShardsExactlyOnce(t *testing.T) {
	e := newShardEnv(t)
	const total = 240
	order, counts := shardOrder(total)
	data := make([][][]float64, len(shardKeys))
	for j := range shardKeys {
		data[j] = vectors(uint64(300+j), counts[j])
	}
	publish := func(pc PipelineConfig, from, to int) {
		next := make([]int, len(shardKeys))
		for _, j := range order[:from] {
			next[j]++
		}
		for _, j := range order[from:to] {
			e.publish(t, "in."+pc.Name+"."+shardKeys[j], encodeObs(t, "msgpack", data[j][next[j]], fmt.Sprint(next[j])), "")
			next[j]++
		}
	}

	ref := pipelineConfig("shref")
	ref.Partitions = 6
	r := e.start(t, Config{Pipelines: []PipelineConfig{ref}})
	publish(ref, 0, total)
	waitFor(t, 20*time.Second, "reference drained", func() bool { return e.drained(t, ref) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	pc := pipelineConfig("shd")
	pc.Partitions, pc.Input.Shards = 6, 3
	pc.Output.Subject = "kpca.out.{pipeline}.{shard}.{key}"
	pc.DeadLetter = "kpca.dlq.{pipeline}.{shard}"
	no := false
	pc.Snapshot = SnapshotPolicy{EveryMessages: 7, Every: -1, OnShutdown: &no}
	e.mapShards(t, pc)
	r = e.start(t, Config{Pipelines: []PipelineConfig{pc}, QueueSize: 4})
	if infos := r.p.Pipelines(); len(infos) != 1 || !slices.Equal(infos[0].Streams, []string{"shd_IN-0", "shd_IN-1", "shd_IN-2"}) {
		t.Errorf("pipeline info: %+v, want the three shard streams", infos)
	}
	publish(pc, 0, total/2)
	// A malformed message of key k1 goes to its shard's dead letters.
	e.publish(t, "in.shd.k1", []byte("not msgpack"), "")
	waitFor(t, 20*time.Second, "half processed", func() bool { return r.stats(pc.Name).In >= int64(total/3) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	first := r.stats(pc.Name)
	publish(pc, total/2, total)
	pc.Snapshot.OnShutdown = nil
	r = e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	waitFor(t, 20*time.Second, "drained after restart", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	second := r.stats(pc.Name)
	if replayed := second.In - int64(total+1) + first.In; replayed <= 0 {
		t.Errorf("the restart replayed nothing (first run %d, second %d of %d): the test did not exercise replay", first.In, second.In, total+1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := pc.WithDefaults()

	// Where the server put each key: stream shd_IN-s holds only
	// in.shd.<key>.<p> with p = FNV-1a(key) mod 6 and p mod 3 = s.
	seqs := map[string][]uint64{} // key → its input sequences in its shard's stream
	stored := 0
	for s, name := range cfg.InputStreams() {
		st, err := e.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for subj := range info.State.Subjects {
			toks := strings.Split(subj, ".")
			p, _ := strconv.Atoi(toks[3])
			if want := int(ownership.FNV32a(toks[2]) % 6); p != want || p%3 != s {
				t.Errorf("stream %s holds %s: partition %d, want %d in shard %d", name, subj, p, want, want%3)
			}
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			key := strings.Split(m.Subject, ".")[2]
			if !strings.HasPrefix(string(m.Data), "not") {
				seqs[key] = append(seqs[key], seq)
			}
			stored++
		}
	}
	if stored != total+1 {
		t.Errorf("the shards hold %d messages, want %d", stored, total+1)
	}

	// States equal the one-stream run's; outputs once, in order, per shard.
	for j, k := range shardKeys {
		want, _ := e.loadState(t, ref.Name, k)
		got, last := e.loadState(t, pc.Name, k)
		if got.Seen != int64(counts[j]) || !reflect.DeepEqual(got, want) {
			t.Errorf("key %s: seen %d (want %d); state equal to the one-stream run: %v", k, got.Seen, counts[j], reflect.DeepEqual(got, want))
		}
		if ks := seqs[k]; len(ks) != counts[j] || last != ks[len(ks)-1] {
			t.Errorf("key %s: %d messages in its shard (want %d), last applied %d", k, len(ks), counts[j], last)
		}
	}
	outs := map[string][]uint64{}
	for s := range 3 {
		name := cfg.outputStreamName(s)
		for _, m := range readStream(ctx, t, e.js, name) {
			o, err := codec.DecodeOutput(m.Data, codec.Msgpack)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("kpca.out.shd.%d.%s", cfg.shardOfKey(o.Key), o.Key); m.Subject != want || cfg.shardOfKey(o.Key) != s {
				t.Errorf("output of %s on %s in %s, want %s in %s", o.Key, m.Subject, name, want, cfg.outputStreamName(cfg.shardOfKey(o.Key)))
			}
			outs[o.Key] = append(outs[o.Key], o.Seq)
		}
	}
	for _, k := range shardKeys {
		ks := seqs[k]
		if want := ks[pcaWarm-1:]; !slices.Equal(outs[k], want) {
			t.Errorf("key %s: outputs for sequences %v, want %v (each once, in order)", k, outs[k], want)
		}
	}
	s1 := cfg.shardOfKey("k1")
	dl := readStream(ctx, t, e.js, cfg.deadLetterStreamName(s1))
	if len(dl) != 1 || dl[0].Subject != fmt.Sprintf("kpca.dlq.shd.%d", s1) || !strings.HasPrefix(dl[0].Header.Get(jetstream.MsgIDHeader), fmt.Sprintf("dlq/shd/s%d/", s1)) {
		t.Errorf("dead letters of shard %d: %d, want the one malformed message with a shard's id", s1, len(dl))
	}
}

// readStream returns every message of stream name.
func readStream(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream %s seq %d: %v", name, seq, err)
		}
		out = append(out, m)
	}
	return out
}

// runErr starts a processor with cfg and returns the error Run returns
// within 20 s (nil if it became ready: it is then stopped).
func (e *env) runErr(t *testing.T, cfg Config) error {
	t.Helper()
	cfg.Workers = 2
	p, err := New(cfg, Deps{Conn: e.nc, JS: e.js, Snapshots: e.store, Logger: zaptest.NewLogger(t), NewLearner: newPCA})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			t.Fatal("Run neither failed nor became ready in 20s")
		case <-time.After(10 * time.Millisecond):
			if p.Ready() {
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				return nil
			}
		}
	}
}

// TestShardsChange: a pipeline that ran on one stream is refused with
// three shards, with an error that says how to migrate; after the
// migration of the README (subjects taken away, the servers' mapping) it
// starts on three new streams above the old one's sequences, and every
// key's learner goes on from its state: each message applied once, the
// outputs once and in order. Going back is refused again.
func TestShardsChange(t *testing.T) {
	e := newShardEnv(t)
	const total = 96
	order, counts := shardOrder(total)
	publish := func(from, to int) {
		for i, j := range order[from:to] {
			e.publish(t, "in.mig."+shardKeys[j], encodeObs(t, "msgpack", vectors(uint64(from+i), 1)[0], fmt.Sprint(from+i)), "")
		}
	}
	one := pipelineConfig("mig")
	one.Partitions = 6
	r := e.start(t, Config{Pipelines: []PipelineConfig{one}})
	publish(0, total/2)
	waitFor(t, 20*time.Second, "one stream drained", func() bool { return e.drained(t, one) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	three := one
	three.Input.Shards = 3
	err := e.runErr(t, Config{Pipelines: []PipelineConfig{three}})
	if !errors.Is(err, errLayoutChanged) || !strings.Contains(err.Error(), "mig_IN still captures in.mig.*") || !strings.Contains(err.Error(), "README") {
		t.Fatalf("3 shards after 1: %v; want a refusal naming the old stream's subjects and the README", err)
	}
	// The refusal created nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.js.Stream(ctx, "mig_IN-0"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream mig_IN-0 after the refusal: %v, want not found", err)
	}

	// Migration: take the subjects away, map, start with shards: 3.
	old, err := e.js.Stream(ctx, "mig_IN")
	if err != nil {
		t.Fatal(err)
	}
	sc := old.CachedInfo().Config
	sc.Subjects, sc.SubjectTransform = []string{"retired.in.mig.*"}, nil
	if _, err := e.js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	e.mapShards(t, three)
	r = e.start(t, Config{Pipelines: []PipelineConfig{three}})
	for _, name := range three.WithDefaults().InputStreams() {
		st, err := e.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.FirstSeq; got != total/2+1 {
			t.Errorf("stream %s created with first_seq %d, want %d (above the old stream)", name, got, total/2+1)
		}
	}
	publish(total/2, total)
	waitFor(t, 20*time.Second, "three shards drained", func() bool { return e.drained(t, three) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	outs := map[string][]uint64{}
	for _, m := range readStream(ctx, t, e.js, "mig_OUT") {
		o, err := codec.DecodeOutput(m.Data, codec.Msgpack)
		if err != nil {
			t.Fatal(err)
		}
		outs[o.Key] = append(outs[o.Key], o.Seq)
	}
	for j, k := range shardKeys {
		st, _ := e.loadState(t, "mig", k)
		if st.Seen != int64(counts[j]) {
			t.Errorf("key %s: seen %d, want %d", k, st.Seen, counts[j])
		}
		if got := outs[k]; len(got) != counts[j]-(pcaWarm-1) || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("key %s: outputs %v, want %d increasing sequences", k, got, counts[j]-(pcaWarm-1))
		}
	}

	// Back to one stream without migrating: refused.
	err = e.runErr(t, Config{Pipelines: []PipelineConfig{one}})
	if !errors.Is(err, errLayoutChanged) || !strings.Contains(err.Error(), "still captures") {
		t.Fatalf("1 shard after 3: %v; want a refusal", err)
	}
	// Other shard streams that reuse a name of the old layout: refused.
	two := one
	two.Input.Shards = 2
	err = e.runErr(t, Config{Pipelines: []PipelineConfig{two}})
	if !errors.Is(err, errLayoutChanged) || !strings.Contains(err.Error(), "belonged to the old layout too") {
		t.Fatalf("2 shards after 3: %v; want a refusal", err)
	}
	// Another stream name while the old shard streams are gone: refused,
	// naming the override (delete the layout key), which then lets it start.
	for _, name := range three.WithDefaults().InputStreams() {
		if err := e.js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	other := one
	other.Input.Stream = "mig2_IN"
	err = e.runErr(t, Config{Pipelines: []PipelineConfig{other}})
	if !errors.Is(err, errLayoutChanged) || !strings.Contains(err.Error(), "is gone") || !strings.Contains(err.Error(), "delete the key layouts.mig") {
		t.Fatalf("a new stream after the old ones were deleted: %v; want a refusal naming the override", err)
	}
	kv, err := e.js.KeyValue(ctx, DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, layoutKey("mig")); err != nil {
		t.Fatal(err)
	}
	if err := e.runErr(t, Config{Pipelines: []PipelineConfig{other}}); err != nil {
		t.Fatalf("after the layout key was deleted: %v", err)
	}
}
