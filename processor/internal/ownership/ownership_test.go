package ownership

import (
	"fmt"
	"slices"
	"strings"
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
			owners = AssignTargets(members, "sensors", owners)
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
	if a, b := AssignTargets(ids(3), "p", make([]string, 8)), AssignTargets(rev, "p", make([]string, 8)); !slices.Equal(a, b) {
		t.Errorf("targets depend on the order of members: %v vs %v", a, b)
	}
	if got := AssignTargets(nil, "p", make([]string, 2)); got[0] != "" || got[1] != "" {
		t.Errorf("no members must give no owners, got %v", got)
	}
}

// TestDecide is the table of ownership rules.
func TestDecide(t *testing.T) {
	const ttl = 10 * time.Second
	now := time.Unix(1000, 0)
	rec := func(owner string, seenAgo time.Duration) View {
		return View{Exists: true, Rec: Record{Owner: owner, Epoch: 3, Checkpoint: 9}, Rev: 7, SeenAt: now.Add(-seenAgo)}
	}
	cases := []struct {
		name       string
		self, want string
		v          View
		running    bool
		act        Action
	}{
		{"no record, assigned here", "a", "a", View{}, false, Take},
		{"no record, assigned elsewhere", "b", "a", View{}, false, None},
		{"released, assigned here", "a", "a", rec("", 0), false, Take},
		{"released, assigned elsewhere", "b", "a", rec("", time.Hour), false, None},
		{"held by a live owner, assigned here: wait for its release", "a", "a", rec("b", time.Second), false, None},
		{"held, not renewed for ttl, assigned here: take over", "a", "a", rec("b", ttl), false, Take},
		{"held, not renewed for ttl, assigned elsewhere", "b", "a", rec("c", ttl), false, None},
		{"running, still assigned", "a", "a", rec("a", 0), true, None},
		{"running, assigned to another member: release", "b", "a", rec("b", 0), true, Release},
		{"running, no assignment known", "b", "", rec("b", 0), true, None},
		{"record names self, not running (self-stopped), assigned here: take again", "a", "a", rec("a", 0), false, Take},
		{"record names self, not running, assigned elsewhere: abandon", "b", "a", rec("b", 0), false, Abandon},
	}
	for _, c := range cases {
		if got := Decide(c.self, c.want, c.v, c.running, now, ttl); got != c.act {
			t.Errorf("%s: got %v, want %v", c.name, got, c.act)
		}
	}
}

// TestLease checks the fence's rule: ok within lease_ttl/2 of the last
// renewal sent, not after, and never after a revoke or an expiry, even if
// a late renewal lands.
func TestLease(t *testing.T) {
	const ttl = 800 * time.Millisecond
	t0 := time.Unix(1000, 0)
	l := NewLease(ttl, t0)
	if !l.OK(t0) {
		t.Fatal("a fresh lease is not ok")
	}
	l.Renewed(t0.Add(10 * time.Millisecond))
	if !l.OK(t0.Add(10*time.Millisecond + ttl/2 - 1)) {
		t.Fatal("lease not ok just before lease_ttl/2 after a renewal")
	}
	l.Renewed(t0) // an older renewal's success does not move it back
	if !l.OK(t0.Add(10*time.Millisecond + ttl/2 - 1)) {
		t.Fatal("an older renewal moved the lease back")
	}
	if l.OK(t0.Add(10*time.Millisecond + ttl/2)) {
		t.Fatal("lease ok lease_ttl/2 after the last renewal")
	}
	l.Renewed(t0.Add(time.Second)) // a late renewal does not bring it back
	if l.OK(t0.Add(time.Second)) {
		t.Fatal("an expired lease came back after a late renewal")
	}
	g := NewLease(time.Hour, t0)
	g.Revoke()
	if g.OK(t0) {
		t.Fatal("revoked lease ok")
	}
}

