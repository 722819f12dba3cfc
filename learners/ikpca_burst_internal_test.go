package learners

import "testing"

// TestMoveAllowed checks centroid's rate limit: with burst 1 it is the rule
// before bursts (a move when seen − last ≥ gap, last ← seen); with burst b,
// after an idle stretch b moves may happen at once and then one per gap,
// and over any stretch of observations where a move is asked for at every
// one, the moves never exceed stretch/gap + b.
func TestMoveAllowed(t *testing.T) {
	const gap = 8
	for seen := int64(0); seen < 100; seen++ {
		for last := int64(0); last <= seen; last++ {
			ok, next := moveAllowed(seen, last, gap, 1)
			if want := seen-last >= gap; ok != want || (ok && next != seen) {
				t.Fatalf("burst 1, seen %d, last %d: (%v, %d), want (%v, %d)", seen, last, ok, next, want, seen)
			}
		}
	}
	for _, burst := range []int64{1, 4, 32} {
		last := int64(0)
		moves := 0
		// Idle until 1000, then a move asked for at every observation.
		for seen := int64(1000); seen < 3000; seen++ {
			ok, next := moveAllowed(seen, last, gap, burst)
			if ok {
				last = next
				moves++
			}
			if stretch := seen - 1000 + 1; int64(moves) > stretch/gap+burst {
				t.Fatalf("burst %d: %d moves in %d observations, more than %d/%d + %d", burst, moves, stretch, stretch, gap, burst)
			}
			if seen == 1000+burst-1 && int64(moves) != burst && burst <= gap {
				t.Errorf("burst %d: %d moves in the first %d observations after an idle stretch, want %d", burst, moves, burst, burst)
			}
		}
		if want := 2000/gap + int(burst); moves < want-1 || moves > want {
			t.Errorf("burst %d: %d moves in 2000 observations, want about %d", burst, moves, want)
		}
	}
}
