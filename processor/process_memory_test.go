package processor

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/learners"
	dto "github.com/prometheus/client_model/go"
)

const mib = 1 << 20

// TestProcessMemoryDivision: how an RSS target divides for two pipelines
// (1280 MiB and the default 256 MiB): the ceiling on their budgets at
// h = 1, the floor of the soft limit, the limit for the file pages read,
// and the refusal with its numbers when the budgets do not fit.
func TestProcessMemoryDivision(t *testing.T) {
	a, b := pipelineConfig("a"), pipelineConfig("b")
	a.MemoryBudget = 1280 * mib
	c := Config{Workers: 2, Pipelines: []PipelineConfig{a, b}}

	m := c.ProcessMemory(4096 * mib)
	if m.Budgets != 1536*mib {
		t.Fatalf("Budgets %d, want 1536 MiB (1280 + 256 by default)", m.Budgets)
	}
	if m.Ceiling != 2000*mib { // (4096 − 32 − 64) / 2
		t.Errorf("Ceiling %d, want 2000 MiB", m.Ceiling)
	}
	if m.Floor != (1536*3/2+64)*mib {
		t.Errorf("Floor %d, want 2368 MiB (1.5 × 1536 + 64)", m.Floor)
	}
	if err := m.Err(); err != nil {
		t.Errorf("4 GiB for 1536 MiB of budgets: %v, want it to fit", err)
	}
	for _, tc := range []struct{ file, want int64 }{
		{0, 4096 * mib},
		{85 * mib, 4011 * mib},        // §18e's pass-through at 10⁶ keys: binary 20 + tier 64 + libc 1
		{1800 * mib, m.Floor},         // a tier mapped past the room: the floor, RSS over the target
		{-1, 4096 * mib},              // not a size
		{4096*mib - m.Floor, m.Floor}, // exactly at the floor
	} {
		if got := m.Limit(tc.file); got != tc.want {
			t.Errorf("Limit(%d MiB) = %.1f MiB, want %.1f MiB", tc.file/mib, float64(got)/mib, float64(tc.want)/mib)
		}
	}

	// 3 GiB: (3072 − 96) / 2 = 1488 MiB < 1536 MiB.
	m = c.ProcessMemory(3072 * mib)
	if m.Ceiling != 1488*mib {
		t.Fatalf("Ceiling %d, want 1488 MiB", m.Ceiling)
	}
	err := m.Err()
	if err == nil {
		t.Fatal("3 GiB for 1536 MiB of budgets at h = 1: no error, want a refusal")
	}
	for _, want := range []string{"3.0 GiB (3221225472 B)", "at most 1.5 GiB", "a 1.2 GiB + b 256.0 MiB",
		"at least 3.1 GiB (3321888768 B)", "lower memory_budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if m := c.ProcessMemory(3168 * mib); m.Err() != nil { // exactly the least it names
		t.Errorf("3168 MiB (2 × 1536 + 96): %v, want it to fit", m.Err())
	}
	if m := c.ProcessMemory(50 * mib); m.Ceiling != 0 || m.Err() == nil {
		t.Errorf("50 MiB: ceiling %d, error %v; want 0 and a refusal", m.Ceiling, m.Err())
	}
	if m := c.ProcessMemory(0); m.Err() != nil {
		t.Errorf("no target: %v, want no error", m.Err())
	}
}

// TestProcessMemoryOneKeyPerWorker: a worker holds one key even when its
// share of memory_budget is less, so a budget under a key counts what the
// workers hold, not the budget.
func TestProcessMemoryOneKeyPerWorker(t *testing.T) {
	pc := pipelineConfig("big")
	pc.Learner = learners.Config{Learner: learners.KindIKPCA, Dim: 16, Components: 8, Budget: 256,
		Kernel: learners.Kernel{Name: learners.KernelRBF}}
	pc.MemoryBudget = 1 * mib
	c := Config{Workers: 4, Pipelines: []PipelineConfig{pc}}
	plan, err := c.MemoryPlan(pc)
	if err != nil {
		t.Fatal(err)
	}
	if plan.KeyBytes <= int(mib) || plan.Keys != 4 {
		t.Fatalf("plan %+v: want 4 keys (one a worker) of more than 1 MiB", plan)
	}
	m := c.ProcessMemory(1 << 30)
	want := 4 * (int64(plan.KeyBytes) + int64(plan.Scratch))
	if m.Budgets != want {
		t.Errorf("Budgets %d, want %d (4 workers × (key %d + scratch %d)), not the 1 MiB budget", m.Budgets, want, plan.KeyBytes, plan.Scratch)
	}
}

