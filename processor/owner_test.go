package processor

import (
	"hash/fnv"
	"testing"
)

// TestOwnerIsFNV checks that the inline hash of owner is FNV-1a 32, the
// documented assignment of keys to workers.
func TestOwnerIsFNV(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 7, 64} {
		p := &Processor{workers: make([]*worker, workers)}
		for _, key := range []string{"", "_", "a", "sensor-17", "k0", "k1", "ünïcødé", "a.b"} {
			h := fnv.New32a()
			h.Write([]byte(key))
			if got, want := p.owner(key), int(h.Sum32()%uint32(workers)); got != want {
				t.Errorf("owner(%q) with %d workers = %d, want %d", key, workers, got, want)
			}
		}
	}
	p := &Processor{workers: make([]*worker, 4)}
	if n := testing.AllocsPerRun(100, func() { _ = p.owner("sensor-17") }); n != 0 {
		t.Errorf("owner allocates %v times per call, want 0", n)
	}
}