// TestCandidates is the table of per-pipeline membership: who shares a
// pipeline's partitions, given the live members' heartbeats and the
// record owners.
func TestCandidates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	runs := func(id string, started int, pipes ...string) Member {
		m := Member{ID: id, Started: t0.Add(time.Duration(started) * time.Second), Pipelines: []MemberPipeline{}}
		for _, p := range pipes {
			name, layout, _ := strings.Cut(p, "@")
			if layout == "" {
				layout = "L1"
			}
			m.Pipelines = append(m.Pipelines, MemberPipeline{Name: name, Partitions: 4, Layout: layout})
		}
		return m
	}
	legacy := func(id string) Member { return Member{ID: id, Legacy: true} }
	cases := []struct {
		name       string
		alive      []Member
		pipeline   string
		owners     []string
		want       []string
		wantLayout string
	}{
		{"one deployment", []Member{runs("a", 0, "x"), runs("b", 1, "x")}, "x", nil, []string{"a", "b"}, "L1"},
		{"two deployments on one bucket: x only among x's members",
			[]Member{runs("a", 0, "x"), runs("b", 1, "y"), runs("c", 2, "x"), runs("d", 3, "y")}, "x", []string{"b", "", "d", ""},
			[]string{"a", "c"}, "L1"},
		{"two deployments: y only among y's members",
			[]Member{runs("a", 0, "x"), runs("b", 1, "y"), runs("c", 2, "x"), runs("d", 3, "y")}, "y", nil, []string{"b", "d"}, "L1"},
		{"rolling upgrade adds a pipeline: only the new members run it",
			[]Member{runs("old1", 0, "x"), runs("new1", 5, "x", "z")}, "z", nil, []string{"new1"}, "L1"},
		{"rolling upgrade adds a pipeline: the old pipeline is shared by all",
			[]Member{runs("old1", 0, "x"), runs("new1", 5, "x", "z")}, "x", nil, []string{"new1", "old1"}, "L1"},
		{"layout changed: the earliest member's layout wins",
			[]Member{runs("b", 0, "x@old"), runs("a", 9, "x@new"), runs("c", 1, "x@old")}, "x", nil, []string{"b", "c"}, "old"},
		{"layout changed: ties on start broken by id",
			[]Member{runs("b", 0, "x@B"), runs("a", 0, "x@A")}, "x", nil, []string{"a"}, "A"},
		{"legacy member counts for the pipelines whose records it owns",
			[]Member{runs("a", 0, "x"), legacy("old")}, "x", []string{"old", "a", ""}, []string{"a", "old"}, "L1"},
		{"legacy member owning nothing of the pipeline is left out",
			[]Member{runs("a", 0, "x", "z"), legacy("old")}, "z", []string{"", "a"}, []string{"a"}, "L1"},
		{"nobody runs it", []Member{runs("a", 0, "x")}, "q", nil, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, layout := Candidates(c.alive, c.pipeline, c.owners)
			if !slices.Equal(got, c.want) || layout != c.wantLayout {
				t.Errorf("candidates = %v (layout %q), want %v (layout %q)", got, layout, c.want, c.wantLayout)
			}
			// Every candidate computes the same set from the same view.
			rev := slices.Clone(c.alive)
			slices.Reverse(rev)
			if again, _ := Candidates(rev, c.pipeline, c.owners); !slices.Equal(again, got) {
				t.Errorf("candidates depend on the order of members: %v vs %v", again, got)
			}
		})
	}
	// Two deployments never assign a partition to a member of the other.
	alive := []Member{runs("a", 0, "x"), runs("b", 1, "y"), runs("c", 2, "x"), runs("d", 3, "y")}
	for _, pipe := range []string{"x", "y"} {
		owners := make([]string, 8)
		cands, _ := Candidates(alive, pipe, owners)
		for n, m := range AssignTargets(cands, pipe, owners) {
			if l, ok := alive[slices.IndexFunc(alive, func(x Member) bool { return x.ID == m })].Runs(pipe); !ok || l == "" {
				t.Errorf("pipeline %s partition %d assigned to %s, which does not run it", pipe, n, m)
			}
		}
	}
}

// TestBackdate is the table of liveness from the bucket's own timestamps:
// a watcher's initial value is as old, on this member's clock, as it is
// behind the latest server timestamp of the batch, whatever the clock
// skew between server and member.
func TestBackdate(t *testing.T) {
	now := time.Unix(5000, 0)    // this member's clock
	server := time.Unix(9000, 0) // the server's clock, skewed by more than an hour
	cases := []struct {
		name         string
		ref, created time.Time
		want         time.Time
	}{
		{"own heartbeat, the latest", server, server, now},
		{"a live member's, 1s older", server, server.Add(-time.Second), now.Add(-time.Second)},
		{"a crashed member's, 12s older", server, server.Add(-12 * time.Second), now.Add(-12 * time.Second)},
		{"no reference: dated now", time.Time{}, server, now},
		{"no timestamp: dated now", server, time.Time{}, now},
	}
	for _, c := range cases {
		if got := Backdate(now, c.ref, c.created); !got.Equal(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got.Sub(now), c.want.Sub(now))
		}
	}
	// A newcomer judges a member dead (lease_ttl 10s) from its first view,
	// and a dead owner's record ready for takeover as soon as it is
	// lease_ttl old on the server's clock, not lease_ttl after joining.
	const ttl = 10 * time.Second
	ghost := Backdate(now, server, server.Add(-12*time.Second))
	if now.Sub(ghost) < ttl {
		t.Errorf("a heartbeat 12s old counts alive to a newcomer with lease_ttl %v", ttl)
	}
	rec := View{Exists: true, Rec: Record{Owner: "dead", Epoch: 2}, Rev: 3, SeenAt: Backdate(now, server, server.Add(-9*time.Second))}
	if got := Decide("new", "new", rec, false, now.Add(time.Second), ttl); got != Take {
		t.Errorf("record unrenewed for 9s on the server, 1s after joining: %v, want take", got)
	}
}
