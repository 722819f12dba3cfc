package machine

import "testing"

// TestIntake: every way a first delivery can be lost is looked up before
// the delivery that reveals it is handed over. Each case is one the
// partition's consume callback missed before (issue 28's skipped range).
func TestIntake(t *testing.T) {
	type d struct {
		cons, stream, max uint64
		from, to          uint64 // the look-up expected
	}
	cases := []struct {
		name  string
		start uint64
		ds    []d
	}{
		{"no gap", 1, []d{{1, 1, 0, 0, 0}, {2, 5, 1, 0, 0}, {3, 9, 5, 0, 0}}},
		{"a gap between first deliveries", 1, []d{{1, 1, 0, 0, 0}, {3, 9, 1, 2, 9}}},
		// A new consumer's first deliveries lost: its first delivery
		// received is consumer sequence 3. Before: no look-up (lastCons 0).
		{"the first deliveries of a new consumer lost", 40, []d{{3, 52, 0, 40, 52}, {4, 53, 52, 0, 0}}},
		// A fresh tracker (max 0) with a gap later: the look-up starts at
		// the consumer's start, not at 1. Before: none (next > 1 failed).
		{"a gap before anything was delivered", 7, []d{{2, 9, 0, 7, 9}}},
		// The delivery that reveals the gap is a redelivery; the first
		// deliveries lost come before the next first delivery. Before: the
		// gap was forgotten and 11..12 skipped.
		{"a gap revealed by a redelivery", 1, []d{
			{1, 5, 0, 0, 0}, {2, 10, 5, 0, 0}, {5, 5, 10, 0, 0}, {6, 13, 10, 11, 13}}},
		{"an old or repeated consumer sequence", 1, []d{{1, 1, 0, 0, 0}, {1, 1, 1, 0, 0}, {2, 2, 1, 0, 0}}},
	}
	for _, c := range cases {
		in := NewIntake(c.start)
		for i, x := range c.ds {
			from, to := in.Delivery(x.cons, x.stream, x.max)
			if from >= to {
				from, to = 0, 0
			}
			if from != x.from || to != x.to {
				t.Errorf("%s: delivery %d (cons %d, stream %d): look up [%d, %d), want [%d, %d)", c.name, i, x.cons, x.stream, from, to, x.from, x.to)
			}
		}
	}
}
