package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/processor"
)

// keyStats are the processor's keys at the end of a pipeline phase (issue
// 30's cardinality figures): live keys (in memory or in the local tier),
// those on disk and the tier's file size, the memory the live keys take,
// and the rates of evictions and snapshot writes over the measured
// messages (from the start of their publish to the end of the phase).
type keyStats struct {
	keys, disk, diskBytes, memory int64
	evictions, kvWrites           float64
	// localReads and localWrites are keys read back from the local tier
	// and moved to it, per second of the measured messages.
	localReads, localWrites float64
	// schedBound is the most KV writes per second the snapshot schedule
	// allows at the measured rate (scheduleBound).
	schedBound float64
	// Where the process's RSS is at the end: anonymous memory (the Go
	// heap — learners, the embedded server's caches, garbage not yet
	// collected — and stacks) and file pages mapped (the binary, and the
	// local tier's bbolt files read through mmap: reclaimable page cache);
	// heap is the Go heap in use of it (runtime.MemStats.HeapInuse).
	anon, file, heap int64
	// live is the Go heap still reachable after a collection at the end
	// (runtime.MemStats.HeapAlloc after runtime.GC): what the process
	// holds, without the garbage GOGC lets accumulate.
	live int64
}

// liveHeap collects the garbage and reads the heap that remains.
func (k *keyStats) liveHeap() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	k.live = int64(ms.HeapAlloc)
}

// scheduleBound is the most snapshot saves per second that pc's snapshot
// policy allows with keys live keys taking rate messages a second: each
// key at most once per snapshot.every while it has new messages (and no
// more saves than messages), plus one per every_messages messages of a
// key. The evictions do not enter it: with the local tier a key moved to
// disk costs no save (issue 30).
func scheduleBound(pc processor.PipelineConfig, keys int64, rate float64) float64 {
	sp := pc.WithDefaults().Snapshot
	var b float64
	if sp.Every > 0 {
		b = min(rate, float64(keys)/sp.Every.Seconds())
	}
	if sp.EveryMessages > 0 {
		b += rate / float64(sp.EveryMessages)
	}
	return b
}

// localCounts reads the local tier's reads and writes (keys) so far from
// the processor's metrics (kpcastream_local_loads_total and
// kpcastream_local_spills_total); zeros without them.
func localCounts(g prometheus.Gatherer) (n [2]float64) {
	if g == nil {
		return n
	}
	mfs, err := g.Gather()
	if err != nil {
		return n
	}
	for _, mf := range mfs {
		i := -1
		switch mf.GetName() {
		case "kpcastream_local_loads_total":
			i = 0
		case "kpcastream_local_spills_total":
			i = 1
		}
		if i < 0 {
			continue
		}
		for _, m := range mf.GetMetric() {
			n[i] += m.GetCounter().GetValue()
		}
	}
	return n
}

// rssSplit reads the RSS's parts (/proc/self/status RssAnon, RssFile) and
// the Go heap in use; zeros where /proc has none.
func (k *keyStats) rssSplit() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	k.heap = int64(ms.HeapInuse)
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "RssAnon:":
			k.anon = n << 10
		case "RssFile:":
			k.file = n << 10
		}
	}
}

// benchStats is the bench pipeline's stats.
func benchStats(p *processor.Processor) processor.PipelineStats {
	for _, s := range p.Stats() {
		if s.Pipeline == "bench" {
			return s
		}
	}
	return processor.PipelineStats{}
}

// setMemoryLimit applies --memory-limit for a processor of cfg (the
// phase's cleanup restores the limit before it).
func setMemoryLimit(flag string, cfg processor.Config) error {
	switch flag {
	case "":
		return nil
	case "auto":
		debug.SetMemoryLimit(cfg.MemoryLimit())
		return nil
	}
	n, err := parseSize(flag)
	if err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	debug.SetMemoryLimit(n)
	return nil
}

