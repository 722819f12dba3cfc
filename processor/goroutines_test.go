package processor

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
)

// ourGoroutines returns the stacks of the goroutines running code of this
// package (a frame of it, not only a "created by" line: a goroutine that
// has returned from our code may not have exited yet), other than the
// test's own and the helper that called Run.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		var frames []string
		lines := strings.Split(s, "\n")
		for i := 0; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "created by ") {
				i++ // and its file:line
				continue
			}
			frames = append(frames, lines[i])
		}
		if strings.Contains(strings.Join(frames, "\n"), "kpcastream/kpcastream/processor") && !strings.Contains(s, "testing.tRunner") &&
			!strings.Contains(s, "processor.(*env).startOn") {
			out = append(out, s)
		}
	}
	return out
}

// TestRunOwnsEveryGoroutine runs a JetStream pipeline of two partitions
// (coordinator, heartbeat, watcher, partitions, workers, ackers,
// snapshotters, renewals) and a core NATS one, serves a stats request
// (fan-out to the members) and watches a key (its expiry timer), stops,
// and checks that once Run has returned no goroutine runs code of this
// package.
func TestRunOwnsEveryGoroutine(t *testing.T) {
	e := newEnv(t)
	if g := ourGoroutines(); len(g) != 0 {
		t.Fatalf("%d goroutines of ours before Run:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	js := pipelineConfig("gr")
	js.Partitions = 2
	core := PipelineConfig{Name: "grcore", Input: InputConfig{Subject: "grcore.in"}, Learner: testLearnerConfig(),
		Output: OutputConfig{Subject: "grcore.out.{key}"}}
	r := e.start(t, Config{Pipelines: []PipelineConfig{js, core}})
	for i, x := range vectors(1, 20) {
		e.publish(t, fmt.Sprintf("in.gr.k%d", i%4), encodeObs(t, "json", x, fmt.Sprint(i)), "")
		if err := e.nc.Publish("grcore.in", encodeObs(t, "json", x, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "inputs", func() bool { return r.stats("gr").In == 20 && r.stats("grcore").In == 20 })
	if _, err := e.nc.Request("kpcastream.stats", nil, 5*time.Second); err != nil {
		t.Fatalf("stats request: %v", err)
	}
	srv := httptest.NewServer(r.p.Handler())
	resp, err := http.Get(srv.URL + "/api/v1/series?pipeline=grcore&key=" + SingleKey)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	if resp.StatusCode != http.StatusOK || !r.p.watch.Any() {
		t.Fatalf("series: %d, watched %v", resp.StatusCode, r.p.watch.Any())
	}
	if len(ourGoroutines()) == 0 {
		t.Fatal("no goroutine of ours while running: the check cannot see them")
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if r.p.watch.Any() {
		t.Error("a watch outlives Run")
	}
	if g := ourGoroutines(); len(g) != 0 {
		t.Fatalf("%d goroutines of ours after Run returned:\n%s", len(g), strings.Join(g, "\n\n"))
	}
}

// stuckSaves is a snapshot store whose saves, once stuck is set, hang for
// hold whatever their context says (a store call that ignores it).
type stuckSaves struct {
	keyStore
	hold  time.Duration
	stuck atomic.Bool
}

func (s *stuckSaves) Save(ctx context.Context, key string, snap *codec.Snapshot, rev uint64) (uint64, error) {
	if s.stuck.Load() {
		time.Sleep(s.hold)
	}
	return s.keyStore.Save(ctx, key, snap, rev)
}

// TestStuckWorkersJoined: workers that do not stop within 2·shutdown_timeout
// + snapshot_timeout (a final save hangs) make Run report it, and Run
// still returns only once they have returned — it does not leave them
// running.
func TestStuckWorkersJoined(t *testing.T) {
	e := newEnv(t)
	keys := &stuckSaves{hold: 1500 * time.Millisecond}
	e.wrapKeys = func(k keyStore) keyStore { keys.keyStore = k; return keys }
	pc := PipelineConfig{Name: "stuck", Input: InputConfig{Subject: "stuck.in"}, Learner: testLearnerConfig(),
		Output: OutputConfig{Subject: "stuck.out.{key}"}}
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, ShutdownTimeout: 100 * time.Millisecond, SnapshotTimeout: 200 * time.Millisecond})
	for i, x := range vectors(2, 5) {
		if err := e.nc.Publish("stuck.in", encodeObs(t, "json", x, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "inputs", func() bool { return r.stats("stuck").In == 5 })
	keys.stuck.Store(true)
	start := time.Now()
	err := r.stop()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "workers did not stop in time") {
		t.Errorf("Run returned %v, want the workers reported late", err)
	}
	if took < keys.hold {
		t.Errorf("Run returned after %v, before the stuck save (%v) returned", took, keys.hold)
	}
	if g := ourGoroutines(); len(g) != 0 {
		t.Fatalf("%d goroutines of ours after Run returned:\n%s", len(g), strings.Join(g, "\n\n"))
	}
}
