package processor

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
)

// MemoryPlan is how a pipeline's memory_budget becomes live keys (issue
// 30): a key's size is fixed by its configuration (keymodel.Model.Bytes:
// the learner's arrays, the classifier stage's, the monitor's, and a
// per-key overhead; the learner's working memory is shared by the keys of
// a worker and charged once per worker), so the budget divided by it is
// the number of keys that stay loaded; the least recently used one beyond
// is snapshotted and unloaded.
type MemoryPlan struct {
	// Budget is memory_budget in bytes (defaults applied).
	Budget int64
	// KeyBytes is the memory of one live key.
	KeyBytes int
	// PerWorker is the live keys of one worker: ⌊(Budget/partitions/
	// workers-per-partition − Scratch)/KeyBytes⌋, at most its share of
	// max_keys, at least 1.
	PerWorker int
	// Scratch is the working memory the learners of one worker share
	// (learners.ScratchBytes), charged once per worker: a key's learner
	// keeps its state alone (KeyBytes).
	Scratch int
	// Keys is the live keys of the pipeline on an instance that runs all
	// its partitions: PerWorker × workers-per-partition × partitions.
	Keys int
	// Cap is max_keys (0: no cap beyond Budget).
	Cap int
	// Local is the live keys with the local tier (in memory or on disk;
	// each costs 1 KiB of the budget, worker_local.go: 622 B measured by
	// TestLocalKeyBytesCovers), 0 without one (no local_dir, or a core
	// NATS input).
	Local int
	// LocalDisk bounds the local tier's files: Local × KeyBytes. A key on
	// disk takes its learner's arrays as raw float64s (local_format.go)
	// in 4 KiB bbolt pages, measured at 0.58–0.91 of the key's memory
	// size, rewrites included (BenchmarkLocalDisk).
	LocalDisk int64
}

// Bytes is the memory the plan's live keys may take: Keys × KeyBytes
// (at most Budget, unless one key per worker exceeds it).
func (m MemoryPlan) Bytes() int64 { return int64(m.Keys) * int64(m.KeyBytes) }

// String describes the plan in one line ("256 MiB: 10,725 live keys of
// 24.4 KiB").
func (m MemoryPlan) String() string {
	s := fmt.Sprintf("memory_budget %s: %s live keys of %s", sizeText(m.Budget), groupDigits(m.Keys), sizeText(int64(m.KeyBytes)))
	if m.Cap > 0 {
		s += fmt.Sprintf(" (max_keys %d)", m.Cap)
	}
	if m.Local > 0 {
		s += fmt.Sprintf(", up to %s with the local tier (disk at most %s)", groupDigits(m.Local), sizeText(m.LocalDisk))
	}
	return s
}

// MemoryPlan returns pc's memory plan under c (defaults applied to both).
// It fails when pc's learner cannot be built.
func (c Config) MemoryPlan(pc PipelineConfig) (MemoryPlan, error) {
	c = c.WithDefaults()
	pc = pc.WithDefaults()
	s := &keymodel.Spec{Learner: pc.Learner, Scratch: learners.NewScratch()}
	if cc := pc.Classifier; cc != nil {
		cc := cc.withDefaults()
		s.Classes, s.Classifier, s.Window = keymodel.NewClasses(cc.Classes), cc.model(0), cc.Window
	}
	if mc, ok := pc.monitorConfig(); ok {
		s.Monitor = &mc
	}
	kb, err := s.Bytes()
	if err != nil {
		return MemoryPlan{}, fmt.Errorf("processor: pipeline %s: size of a key: %w", pc.Name, err)
	}
	n := workersPer(c, pc)
	wm := memoryOf(pc, n, kb)
	plan := MemoryPlan{Budget: pc.MemoryBudget, KeyBytes: kb, PerWorker: wm.resident, Scratch: scratchBytes(pc),
		Keys: wm.resident * n * pc.Partitions, Cap: pc.MaxKeys}
	if c.LocalDir != "" && c.LocalDir != LocalNone && pc.Input.Stream != "" {
		plan.Local = wm.known * n * pc.Partitions
		plan.LocalDisk = int64(plan.Local) * int64(kb)
	}
	return plan, nil
}

// workersPer is the number of worker goroutines of each partition of pc.
func workersPer(c Config, pc PipelineConfig) int {
	return max(1, (c.Workers+pc.Partitions-1)/pc.Partitions)
}

