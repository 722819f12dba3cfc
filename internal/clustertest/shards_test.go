package clustertest_test

import (
	"context"
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

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

// shardsConfig is the worker config of the sharded test, relative to
// deploy/compose (startWorker's directory).
const shardsConfig = "../../internal/clustertest/testdata/kpcastream-shards.yaml"

// shardMapping is the servers' partitioning of the sharded input: the
// transform of deploy/streams/SENSORS.json as an account mapping.
const shardSrc, shardDst = "sensors.*.features", "sensors.{{wildcard(1)}}.features.{{partition(8,1)}}"

// mapShards gives node i's account the mapping (a node restarted by
// c.start comes back without it).
func mapShards(t *testing.T, s *server.Server) {
	t.Helper()
	if err := s.GlobalAccount().AddMapping(shardSrc, shardDst); err != nil {
		t.Fatalf("mapping on %s: %v", s.Name(), err)
	}
}

// shardOutage is outage for the sharded test: node i comes back with the
// mapping.
func shardOutage(t *testing.T, c *cluster, i int, pb *shardPublisher, keys []string, n int) {
	c.stop(i)
	down := time.Now()
	pb.publish(t, keys, n)
	time.Sleep(1500 * time.Millisecond)
	c.start(i)
	mapShards(t, c.nodes[i].s)
	t.Logf("%s down for %v", c.nodes[i].name, time.Since(down).Round(time.Millisecond))
}

// shardMsg is one published observation: its key, vector, and where the
// cluster stored it.
type shardMsg struct {
	key    string
	x      []float64
	stream string
	seq    uint64
}

// shardPublisher publishes observations with deterministic message ids,
// retrying until the cluster takes them, and records each one's stream and
// sequence (per shard stream: the shards' sequences overlap).
type shardPublisher struct {
	js   jetstream.JetStream
	rng  *rand.Rand
	n    int
	at   map[string]bool       // "<stream>/<seq>" taken
	per  map[string][]shardMsg // key → its messages in publish order
	msgs int
}

func (pb *shardPublisher) publish(t *testing.T, keys []string, count int) {
	t.Helper()
	for range count {
		key := keys[pb.n%len(keys)]
		x, ack := publishObservation(t, pb.js, pb.rng, key, pb.n)
		where := ack.Stream + "/" + strconv.FormatUint(ack.Sequence, 10)
		if !pb.at[where] {
			pb.at[where] = true
			pb.per[key] = append(pb.per[key], shardMsg{key: key, x: x, stream: ack.Stream, seq: ack.Sequence})
			pb.msgs++
		}
		pb.n++
	}
}

// TestClusterShards is TestClusterElastic's schedule with the 8
// partitions spread over three R3 shard streams SENSORS-0..2 (the servers'
// subject mapping partitioning the input), outputs per shard in
// KPCA_OUT-0..2 and ordered lanes (output.key_in_flight 16): two workers,
// a third joins, a shard's input stream leader and another shard's output
// stream leader are stopped mid-stream, one worker leaves gracefully while
// the coordination bucket's leader is down, one crashes while a third
// shard's leader is down, and the survivor takes everything over. Checks:
// each key's messages are all in its shard's stream; every input is
// applied once per key and in order (the learner's Seen and last
// sequence); outputs are in the key's shard's output stream, once each and
// in the key's order; every output's projection and each key's final
// state equal an undisturbed run's (the same learner fed the key's
// observations in order, in this process).
func TestClusterShards(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node cluster test (skipped under -short)")
	}
	start := time.Now()
	c := newCluster(t)
	for _, n := range c.nodes {
		mapShards(t, n.s)
	}
	_, adminJS := connect(t, c.urls(0), "admin", 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitFor(t, 15*time.Second, "JetStream account info", func() bool {
		_, err := adminJS.AccountInfo(ctx)
		return err == nil
	})
	const shards, parts = 3, 8
	ins := make([]jetstream.Stream, shards)
	for s := range shards {
		var subjects []string
		for p := s; p < parts; p += shards {
			subjects = append(subjects, "sensors.*.features."+strconv.Itoa(p))
		}
		ins[s] = createStream(ctx, t, adminJS, "SENSORS", func(sc *jetstream.StreamConfig) {
			sc.Name, sc.Subjects, sc.SubjectTransform = fmt.Sprintf("SENSORS-%d", s), subjects, nil
		})
		createStream(ctx, t, adminJS, "KPCA_OUT", func(sc *jetstream.StreamConfig) {
			sc.Name, sc.Subjects, sc.AllowBatchPublish = fmt.Sprintf("KPCA_OUT-%d", s), []string{fmt.Sprintf("kpca.out.sensors.%d.*", s)}, true
		})
	}
	createStream(ctx, t, adminJS, "KPCA_DLQ")
	first := streamLeader(ctx, t, c, adminJS, "SENSORS-0")

	w1 := startWorker(t, shardsConfig, c.urls(first), 16)
	w2 := startWorker(t, shardsConfig, c.urls(first+1), 16)
	pc := w1.cfg.ProcessorConfig().WithDefaults().Pipelines[0]
	if pc.Partitions != parts || pc.Input.Shards != shards {
		t.Fatalf("%s: %d partitions over %d shards, want %d over %d", shardsConfig, pc.Partitions, pc.Input.Shards, parts, shards)
	}
	if streams := pc.InputStreams(); !slices.Equal(streams, []string{"SENSORS-0", "SENSORS-1", "SENSORS-2"}) {
		t.Fatalf("input streams %v", streams)
	}
	waitFor(t, 20*time.Second, "w1 and w2 share the partitions", func() bool {
		o := owned(w1, w2)
		return sum(o) == parts && o[0] > 0 && o[1] > 0
	})

	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}
	_, prodJS := connect(t, c.urls(first+2), "producer", 100*time.Millisecond)
	pb := &shardPublisher{js: prodJS, rng: rand.New(rand.NewPCG(4, 3)), at: map[string]bool{}, per: map[string][]shardMsg{}}
	pb.publish(t, keys, 200)

	w3 := startWorker(t, shardsConfig, c.urls(first+2), 16)
	pb.publish(t, keys, 100)
	waitFor(t, 20*time.Second, "w3 took its share", func() bool {
		o := owned(w1, w2, w3)
		return sum(o) == parts && o[2] >= parts/3
	})
	t.Logf("after the join: partitions per worker %v", owned(w1, w2, w3))
	for i, w := range []*worker{w1, w2, w3} {
		if !w.lane() {
			t.Fatalf("worker %d: outputs not through a lane", i+1)
		}
	}
	// A shard's input leader, then another shard's output leader, go down.
	shardOutage(t, c, streamLeader(ctx, t, c, adminJS, "SENSORS-1"), pb, keys, 120)
	shardOutage(t, c, streamLeader(ctx, t, c, adminJS, "KPCA_OUT-0"), pb, keys, 120)

	// w2 leaves gracefully while the coordination bucket's leader is down.
	bucketLeader := streamLeader(ctx, t, c, adminJS, "KV_"+processor.DefaultCheckpointBucket)
	left := make(chan error, 1)
	go func() { left <- w2.stop() }()
	shardOutage(t, c, bucketLeader, pb, keys, 120)
	if err := <-left; err != nil {
		t.Fatalf("graceful stop of w2: %v", err)
	}
	waitFor(t, 30*time.Second, "w1 and w3 share the partitions", func() bool {
		o := owned(w1, w3)
		return sum(o) == parts && o[0] > 0 && o[1] > 0
	})
	pb.publish(t, keys, 100)

	// w1 crashes while shard 2's input leader is down.
	w1.nc.Close()
	crashed := time.Now()
	shardOutage(t, c, streamLeader(ctx, t, c, adminJS, "SENSORS-2"), pb, keys, 120)
	waitFor(t, 40*time.Second, "w3 took every partition over", func() bool { return owned(w3)[0] == parts })
	t.Logf("takeover after the crash: %v (lease_ttl %v)", time.Since(crashed).Round(time.Millisecond), w1.cfg.Processor.LeaseTTL)
	_ = w1.stop()
	pb.publish(t, keys, 160)

	ckpt, err := adminJS.KeyValue(ctx, processor.DefaultCheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	var why []string
	t.Cleanup(func() {
		if t.Failed() && len(why) > 0 {
			t.Logf("partitions not drained at the last check:\n%s", strings.Join(why, "\n"))
		}
	})
	waitFor(t, 60*time.Second, "every partition drained", func() bool {
		why = why[:0]
		ok := true
		for n := range parts {
			if r := partitionDrained(ctx, ckpt, ins[n%shards], pc.Name, pc.Input.Durable, n); r != "" {
				why = append(why, fmt.Sprintf("partition %d (shard %d): %s", n, n%shards, r))
				ok = false
			}
		}
		return ok
	})
	if err := w3.stop(); err != nil {
		t.Fatalf("w3: Run: %v", err)
	}

	// Inputs: each shard holds exactly the messages acknowledged into it,
	// each key in one shard only.
	stored := 0
	for s, in := range ins {
		info, err := in.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stored += int(info.State.Msgs)
		if info.State.Msgs != info.State.LastSeq {
			t.Errorf("SENSORS-%d holds %d messages, last sequence %d", s, info.State.Msgs, info.State.LastSeq)
		}
	}
	if stored != pb.msgs || pb.msgs != pb.n {
		t.Fatalf("the shards hold %d messages, %d distinct acks, %d published", stored, pb.msgs, pb.n)
	}
	for _, key := range keys {
		for _, m := range pb.per[key] {
			if m.stream != pb.per[key][0].stream {
				t.Fatalf("key %s stored in %s and %s", key, pb.per[key][0].stream, m.stream)
			}
		}
	}

	store, err := snapshot.Open(ctx, adminJS, w1.cfg.Snapshots)
	if err != nil {
		t.Fatal(err)
	}
	outs := readShardOutputs(ctx, t, adminJS, shards)
	for _, key := range keys {
		msgs := pb.per[key]
		shard := pb.per[key][0].stream[len("SENSORS-"):]
		// The undisturbed run: the key's observations, in order, through
		// the same learner.
		ref, err := learners.New(pc.Learner)
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64][]float64{} // sequence → projection
		var order []uint64
		for _, m := range msgs {
			if err := ref.Learn(m.x); err != nil {
				t.Fatal(err)
			}
			z, _, err := ref.Score(nil, m.x)
			if err == nil {
				want[m.seq] = z
				order = append(order, m.seq)
			}
		}
		snap, _, err := store.Load(ctx, snapshot.JoinKey(pc.Name, key))
		if err != nil {
			t.Errorf("load snapshot %s/%s: %v", pc.Name, key, err)
			continue
		}
		if snap.State.Seen != int64(len(msgs)) || snap.LastSeq != msgs[len(msgs)-1].seq {
			t.Errorf("key %s: Seen %d, LastSeq %d; want %d and %d", key, snap.State.Seen, snap.LastSeq, len(msgs), msgs[len(msgs)-1].seq)
		}
		if !reflect.DeepEqual(snap.State, roundTrip(t, ref.State())) {
			t.Errorf("key %s: final state differs from the undisturbed run's", key)
		}
		got := outs[key]
		var seqs []uint64
		for _, o := range got {
			seqs = append(seqs, o.out.Seq)
			if o.subject != "kpca.out.sensors."+shard+"."+key || o.stream != "KPCA_OUT-"+shard {
				t.Errorf("key %s (shard %s): output on %s in %s", key, shard, o.subject, o.stream)
			}
			if w, ok := want[o.out.Seq]; ok && !slices.Equal(o.out.Z, w) {
				t.Errorf("key %s seq %d: projection %v, the undisturbed run's %v", key, o.out.Seq, o.out.Z, w)
			}
		}
		if !slices.Equal(seqs, order) {
			t.Errorf("key %s: projected sequences\n got %v\nwant %v (every scored observation once, in order)", key, seqs, order)
		}
	}
	for key := range outs {
		if !slices.Contains(keys, key) {
			t.Errorf("projection for unknown key %q", key)
		}
	}
	t.Logf("%d messages over 3 shards, %d keys, workers joining, leaving and crashing while shard, output and bucket leaders were down: all applied once; %v",
		pb.n, len(keys), time.Since(start).Round(time.Millisecond))
}

