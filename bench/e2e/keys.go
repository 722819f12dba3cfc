package e2e

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/processor"
)

// keyStats are the processor's keys at the end of a pipeline phase (issue
// 30's cardinality figures): live keys (in memory or in the local tier),
// those on disk and the tier's file size, the memory the live keys take,
// and the rates of evictions and snapshot writes over the measured
// messages (from the start of their publish to the end of the phase).
type keyStats struct {
	live, disk, diskBytes, memory int64
	evictions, kvWrites           float64
	// Where the process's RSS is at the end: anonymous memory (the Go
	// heap — learners, the embedded server's caches, garbage not yet
	// collected — and stacks) and file pages mapped (the binary, and the
	// local tier's bbolt files read through mmap: reclaimable page cache);
	// heap is the Go heap in use of it (runtime.MemStats.HeapInuse).
	anon, file, heap int64
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
			fmt.Fprintf(w, "%-12s %9s %9s %10s %9s %12s %12s %9s %9s %9s\n", "pipeline", "live", "on disk", "disk MiB", "mem MiB", "evictions/s", "KV writes/s",
				"anon MiB", "file MiB", "heap MiB")
		}
		mib := func(n int64) float64 { return float64(n) / (1 << 20) }
		fmt.Fprintf(w, "%-12s %9d %9d %10.1f %9.1f %12.0f %12.1f %9.1f %9.1f %9.1f\n", r.name, k.live, k.disk, mib(k.diskBytes),
			mib(k.memory), k.evictions, k.kvWrites, mib(k.anon), mib(k.file), mib(k.heap))
	}
	if header {
		fmt.Fprintln(w, "live: keys loaded (in memory or in the local tier); on disk: in the local tier; mem: the live keys' memory as the processor counts it (memory_used);",
			"evictions/s (keys unloaded to make room: a snapshot save and a later load each) and KV writes/s (snapshot saves and claims) over the measured messages;",
			"anon, file: the process's RSS at the end, anonymous (Go heap — embedded server included — and stacks) and file pages mapped (the binary, the local tier's bbolt files); heap: the Go heap in use")
	}
}
