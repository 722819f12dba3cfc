package processor

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestMemoryLimit: the soft memory limit a process gets from its
// pipelines' memory_budget (defaults applied), and that ApplyMemoryLimit
// leaves a GOMEMLIMIT the deployment set alone.
func TestMemoryLimit(t *testing.T) {
	a, b := pipelineConfig("a"), pipelineConfig("b")
	a.MemoryBudget = 100 << 20
	c := Config{Pipelines: []PipelineConfig{a, b}} // b: the default budget
	want := int64(150<<20) + DefaultMemoryBudget*3/2 + 64<<20
	if got := c.MemoryLimit(); got != want {
		t.Fatalf("MemoryLimit %d B, want %d B (1.5 × (100 MiB + 256 MiB) + 64 MiB)", got, want)
	}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	t.Setenv("GOMEMLIMIT", "off")
	debug.SetMemoryLimit(math.MaxInt64)
	if n := ApplyMemoryLimit(c); n != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("with GOMEMLIMIT set ApplyMemoryLimit set %d B (limit now %d), want it left alone", n, debug.SetMemoryLimit(-1))
	}
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
		t.Fatal(err)
	}
	if n := ApplyMemoryLimit(c); n != want || debug.SetMemoryLimit(-1) != want {
		t.Fatalf("ApplyMemoryLimit returned %d B, limit now %d B; want both %d B", n, debug.SetMemoryLimit(-1), want)
	}
}