// roundTrip returns st as a snapshot stores it (encoded and decoded), to
// compare with a loaded one.
func roundTrip(t *testing.T, st *learners.State) *learners.State {
	t.Helper()
	b, err := codec.EncodeSnapshot(&codec.Snapshot{Key: "k", Pipeline: "p", State: st})
	if err != nil {
		t.Fatal(err)
	}
	s, err := codec.DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	return s.State
}

// shardOutput is one output as read back: its stream, subject and body.
type shardOutput struct {
	stream, subject string
	out             *codec.Output
}

// readShardOutputs reads KPCA_OUT-0..shards-1 and returns, per key, its
// outputs in stream order.
func readShardOutputs(ctx context.Context, t *testing.T, js jetstream.JetStream, shards int) map[string][]shardOutput {
	t.Helper()
	outs := map[string][]shardOutput{}
	for s := range shards {
		name := fmt.Sprintf("KPCA_OUT-%d", s)
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != info.State.LastSeq-info.State.FirstSeq+1 && info.State.Msgs > 0 {
			t.Fatalf("%s has %d messages in sequences %d..%d", name, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			var m *jetstream.RawStreamMsg
			waitFor(t, 10*time.Second, fmt.Sprint(name, " output ", seq), func() bool {
				m, err = st.GetMsg(ctx, seq)
				return err == nil
			})
			o, err := codec.DecodeOutput(m.Data, codec.JSON)
			if err != nil {
				t.Fatalf("decode output %q: %v", m.Data, err)
			}
			outs[o.Key] = append(outs[o.Key], shardOutput{stream: name, subject: m.Subject, out: o})
		}
	}
	return outs
}
