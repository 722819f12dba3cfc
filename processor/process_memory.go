package processor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// An RSS target for the process (issue 30, config's process_memory): the
// resident memory of a kpcastream process is
//
//	RSS = anonymous memory (Go's: heap, stacks, runtime; what Go's soft
//	      memory limit bounds)
//	    + file pages (the binary's text, the libraries, and the pages of
//	      the local tier's bbolt files it has read: bbolt reads through a
//	      read-only mmap)
//
// so for RSS ≤ target Go's soft limit is the target less the file pages,
// read from /proc/self/status as they are (a tier's pages grow as its keys
// are read back), and the learners the budgets allow must leave the
// collector room under that limit: h = 1, the heap may reach twice what
// the budgets hold — GOGC 100's own pace, a cheap collector (a tighter
// limit was measured at 3.4× the CPU a message, bench/RESULTS.md §18e).

const (
	// ProcessGCHeadroom is h: a target must leave (1 + h) × Σ
	// memory_budget for the Go heap.
	ProcessGCHeadroom = 1
	// ProcessBinaryBytes is what the ceiling sets aside for the file pages
	// besides the local tier's: the binary's text and the libraries
	// mapped (20 MiB resident in bench/RESULTS.md §18e's runs; the
	// running process counts its own as they are).
	ProcessBinaryBytes = 32 << 20
	// processFloorHeadroom is the least headroom the soft limit keeps over
	// the budgets, whatever the file pages: below it the collector would
	// run all the time (0.69 × live measured at 3.4× the CPU), so RSS
	// goes over the target instead, and the gauges show by how much.
	processFloorHeadroom = 0.5
)

// ProcessMemory is how an RSS target for the process divides: the file
// pages, Go's soft limit and the most the pipelines' memory_budget may
// sum to.
type ProcessMemory struct {
	// Target is process_memory in bytes.
	Target int64
	// Binary is the file pages set aside besides the local tier's
	// (ProcessBinaryBytes).
	Binary int64
	// Base is what a process needs beyond its learners (the NATS client's
	// buffers, the output window, the runtime's structures: 64 MiB, as in
	// MemoryLimit).
	Base int64
	// Budgets is the memory the pipelines' learners may hold: the sum of
	// their memory_budget (defaults applied), or of Keys × KeyBytes and
	// the workers' scratch where one key per worker is more.
	Budgets int64
	// Ceiling is the most Budgets may be: (Target − Binary − Base) / (1 +
	// h), h = ProcessGCHeadroom.
	Ceiling int64
	// Floor is the lowest soft limit set, however many file pages are
	// resident: Budgets × 1.5 + Base.
	Floor int64

	names []string // the pipelines
	held  []int64  // what each holds (their sum is Budgets)
}

// ProcessMemory returns how target (process_memory, bytes) divides for a
// process running c's pipelines (defaults applied).
func (c Config) ProcessMemory(target int64) ProcessMemory {
	c = c.WithDefaults()
	m := ProcessMemory{Target: target, Binary: ProcessBinaryBytes, Base: memoryLimitBase}
	for _, pc := range c.Pipelines {
		n := c.heldBy(pc)
		m.Budgets += n
		m.names, m.held = append(m.names, pc.Name), append(m.held, n)
	}
	m.Ceiling = max(0, (target-m.Binary-m.Base)/(1+ProcessGCHeadroom))
	m.Floor = m.Budgets + int64(float64(m.Budgets)*processFloorHeadroom) + m.Base
	return m
}

// heldBy is the memory pc's learners may hold on an instance running all
// its partitions: its memory_budget, or more when a worker's share is
// under one key (a worker always holds one) — the plan's keys and the
// workers' scratch then.
func (c Config) heldBy(pc PipelineConfig) int64 {
	pc = pc.WithDefaults()
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		return pc.MemoryBudget
	}
	workers := int64(workersPer(c, pc) * pc.Partitions)
	return max(pc.MemoryBudget, plan.Bytes()+workers*int64(plan.Scratch))
}

// Err says why the target does not fit the budgets (nil when it does),
// with the numbers.
func (m ProcessMemory) Err() error {
	if m.Target <= 0 || m.Budgets <= m.Ceiling {
		return nil
	}
	var parts []string
	for i, n := range m.held {
		parts = append(parts, fmt.Sprintf("%s %s", m.names[i], sizeText(n)))
	}
	need := (1+ProcessGCHeadroom)*m.Budgets + m.Binary + m.Base
	return fmt.Errorf("%s (%d B) leaves at most %s for the pipelines' memory_budget ((process_memory − %s for the binary − %s base) / %d: "+
		"h = %d, the Go heap may reach %d× what the budgets hold), but they hold %s (%s): raise process_memory to at least %s (%d B) or lower memory_budget",
		sizeText(m.Target), m.Target, sizeText(m.Ceiling), sizeText(m.Binary), sizeText(m.Base), 1+ProcessGCHeadroom,
		ProcessGCHeadroom, 1+ProcessGCHeadroom, sizeText(m.Budgets), strings.Join(parts, " + "), sizeText(need), need)
}

// Limit is Go's soft memory limit for file bytes of resident file pages:
// the target less them, at least Floor.
func (m ProcessMemory) Limit(file int64) int64 {
	return max(m.Floor, m.Target-max(file, 0))
}

