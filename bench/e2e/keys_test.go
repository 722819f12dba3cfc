package e2e

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor"
)

// TestScheduleBound: the KV writes the snapshot schedule allows, by time
// (each key once per every, no more than the messages) and by count.
func TestScheduleBound(t *testing.T) {
	for _, c := range []struct {
		name       string
		every      time.Duration
		everyMsgs  int
		keys       int64
		rate, want float64
	}{
		{"defaults, keys bound", 0, 0, 20000, 5000, 20000.0/30 + 5},
		{"defaults, messages bound", 0, 0, 1000000, 3000, 3000 + 3},
		{"count only", -1, 100, 64, 10000, 100},
		{"neither", -1, -1, 64, 10000, 0},
	} {
		pc := processor.PipelineConfig{Name: "b", Snapshot: processor.SnapshotPolicy{Every: c.every, EveryMessages: c.everyMsgs}}
		if got := scheduleBound(pc, c.keys, c.rate); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v writes/s, want %v", c.name, got, c.want)
		}
	}
}

// TestBenchKeysTable runs a pipeline phase over more keys than its
// memory_budget holds in memory, with a window profile: the profile file
// of the phase is written, and the keys table reports keys on disk, local
// reads and the live heap.
func TestBenchKeysTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Room for about 20 of the 200 keys in memory (a key of this learner
	// takes about 9 KB), the rest in the local tier.
	args := []string{"--mode", "pipeline", "--rtt", "0", "--keys", "200", "--warmup", "3", "--count", "2000", "--budget", "4",
		"--dim", "2", "--components", "1", "--memory", "400KiB", "--progress", "0", "--duration", "0", "--idle-timeout", "30s",
		"--cpuprofile", prof, "--profile-window", "--memory-limit", "auto"}
	limit := debug.SetMemoryLimit(-1)
	if err := Run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if now := debug.SetMemoryLimit(-1); now != limit {
		debug.SetMemoryLimit(limit)
		t.Errorf("the soft memory limit is %d B after the bench, want it restored to %d B", now, limit)
	}
	out := stdout.String()
	if fi, err := os.Stat(prof + ".ikpca"); err != nil || fi.Size() == 0 {
		t.Errorf("window profile %s.ikpca: %v (size %v)", prof, err, fi)
	}
	if _, err := os.Stat(prof); err == nil {
		t.Errorf("with --profile-window the whole-run profile %s was written too", prof)
	}
	var row []string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pipeline ") && strings.Contains(l, "local reads/s") && i+1 < len(lines) {
			row = strings.Fields(lines[i+1])
		}
	}
	// pipeline live on-disk disk-MiB mem-MiB evictions/s KV-writes/s sched local-reads/s local-wr/s anon file heap live
	if len(row) != 14 || row[0] != "ikpca" {
		t.Fatalf("keys table row %q, want 14 fields for ikpca in\n%s", row, out)
	}
	num := func(i int) float64 {
		v, err := strconv.ParseFloat(row[i], 64)
		if err != nil {
			t.Fatalf("keys table field %d %q: %v", i, row[i], err)
		}
		return v
	}
	if num(1) != 200 || num(2) < 100 || num(8) <= 0 || num(13) <= 0 {
		t.Errorf("keys table: %v live, %v on disk, %v local reads/s, %v MiB live heap; want 200, ≥ 100, > 0, > 0\n%s",
			row[1], row[2], row[8], row[13], out)
	}
}

// TestGovernProcessMemory: --process-memory refuses a memory_budget that
// does not fit under the target, as lint does, and otherwise keeps Go's
// soft limit at the target less the file pages until the phase's
// cleanup restores the limit before it.
func TestGovernProcessMemory(t *testing.T) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Cleanup(func() { os.Setenv("GOMEMLIMIT", v) })
		if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := processor.Config{Workers: 2, Pipelines: []processor.PipelineConfig{{Name: "bench", MemoryBudget: 1280 << 20,
		Learner: learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 2, Budget: 16, Kernel: learners.Kernel{Name: learners.KernelRBF}}}}}
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prevLimit) })
	cleaned := false
	cleanup := func() { cleaned = true }
	err := governProcessMemory(context.Background(), 2<<30, cfg, nil, &cleanup, prevLimit)
	if err == nil || !strings.Contains(err.Error(), "--process-memory: 2.0 GiB") || !strings.Contains(err.Error(), "at least 2.6 GiB (2785017856 B)") {
		t.Fatalf("2 GiB for a 1280 MiB budget: %v, want the refusal with the least that fits", err)
	}
	if debug.SetMemoryLimit(-1) != prevLimit {
		t.Errorf("a refusal changed the soft limit")
	}
	if err := governProcessMemory(context.Background(), 2785017856, cfg, nil, &cleanup, prevLimit); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got >= 2785017856 || got < (1280*3/2+64)<<20 {
		t.Errorf("soft limit %d: want under the 2656 MiB target by the file pages, at least the 1984 MiB floor", got)
	}
	cleanup()
	if !cleaned || debug.SetMemoryLimit(-1) != prevLimit {
		t.Errorf("after the cleanup: phase cleanup ran %v, limit %d, want %d", cleaned, debug.SetMemoryLimit(-1), prevLimit)
	}
}
