package procstat

import (
	"testing"
	"time"
)

// TestContentionCounters checks that the run-queue delay and the machine
// CPU counters read and move forward while this process burns CPU.
func TestContentionCounters(t *testing.T) {
	rd0, err := ProcessRunDelay()
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	busy0, all0, err := MachineCPU()
	if err != nil {
		t.Fatalf("MachineCPU: %v", err)
	}
	deadline := time.Now().Add(60 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	rd1, err := ProcessRunDelay()
	if err != nil {
		t.Fatalf("ProcessRunDelay: %v", err)
	}
	busy1, all1, err := MachineCPU()
	if err != nil {
		t.Fatalf("MachineCPU: %v", err)
	}
	if rd1 < rd0 {
		t.Errorf("run delay went back: %v then %v", rd0, rd1)
	}
	if busy1 < busy0 || all1 <= all0 || busy1-busy0 > all1-all0 {
		t.Errorf("machine cpu: busy %v→%v, total %v→%v (spun %d times)", busy0, busy1, all0, all1, x)
	}
}
