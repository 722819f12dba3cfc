package machine

import "testing"

func TestTracker(t *testing.T) {
	tr := NewTracker()
	if c := tr.Checkpoint(); c != 0 {
		t.Fatalf("empty: got %d, want 0", c)
	}
	for s := uint64(1); s <= 5; s++ {
		tr.Deliver(s)
	}
	tr.Hold(2) // key A dirty since 2
	for s := uint64(1); s <= 5; s++ {
		if s == 4 {
			tr.Nak(4)
			continue
		}
		tr.Release(s)
	}
	if c := tr.Checkpoint(); c != 2 {
		t.Fatalf("dirty key at 2: got %d, want 2", c)
	}
	tr.Release(2) // key A snapshotted
	if c := tr.Checkpoint(); c != 4 {
		t.Fatalf("nak'd 4: got %d, want 4", c)
	}
	tr.Deliver(4) // redelivered
	if c := tr.Checkpoint(); c != 4 {
		t.Fatalf("redelivered 4: got %d, want 4", c)
	}
	tr.Release(4)
	if c := tr.Checkpoint(); c != 6 {
		t.Fatalf("all settled: got %d, want 6", c)
	}
	// 7 is nak'ed, 8 delivered and settled: held at 7 until 7's
	// redelivery is settled.
	tr.Deliver(7)
	tr.Nak(7)
	tr.Deliver(8)
	tr.Release(8)
	if c := tr.Checkpoint(); c != 7 {
		t.Fatalf("nak'd 7 behind a settled 8: got %d, want 7", c)
	}
	tr.Deliver(7)
	tr.Release(7)
	if c := tr.Checkpoint(); c != 9 {
		t.Fatalf("7 redelivered and settled: got %d, want 9", c)
	}
}
