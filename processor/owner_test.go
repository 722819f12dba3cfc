package processor

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// TestOwnerIsFNV checks that a key's partition is FNV-1a 32 mod the
// partition count (the hash of nats-server's {{partition}} transform), and
// that the worker within a partition comes from the rest of the hash, so
// that every worker of a partition gets keys even when the counts share a
// factor.
func TestOwnerIsFNV(t *testing.T) {
	keys := []string{"", "_", "a", "sensor-17", "k0", "k1", "ünïcødé", "a.b"}
	for _, parts := range []int{1, 2, 3, 8} {
		for _, workers := range []int{1, 2, 3, 7} {
			pt := &partition{pipe: &pipeline{cfg: PipelineConfig{Partitions: parts}}, workers: make([]*worker, workers)}
			for _, key := range keys {
				h := fnv.New32a()
				h.Write([]byte(key))
				if got, want := ownership.PartitionOf(key, parts), int(h.Sum32()%uint32(parts)); got != want {
					t.Errorf("partitionOf(%q, %d) = %d, want %d", key, parts, got, want)
				}
				if got, want := pt.owner(key), int(h.Sum32()/uint32(parts)%uint32(workers)); got != want {
					t.Errorf("owner(%q) with %d partitions, %d workers = %d, want %d", key, parts, workers, got, want)
				}
			}
			// Every worker of partition 0 gets some of 1,000 keys.
			used := map[int]bool{}
			for i := range 1000 {
				if k := fmt.Sprintf("key-%d", i); ownership.PartitionOf(k, parts) == 0 {
					used[pt.owner(k)] = true
				}
			}
			if len(used) != workers {
				t.Errorf("%d partitions, %d workers: partition 0's keys use %d workers", parts, workers, len(used))
			}
		}
	}
	pt := &partition{pipe: &pipeline{cfg: PipelineConfig{Partitions: 4}}, workers: make([]*worker, 4)}
	if n := testing.AllocsPerRun(100, func() { _ = pt.owner("sensor-17") }); n != 0 {
		t.Errorf("owner allocates %v times per call, want 0", n)
	}
}
