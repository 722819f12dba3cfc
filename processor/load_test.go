package processor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/snapshot"
)

// slowLoads is a snapshot store whose loads of one key wait until gate
// is closed (or their context ends): a KV round trip that takes long.
type slowLoads struct {
	keyStore
	slow    string // the store key (snapshot.JoinKey) whose loads wait
	gate    chan struct{}
	started chan struct{} // closed when the first slow load starts
	once    sync.Once
}

func (s *slowLoads) Load(ctx context.Context, key string) (*codec.Snapshot, uint64, error) {
	if key == s.slow {
		s.once.Do(func() { close(s.started) })
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return s.keyStore.Load(ctx, key)
}

// TestSlowLoadDoesNotStall: one worker, a key whose snapshot load hangs
// (a slow store): the worker's other keys go on being applied and their
// outputs published meanwhile; the slow key's messages, which waited
// behind its load, are applied once it ends, in order, once each.
func TestSlowLoadDoesNotStall(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("slowload")
	pc.Snapshot = SnapshotPolicy{EveryMessages: -1, Every: -1}
	keys := &slowLoads{slow: snapshot.JoinKey(pc.Name, "slow"), gate: make(chan struct{}), started: make(chan struct{})}
	e.wrapKeys = func(k keyStore) keyStore { keys.keyStore = k; return keys }
	var mu sync.Mutex
	applied := map[string][]uint64{}
	onApply := func(_ string, _ int, _ uint64, key string, seq uint64) {
		mu.Lock()
		applied[key] = append(applied[key], seq)
		mu.Unlock()
	}
	appliedOf := func(key string) []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(applied[key])
	}
	// Long enough for the slow load (SnapshotTimeout bounds it).
	r := e.startOn(t, Config{Workers: 1, Pipelines: []PipelineConfig{pc}, SnapshotTimeout: time.Minute}, newPCA, e.nc, e.js, onApply)
	defer func() {
		select {
		case <-keys.gate:
		default:
			close(keys.gate)
		}
		_ = r.stop()
	}()
	const others, warm, more = 4, 12, 6
	xs := vectors(7, warm+more)
	for i := range warm {
		for k := range others {
			e.publish(t, fmt.Sprintf("in.%s.k%d", pc.Name, k), encodeObs(t, "msgpack", xs[i], ""), "")
		}
	}
	waitFor(t, 20*time.Second, "warm-up drained", func() bool { return e.drained(t, pc) })
	outWarm := e.streamMsgs(t, pc.Name+"_OUT")
	if outWarm == 0 {
		t.Fatal("no outputs after the warm-up")
	}

	// The slow key first: its load hangs; its later messages wait behind it.
	for i := range 3 {
		e.publish(t, fmt.Sprintf("in.%s.slow", pc.Name), encodeObs(t, "msgpack", xs[i], ""), "")
	}
	select {
	case <-keys.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow key's load did not start")
	}
	for i := range more {
		for k := range others {
			e.publish(t, fmt.Sprintf("in.%s.k%d", pc.Name, k), encodeObs(t, "msgpack", xs[warm+i], ""), "")
		}
	}
	// Every other key's messages are applied and published while the slow
	// key's load is outstanding (one output each: the keys are warm).
	waitFor(t, 20*time.Second, "the other keys' outputs while a load hangs", func() bool {
		return e.streamMsgs(t, pc.Name+"_OUT") == outWarm+others*more
	})
	if got := appliedOf("slow"); len(got) != 0 {
		t.Fatalf("slow key applied %v before its load ended", got)
	}
	for k := range others {
		if got := appliedOf(fmt.Sprintf("k%d", k)); len(got) != warm+more {
			t.Errorf("k%d: %d messages applied, want %d", k, len(got), warm+more)
		}
	}
	close(keys.gate)
	waitFor(t, 20*time.Second, "drained", func() bool { return e.drained(t, pc) })
	got := appliedOf("slow")
	if len(got) != 3 || !slices.IsSorted(got) || got[0] == got[1] || got[1] == got[2] {
		t.Errorf("slow key applied %v, want its 3 messages once each, in order", got)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.loadState(t, pc.Name, "slow"); st.Seen != 3 {
		t.Errorf("slow key's snapshot has seen %d, want 3", st.Seen)
	}
}
