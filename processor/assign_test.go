package processor

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestAssignMoves checks the properties partition assignment relies on,
// from a stable assignment: a join or a leave moves at most ⌈N/W⌉+1 of N
// partitions (W members after the change), no partition moves between two
// members that stay, every member gets ⌊N/W⌋ or ⌈N/W⌉, and the result does
// not depend on the order members are listed in.
func TestAssignMoves(t *testing.T) {
	ids := func(k int) []string {
		var m []string
		for i := range k {
			m = append(m, fmt.Sprintf("%016x", uint64(i+1)*0x9e3779b97f4a7c15))
		}
		slices.Sort(m)
		return m
	}
	stable := func(members []string, owners []string) []string {
		for range 5 { // converges in one step; iterate to check it stays
			owners = assignTargets(members, "sensors", owners)
		}
		return owners
	}
	balanced := func(what string, members, owners []string) {
		load := map[string]int{}
		for _, o := range owners {
			load[o]++
		}
		n, w := len(owners), len(members)
		for _, m := range members {
			if load[m] < n/w || load[m] > (n+w-1)/w {
				t.Errorf("%s: member %s has %d of %d partitions with %d members", what, m, load[m], n, w)
			}
		}
	}
	for _, n := range []int{1, 3, 8, 16, 64} {
		all := ids(7)
		owners := stable(all[:1], make([]string, n))
		for w := 1; w < 7; w++ {
			cur := all[:w]
			balanced(fmt.Sprintf("n=%d w=%d", n, w), cur, owners)
			next := stable(all[:w+1], owners)
			moved := 0
			for i := range owners {
				if owners[i] != next[i] {
					moved++
					if next[i] != all[w] {
						t.Errorf("n=%d join %d→%d: partition %d moved between members that stay", n, w, w+1, i)
					}
				}
			}
			if limit := (n+w)/(w+1) + 1; moved > limit {
				t.Errorf("n=%d: join %d→%d moved %d partitions, want ≤ ⌈N/W⌉+1 = %d", n, w, w+1, moved, limit)
			}
			// Leave of a member in the middle: only its partitions move.
			leaver := all[w/2]
			var rest []string
			for _, m := range all[:w+1] {
				if m != leaver {
					rest = append(rest, m)
				}
			}
			dead := slices.Clone(next)
			for i := range dead {
				if dead[i] == leaver {
					dead[i] = ""
				}
			}
			after := stable(rest, dead)
			moved = 0
			for i := range next {
				if next[i] != after[i] {
					moved++
					if next[i] != leaver {
						t.Errorf("n=%d leave %d→%d: partition %d of a member that stays moved", n, w+1, w, i)
					}
				}
			}
			if limit := (n+w-1)/w + 1; moved > limit {
				t.Errorf("n=%d: leave %d→%d moved %d partitions, want ≤ ⌈N/W⌉+1 = %d", n, w+1, w, moved, limit)
			}
			balanced(fmt.Sprintf("n=%d after leave", n), rest, after)
			owners = next
		}
	}
	rev := ids(3)
	slices.Reverse(rev)
	if a, b := assignTargets(ids(3), "p", make([]string, 8)), assignTargets(rev, "p", make([]string, 8)); !slices.Equal(a, b) {
		t.Errorf("targets depend on the order of members: %v vs %v", a, b)
	}
	if got := assignTargets(nil, "p", make([]string, 2)); got[0] != "" || got[1] != "" {
		t.Errorf("no members must give no owners, got %v", got)
	}
}

// TestDecide is the table of ownership rules.
func TestDecide(t *testing.T) {
	const ttl = 10 * time.Second
	now := time.Unix(1000, 0)
	rec := func(owner string, seenAgo time.Duration) partView {
		return partView{exists: true, rec: partRecord{Owner: owner, Epoch: 3, Checkpoint: 9}, rev: 7, seenAt: now.Add(-seenAgo)}
	}
	cases := []struct {
		name       string
		self, want string
		v          partView
		running    bool
		act        ownAction
	}{
		{"no record, assigned here", "a", "a", partView{}, false, ownTake},
		{"no record, assigned elsewhere", "b", "a", partView{}, false, ownNone},
		{"released, assigned here", "a", "a", rec("", 0), false, ownTake},
		{"released, assigned elsewhere", "b", "a", rec("", time.Hour), false, ownNone},
		{"held by a live owner, assigned here: wait for its release", "a", "a", rec("b", time.Second), false, ownNone},
		{"held, not renewed for ttl, assigned here: take over", "a", "a", rec("b", ttl), false, ownTake},
		{"held, not renewed for ttl, assigned elsewhere", "b", "a", rec("c", ttl), false, ownNone},
		{"running, still assigned", "a", "a", rec("a", 0), true, ownNone},
		{"running, assigned to another member: release", "b", "a", rec("b", 0), true, ownRelease},
		{"running, no assignment known", "b", "", rec("b", 0), true, ownNone},
		{"record names self, not running (self-stopped), assigned here: take again", "a", "a", rec("a", 0), false, ownTake},
		{"record names self, not running, assigned elsewhere: abandon", "b", "a", rec("b", 0), false, ownAbandon},
	}
	for _, c := range cases {
		if got := decide(c.self, c.want, c.v, c.running, now, ttl); got != c.act {
			t.Errorf("%s: got %v, want %v", c.name, got, c.act)
		}
	}
}

// TestFence checks the fence's clock: ok within lease_ttl/2 of the last
// renewal sent, not after, and never after a revoke.
func TestFence(t *testing.T) {
	// lease_ttl is wide so that a loaded machine cannot push the checks
	// across ttl/2; each check is judged against the time actually elapsed.
	const ttl = 800 * time.Millisecond
	f := newFence(ttl, time.Now())
	if !f.ok() {
		t.Fatal("a fresh fence is not ok")
	}
	time.Sleep(10 * time.Millisecond)
	renewed := time.Now()
	f.renewed(renewed)
	time.Sleep(20 * time.Millisecond)
	if ok, since := f.ok(), time.Since(renewed); !ok && since < ttl/2 {
		t.Fatalf("fence not ok %v after a renewal with lease_ttl %v", since, ttl)
	}
	time.Sleep(ttl/2 - time.Since(renewed) + 20*time.Millisecond)
	if f.ok() {
		t.Fatalf("fence ok %v after the last renewal with lease_ttl %v", time.Since(renewed), ttl)
	}
	f.renewed(time.Now()) // a late renewal does not bring it back
	if f.ok() {
		t.Fatal("an expired fence came back after a late renewal")
	}
	select {
	case <-f.lostCh():
	default:
		t.Fatal("expiry did not close lost")
	}
	g := newFence(time.Hour, time.Now())
	g.revoke()
	g.revoke() // idempotent
	if g.ok() {
		t.Fatal("revoked fence ok")
	}
	var none *fence
	if !none.ok() || none.lostCh() != nil {
		t.Fatal("nil fence (core input) must always be ok and never lost")
	}
}