// TestProcessMemoryGovernor: each step sets the limit to the target less
// the file pages resident and less their growth since the last step, at
// least the floor; with GOMEMLIMIT set it sets nothing and reports the
// limit in force.
func TestProcessMemoryGovernor(t *testing.T) {
	m := Config{Workers: 1, Pipelines: []PipelineConfig{pipelineConfig("g")}}.ProcessMemory(1024 * mib)
	// Budgets 256 MiB (the default): floor 448 MiB.
	pages := []processPages{
		{anon: 300 * mib, file: 20 * mib},                 // start: the binary
		{anon: 400 * mib, file: 84 * mib, shmem: 1 * mib}, // the tier's pages read: +65 MiB
		{anon: 400 * mib, file: 85 * mib},                 // steady
		{anon: 400 * mib, file: 700 * mib},                // more than the room: the floor
		{anon: 400 * mib, file: 60 * mib},                 // reclaimed
		{anon: 400 * mib, file: 60 * mib},                 // steady: no call
	}
	want := []int64{1004 * mib, (1024 - 85 - 65) * mib, (1024 - 85) * mib, m.Floor, 964 * mib, 964 * mib}
	var sets []int64
	i := 0
	g := &memoryGovernor{m: m, read: func() (processPages, error) { i++; return pages[i-1], nil },
		set: func(n int64) int64 { sets = append(sets, n); return 0 }, gauges: newProcessGauges(nil)}
	for k := range pages {
		got, err := g.step()
		if err != nil {
			t.Fatal(err)
		}
		if got != want[k] {
			t.Errorf("step %d (file %d MiB): limit %.1f MiB, want %.1f MiB", k, pages[k].file/mib, float64(got)/mib, float64(want[k])/mib)
		}
	}
	if len(sets) != 5 || sets[4] != 964*mib {
		t.Errorf("limits set %v, want 5 calls (none when unchanged), the last 964 MiB", sets)
	}
	if got := gaugeValue(t, g.gauges.rss); got != float64(460*mib) {
		t.Errorf("rss gauge %.0f, want anon + file = 460 MiB", got)
	}
	if got := gaugeValue(t, g.gauges.limit); got != float64(964*mib) {
		t.Errorf("limit gauge %.0f, want 964 MiB", got)
	}

	readErr := errors.New("no /proc")
	g.read = func() (processPages, error) { return processPages{}, readErr }
	if got, err := g.step(); !errors.Is(err, readErr) || got != 964*mib {
		t.Errorf("a failed read: limit %d, error %v; want the last limit kept and the error", got, err)
	}

	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	debug.SetMemoryLimit(777 * mib)
	g = &memoryGovernor{m: m, read: func() (processPages, error) { return pages[0], nil }}
	if got, err := g.step(); err != nil || got != 777*mib || debug.SetMemoryLimit(-1) != 777*mib {
		t.Errorf("without set (GOMEMLIMIT): limit %d, error %v, in force %d; want 777 MiB reported and left", got, err, debug.SetMemoryLimit(-1))
	}
}

// TestProcessMemoryPages reads this process's /proc/self/status and
// refuses a malformed one.
func TestProcessMemoryPages(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc/self/status (%v): the governor reports the error and run sets the limit once", err)
	}
	p, err := readProcessPages()
	if err != nil {
		t.Fatal(err)
	}
	if p.anon < 1*mib || p.file < 1*mib {
		t.Errorf("pages %+v: want anonymous and file pages over 1 MiB each for a Go test binary", p)
	}
	for _, bad := range []string{"Name:\tx\nRssAnon:\t10 kB\n", "RssFile:\tx kB\n", "RssFile:\t10 MB\n"} {
		if _, err := parseProcessPages(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	p, err = parseProcessPages(strings.NewReader("VmRSS:\t 30 kB\nRssAnon:\t 10 kB\nRssFile:\t 19 kB\nRssShmem:\t 1 kB\n"))
	if err != nil || p != (processPages{anon: 10 << 10, file: 19 << 10, shmem: 1 << 10}) {
		t.Errorf("parsed %+v, %v; want 10, 19, 1 KiB", p, err)
	}
}

// TestProcessMemoryGovern: GovernProcessMemory sets the real limit from
// this process's pages and registers its gauges; with GOMEMLIMIT set it
// leaves the limit alone.
func TestProcessMemoryGovern(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc/self/status (%v)", err)
	}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	m := Config{Workers: 1, Pipelines: []PipelineConfig{pipelineConfig("g")}}.ProcessMemory(1024 * mib)
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Cleanup(func() { os.Setenv("GOMEMLIMIT", v) })
	}
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	got, stop, err := GovernProcessMemory(context.Background(), m, reg)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := readProcessPages()
	if got < m.Floor || got > 1024*mib-p.file/2 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("limit %d (in force %d): want the target less this process's file pages (%d), above the floor %d",
			got, debug.SetMemoryLimit(-1), p.file, m.Floor)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]float64{}
	for _, mf := range mfs {
		vals[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	p2 := "kpcastream_process_memory_"
	if vals[p2+"target_bytes"] != 1024*mib || vals[p2+"limit_bytes"] != float64(got) || vals[p2+"file_bytes"] < mib ||
		vals[p2+"rss_bytes"] <= vals[p2+"file_bytes"] {
		t.Errorf("gauges %v: want the target 1 GiB, the limit %d, file pages over 1 MiB, an RSS above them", vals, got)
	}
	stop()
	debug.SetMemoryLimit(123 * mib) // after stop, nothing sets it again
	time.Sleep(2 * processMemoryEvery)
	if got := debug.SetMemoryLimit(-1); got != 123*mib {
		t.Errorf("limit %d after stop, want the 123 MiB set then", got)
	}

	t.Setenv("GOMEMLIMIT", "off")
	debug.SetMemoryLimit(math.MaxInt64)
	got, stop, err = GovernProcessMemory(context.Background(), m, nil)
	defer stop()
	if err != nil || got != math.MaxInt64 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: limit %d, %v, in force %d; want it left alone", got, err, debug.SetMemoryLimit(-1))
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