// workerMemory is how one worker of a partition spends its share of
// memory_budget.
type workerMemory struct {
	share    int64 // bytes: memory_budget/partitions/workers
	capped   int   // the worker's share of max_keys (0: no cap)
	resident int   // keys in memory without a local tier: share/size, at most capped, at least 1
	// known is the keys the worker may hold with a local tier (in memory
	// or on disk): each costs localKeyBytes in memory, and one in memory
	// its full size (worker_local.go).
	known int
}

// memoryOf is the memory of one of n workers of a partition of pc whose
// keys take keyBytes each. The working memory its keys' learners share
// (learners.ScratchBytes: ikpca's kernel rows, blocks and eigensolver
// workspace) comes off the worker's share first, once.
func memoryOf(pc PipelineConfig, n, keyBytes int) workerMemory {
	wm := workerMemory{share: pc.MemoryBudget/int64(pc.Partitions)/int64(n) - int64(scratchBytes(pc))}
	q := int(wm.share / int64(max(keyBytes, 1)))
	if pc.MaxKeys > 0 {
		perPart := (pc.MaxKeys + pc.Partitions - 1) / pc.Partitions
		wm.capped = max(1, perPart/n)
		q = min(q, wm.capped)
	}
	wm.resident = max(1, q)
	wm.known = max(wm.resident, int((wm.share-int64(keyBytes))/localKeyBytes))
	return wm
}

// memoryQuota is the number of live keys of one of n workers of a
// partition of pc whose keys take keyBytes each, without a local tier:
// its share of memory_budget, at most its share of max_keys, at least one.
func memoryQuota(pc PipelineConfig, n, keyBytes int) int {
	return memoryOf(pc, n, keyBytes).resident
}

// scratchBytes is the working memory one worker's learners of pc share
// (0 when its learner cannot be built).
func scratchBytes(pc PipelineConfig) int {
	n, _ := learners.ScratchBytes(pc.Learner)
	return n
}

// keyBytes is the memory of one live key of pl (keymodel.Spec.Bytes, its
// learner sharing its worker's working memory); when its learner cannot
// be built (Run then stops on the first key), a plain estimate of the
// learner alone.
func (pl *pipeline) keyBytes() int {
	if n, err := pl.spec.WithScratch().Bytes(); err == nil {
		return n
	}
	lc := pl.cfg.Learner.WithDefaults()
	return keymodel.KeyOverhead + 3*8*lc.Budget*(lc.Budget+lc.Dim)
}

// sizeText writes n bytes with a binary unit (B, KiB, MiB, GiB).
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// groupDigits writes n with a comma every three digits.
func groupDigits(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// liveMax is the live keys of pl that fit on an instance running all its
// partitions: in memory, or in memory and the local tier when pl's
// workers have one.
func (p *Processor) liveMax(pl *pipeline) int {
	n := p.workersPerPartition(pl.cfg)
	wm := memoryOf(pl.cfg, n, pl.kb)
	per := wm.resident
	if p.cfg.LocalDir != "" && p.cfg.LocalDir != LocalNone && pl.cfg.Input.Stream != "" {
		per = wm.known
	}
	return per * n * pl.cfg.Partitions
}

// memoryLimitBase is what a process needs beyond its learners: the NATS
// client's buffers, the output window, the runtime's own structures.
const memoryLimitBase = 64 << 20

// MemoryLimit is the Go soft memory limit (runtime/debug.SetMemoryLimit)
// for a process running c: 1.5 × the memory_budget of its pipelines
// (defaults applied) + 64 MiB. The budget bounds the live learners and,
// with the local tier, the keys on disk (their bookkeeping is charged to
// it); without a limit the garbage collector lets the heap grow to twice
// what is live (GOGC 100), so a process at its budget reached about twice
// its budget in RSS (bench/RESULTS.md §18). Under this limit the collector
// runs earlier instead, keeping the heap near 1.5 × budget. It does not
// cover file pages mapped by the local tier (bbolt reads through mmap:
// page cache the kernel reclaims) nor an embedded NATS server's caches.
func (c Config) MemoryLimit() int64 {
	var n int64
	for _, pc := range c.Pipelines {
		n += pc.WithDefaults().MemoryBudget
	}
	return n + n/2 + memoryLimitBase
}

// ApplyMemoryLimit sets the Go runtime's soft memory limit to
// c.MemoryLimit() unless the GOMEMLIMIT environment variable is set (the
// deployment's choice, "off" included), and returns the limit it set (0:
// left as it was).
func ApplyMemoryLimit(c Config) int64 {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return 0
	}
	n := c.MemoryLimit()
	debug.SetMemoryLimit(n)
	return n
}