// String describes the division in one line, for lint and the log.
func (m ProcessMemory) String() string {
	return fmt.Sprintf("process_memory %s: memory_budget %s of at most %s (h = %d), Go's soft limit %s less the file pages resident "+
		"(%s set aside for the binary; the local tier's mapped reads come off it too), at least %s",
		sizeText(m.Target), sizeText(m.Budgets), sizeText(m.Ceiling), ProcessGCHeadroom, sizeText(m.Target),
		sizeText(m.Binary), sizeText(m.Floor))
}

// processPages is the resident memory of the process by kind, in bytes
// (/proc/self/status).
type processPages struct {
	anon, file, shmem int64
}

// readProcessPages reads the process's resident memory by kind from
// /proc/self/status (Linux).
func readProcessPages() (processPages, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return processPages{}, err
	}
	defer f.Close()
	return parseProcessPages(f)
}

// parseProcessPages reads RssAnon, RssFile and RssShmem (kB) from a
// /proc/PID/status; it fails when RssFile is missing.
func parseProcessPages(r io.Reader) (processPages, error) {
	var p processPages
	seen := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "RssAnon":
			dst = &p.anon
		case "RssFile":
			dst, seen = &p.file, true
		case "RssShmem":
			dst = &p.shmem
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return processPages{}, fmt.Errorf("processor: /proc/self/status: %s: want \"N kB\", got %q", name, strings.TrimSpace(rest))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return processPages{}, fmt.Errorf("processor: /proc/self/status: %s: %w", name, err)
		}
		*dst = n << 10
	}
	if err := sc.Err(); err != nil {
		return processPages{}, err
	}
	if !seen {
		return processPages{}, fmt.Errorf("processor: /proc/self/status has no RssFile line")
	}
	return p, nil
}

// memoryGovernor keeps Go's soft limit at the target less the file pages
// resident.
type memoryGovernor struct {
	m       ProcessMemory
	read    func() (processPages, error)
	set     func(int64) int64 // debug.SetMemoryLimit; nil: leave the limit (GOMEMLIMIT set)
	stepped bool              // a step has read the pages
	limit   int64             // the limit in force after the last step
	file    int64             // the file pages read last
	gauges  *processGauges
}

// processGauges are the governor's /metrics.
type processGauges struct {
	target, limit, file, rss prometheus.Gauge
}

func newProcessGauges(reg prometheus.Registerer) *processGauges {
	p := "kpcastream_process_memory_"
	g := &processGauges{
		target: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "target_bytes",
			Help: "process_memory: the RSS target of this process."}),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "limit_bytes",
			Help: "Go's soft memory limit in force: process_memory less the file pages resident (GOMEMLIMIT's when set)."}),
		file: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "file_bytes",
			Help: "Resident file and shared pages of this process: the binary, its libraries, the local tier's mapped reads."}),
		rss: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "rss_bytes",
			Help: "Resident memory of this process (anonymous + file + shared pages), read with the file pages."}),
	}
	if reg != nil {
		reg.MustRegister(g.target, g.limit, g.file, g.rss)
	}
	return g
}

// step reads the pages resident and sets the limit: the target less the
// file pages, and less their growth since the last read (so that the
// pages read before the next step fit too), at least Floor. It returns
// the limit in force.
func (g *memoryGovernor) step() (int64, error) {
	pg, err := g.read()
	if err != nil {
		return g.limit, err
	}
	file, grow := pg.file+pg.shmem, int64(0)
	if g.stepped {
		grow = max(0, file-g.file)
	}
	g.stepped, g.file = true, file
	if want := g.m.Limit(file + grow); g.set == nil {
		g.limit = debug.SetMemoryLimit(-1) // GOMEMLIMIT's
	} else if want != g.limit {
		g.set(want)
		g.limit = want
	}
	if g.gauges != nil {
		g.gauges.limit.Set(float64(g.limit))
		g.gauges.file.Set(float64(g.file))
		g.gauges.rss.Set(float64(pg.anon + g.file))
	}
	return g.limit, nil
}

// processMemoryEvery is the governor's period.
const processMemoryEvery = 500 * time.Millisecond

// GovernProcessMemory keeps Go's soft memory limit at m.Target less the
// file pages the process has resident (/proc/self/status), at least
// m.Floor: set once before it returns, then every 500 ms in a goroutine
// until ctx ends or stop is called (stop waits for it to end). With the
// GOMEMLIMIT environment variable set (the deployment's choice, "off"
// included) it leaves the limit alone and only reports. It registers the
// gauges kpcastream_process_memory_* on reg (nil: none), and returns the
// limit in force. Where /proc/self/status cannot be read (not Linux) it
// sets m.Limit(m.Binary) once (unless GOMEMLIMIT is set) and returns that
// with an error saying so.
func GovernProcessMemory(ctx context.Context, m ProcessMemory, reg prometheus.Registerer) (limit int64, stop func(), err error) {
	g := &memoryGovernor{m: m, read: readProcessPages, set: debug.SetMemoryLimit}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		g.set = nil
	}
	if _, err := g.read(); err != nil {
		limit := debug.SetMemoryLimit(-1)
		if g.set != nil {
			limit = m.Limit(m.Binary)
			g.set(limit)
		}
		return limit, func() {}, fmt.Errorf("processor: process_memory: the file pages resident cannot be read (%w): Go's soft limit is %d B, set once", err, limit)
	}
	g.gauges = newProcessGauges(reg)
	g.gauges.target.Set(float64(m.Target))
	if limit, err = g.step(); err != nil {
		return 0, func() {}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(processMemoryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = g.step() // a failed read keeps the limit set last
			}
		}
	}()
	return limit, func() { cancel(); <-done }, nil
}