// governProcessMemory applies --process-memory for a processor of cfg as
// kpcastream run applies process_memory: it refuses a memory_budget that
// does not fit under the target (lint's rule) and keeps Go's soft limit at
// the target less the file pages resident until the phase's cleanup,
// which then restores prevLimit. The governor's gauges go on reg.
func governProcessMemory(ctx context.Context, target int64, cfg processor.Config, reg prometheus.Registerer, cleanup *func(), prevLimit int64) error {
	m := cfg.ProcessMemory(target)
	if err := m.Err(); err != nil {
		return fmt.Errorf("--process-memory: %w", err)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return fmt.Errorf("--process-memory: GOMEMLIMIT is set, and it would be Go's soft limit instead of the target's: unset it")
	}
	_, stop, err := processor.GovernProcessMemory(ctx, m, reg)
	if err != nil {
		stop()
		debug.SetMemoryLimit(prevLimit)
		return fmt.Errorf("--process-memory: %w", err)
	}
	prev := *cleanup
	*cleanup = func() { stop(); prev(); debug.SetMemoryLimit(prevLimit) }
	return nil
}

// parseSize reads a byte size: a number of bytes, or one with KiB, MiB or
// GiB.
func parseSize(s string) (int64, error) {
	mul := int64(1)
	for _, u := range []struct {
		suf string
		n   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if v, ok := strings.CutSuffix(s, u.suf); ok {
			s, mul = v, u.n
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive number of bytes, KiB, MiB or GiB, got %q", s)
	}
	return n * mul, nil
}

// printKeys prints the keys table of the pipeline phases.
func printKeys(w io.Writer, o benchOptions, rs []*phaseResult) {
	header := false
	for _, r := range rs {
		k := r.keys
		if k == nil {
			continue
		}
		if !header {
			header = true
			budget := "256MiB (default)"
			if o.memory != "" {
				budget = o.memory
			}
			local := "none"
			if o.local {
				local = "on"
			}
			fmt.Fprintf(w, "keys: %d interleaved; memory_budget %s; local tier %s\n", o.keys, budget, local)
			fmt.Fprintf(w, "%-12s %9s %9s %10s %9s %12s %12s %10s %13s %13s %9s %9s %9s %9s\n", "pipeline", "live", "on disk", "disk MiB", "mem MiB", "evictions/s", "KV writes/s",
				"sched ≤/s", "local reads/s", "local wr/s", "anon MiB", "file MiB", "heap MiB", "live MiB")
		}
		mib := func(n int64) float64 { return float64(n) / (1 << 20) }
		fmt.Fprintf(w, "%-12s %9d %9d %10.1f %9.1f %12.0f %12.1f %10.0f %13.0f %13.0f %9.1f %9.1f %9.1f %9.1f\n", r.name, k.keys, k.disk, mib(k.diskBytes),
			mib(k.memory), k.evictions, k.kvWrites, k.schedBound, k.localReads, k.localWrites, mib(k.anon), mib(k.file), mib(k.heap), mib(k.live))
	}
	if header {
		fmt.Fprintln(w, "live: keys loaded (in memory or in the local tier); on disk: in the local tier; mem: the live keys' memory as the processor counts it (memory_used);",
			"evictions/s (keys unloaded to make room: a snapshot save and a later load each), KV writes/s (snapshot saves and claims; sched ≤/s: the most the snapshot schedule allows at the measured rate, each live key once per snapshot.every plus one per every_messages messages, whatever the evictions), local reads/s and local wr/s (keys read back from the local tier and moved to it) over the measured messages;",
			"anon, file: the process's RSS at the end, anonymous (Go heap — embedded server included — and stacks) and file pages mapped (the binary, the local tier's bbolt files); heap: the Go heap in use; live MiB: the Go heap still reachable after a collection at the end (the processor, the bench's generator and receiver, and the embedded server when there is one)")
	}
}
