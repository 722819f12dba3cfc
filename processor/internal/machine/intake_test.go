package machine

import "testing"

// TestIntake: every gap in a consumer's delivery sequence is told, the
// first delivery of a consumer included. (The rule before looked up the
// lost first deliveries below the delivery that revealed the gap, and
// missed them before a new consumer's first delivery, with a fresh
// tracker, when a redelivery revealed the gap, and beyond a redelivery of
// a lost first delivery — sim seeds 5, 20, 9484, 64190.)
func TestIntake(t *testing.T) {
	type d struct {
		cons       uint64
		gap, fresh bool
	}
	cases := []struct {
		name string
		ds   []d
	}{
		{"no gap", []d{{1, false, true}, {2, false, true}, {3, false, true}}},
		{"a gap between deliveries", []d{{1, false, true}, {3, true, true}, {4, false, true}}},
		{"the first deliveries of a new consumer lost", []d{{3, true, true}}},
		{"an old or repeated consumer sequence", []d{{1, false, true}, {1, false, false}, {2, false, true}}},
	}
	for _, c := range cases {
		in := NewIntake()
		for i, x := range c.ds {
			if gap, fresh := in.Delivery(x.cons); gap != x.gap || fresh != x.fresh {
				t.Errorf("%s: delivery %d (cons %d): gap %v fresh %v, want %v %v", c.name, i, x.cons, gap, fresh, x.gap, x.fresh)
			}
		}
	}
}
