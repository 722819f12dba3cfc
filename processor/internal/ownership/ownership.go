package ownership

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the pure rules of fenced ownership: which member should
// own a partition (rendezvous hashing), and what a member does about one
// partition given what it sees in the coordination bucket. No I/O and no
// clock: the coordinator passes the time in.

// FNV32a is FNV-1a (32 bits) of s, the hash of nats-server's
// {{partition(n,…)}} subject transform: a key's partition is
// FNV32a(key) mod n, on the server and here.
func FNV32a(s string) uint32 {
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime32
	}
	return h
}

// PartitionOf returns the partition of key among n, as the input stream's
// subject transform computes it.
func PartitionOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(FNV32a(key) % uint32(n))
}

// rendezvousScore is the weight of member for partition part of pipeline:
// FNV-1a (64 bits) of the three, finished with a 64-bit mixer so that
// members whose ids share a prefix still get independent scores.
func rendezvousScore(member, pipeline string, part int) uint64 {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime64
		}
		h ^= 0xff
		h *= prime64
	}
	mix(member)
	mix(pipeline)
	mix(strconv.Itoa(part))
	// splitmix64 finaliser.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// AssignTargets returns the member each partition of pipeline should
// belong to (index = partition), given the members alive (sorted) and the
// current owner of each partition ("" when it has none or its owner is
// not alive). It balances the load — every member gets ⌊n/W⌋ or ⌈n/W⌉
// partitions — while moving as few partitions as it can: each member
// keeps the partitions it owns up to its share (those it ranks highest by
// rendezvous score first), and only the partitions left over are given,
// each to the member with room that ranks it highest. So a join moves at
// most ⌈n/W⌉ partitions (the newcomer's share) and a leave at most the
// leaver's share, ⌈n/(W+1)⌉ ≤ ⌈n/W⌉+1, and members that see the same
// bucket compute the same targets.
func AssignTargets(alive []string, pipeline string, owners []string) []string {
	n, w := len(owners), len(alive)
	target := make([]string, n)
	if w == 0 {
		return target
	}
	held := map[string][]int{}
	isAlive := map[string]bool{}
	for _, m := range alive {
		isAlive[m] = true
	}
	for p, o := range owners {
		if isAlive[o] {
			held[o] = append(held[o], p)
		}
	}
	// Shares: ⌊n/w⌋ each, one more for n mod w members, given first to
	// those holding the most (ties: smaller id), so a stable assignment
	// stays put.
	order := append([]string(nil), alive...)
	slices.SortStableFunc(order, func(a, b string) int {
		if d := len(held[b]) - len(held[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	share := map[string]int{}
	for i, m := range order {
		share[m] = n / w
		if i < n%w {
			share[m]++
		}
	}
	var free []int
	load := map[string]int{}
	for _, m := range alive {
		ps := held[m]
		slices.SortStableFunc(ps, func(a, b int) int {
			return cmpDesc(rendezvousScore(m, pipeline, a), rendezvousScore(m, pipeline, b))
		})
		for i, p := range ps {
			if i < share[m] {
				target[p] = m
				load[m]++
			} else {
				free = append(free, p)
			}
		}
	}
	for p, o := range owners {
		if !isAlive[o] {
			free = append(free, p)
		}
	}
	slices.Sort(free)
	for _, p := range free {
		best, bestScore := "", uint64(0)
		for _, m := range alive {
			if load[m] >= share[m] {
				continue
			}
			if s := rendezvousScore(m, pipeline, p); best == "" || s > bestScore {
				best, bestScore = m, s
			}
		}
		target[p] = best
		load[best]++
	}
	return target
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// Record is the value of a partition's key in the coordination
// bucket, "partitions.<pipeline>.<n>": its owner ("" once released), the
// owner's epoch (bumped by every change of owner), and the checkpoint, the
// input stream sequence from which the next owner replays. One
// compare-and-set on this key orders renewals, takeovers, releases and
// checkpoint writes.
type Record struct {
	Owner      string    `json:"owner"`
	Epoch      uint64    `json:"epoch"`
	Checkpoint uint64    `json:"checkpoint"`
	Renewed    time.Time `json:"renewed,omitzero"` // the writer's clock; informative only
}

func (r Record) Encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

func DecodeRecord(v []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("processor: partition record %q: %w", v, err)
	}
	return r, nil
}

// View is what a member knows of one partition's record.
type View struct {
	Exists bool      // the key holds a record
	Rec    Record    // valid when exists
	Rev    uint64    // its revision (0: none)
	SeenAt time.Time // when this member first saw rev (its own clock)
}

// Action is what a member does about one partition.
type Action int

const (
	None    Action = iota
	Take           // create or take over the record with epoch+1 and start the partition
	Release        // stop the running partition gracefully and release the record
	Abandon        // release a record this member owns but does not run
)

func (a Action) String() string {
	return [...]string{"none", "take", "release", "abandon"}[a]
}

// Decide returns what member self does about one partition, given the
// member the partition is assigned to (AssignTargets), the partition's
// record as self last saw it, whether self runs the partition, the time
// and the ownership TTL:
//
//   - a running partition assigned to another member is released
//     (graceful: drain, final snapshots, checkpoint);
//   - a partition with no record, or a released one, is taken by the
//     member it is assigned to;
//   - a record held by another member is taken over by the assigned member
//     only once it has not moved for ttl (its owner stopped renewing);
//   - a record naming self that self does not run (it stopped the
//     partition after failed renewals) is taken again with a new epoch, or
//     abandoned to the assigned member.
func Decide(self, want string, v View, running bool, now time.Time, ttl time.Duration) Action {
	if running {
		if want != self && want != "" {
			return Release
		}
		return None
	}
	switch {
	case !v.Exists || v.Rec.Owner == "":
		if want == self {
			return Take
		}
	case v.Rec.Owner == self:
		if want == self {
			return Take
		}
		return Abandon
	default:
		if want == self && now.Sub(v.SeenAt) >= ttl {
			return Take
		}
	}
	return None
}

// MemberPipeline is one pipeline a member runs, as its heartbeat announces
// it: the name and the layout (Layout) of its partitions.
type MemberPipeline struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Layout     string `json:"layout"`
}

// Member is a live member as the coordinator sees it: its id, when it
// started, and the pipelines its heartbeat announces. legacy marks a
// heartbeat of a version before per-pipeline membership (no "pipelines"
// field): such a member counts as running a pipeline while it owns one of
// its partition records (see Candidates).
type Member struct {
	ID        string
	Started   time.Time
	Pipelines []MemberPipeline
	Legacy    bool
}

// Runs returns the layout under which m announces pipeline, and whether it does.
func (m Member) Runs(pipeline string) (string, bool) {
	for _, p := range m.Pipelines {
		if p.Name == pipeline {
			return p.Layout, true
		}
	}
	return "", false
}

// Candidates returns the members among alive (sorted by id) that share the
// partitions of pipeline — the set AssignTargets balances over — and the
// layout they run it under. A member is a candidate when its heartbeat
// announces the pipeline with the layout of the member that has announced
// it longest (earliest started, then smallest id): in a rolling upgrade
// that changes a pipeline's partitions the new members wait, owning
// nothing, until the last member of the old layout has left, instead of
// two layouts fighting over the records. A legacy member (a heartbeat
// without the field) is a candidate of a pipeline while it owns one of
// the pipeline's records (owners), so an older version keeps what it
// runs, and is never given a partition of a pipeline it may not run (a
// pipeline added by the upgrade). Every member that sees the same
// heartbeats and records computes the same set.
func Candidates(alive []Member, pipeline string, owners []string) ([]string, string) {
	var first *Member
	for i := range alive {
		m := &alive[i]
		if _, ok := m.Runs(pipeline); !ok {
			continue
		}
		if first == nil || m.Started.Before(first.Started) || (m.Started.Equal(first.Started) && m.ID < first.ID) {
			first = m
		}
	}
	layout := ""
	if first != nil {
		layout, _ = first.Runs(pipeline)
	}
	var out []string
	for _, m := range alive {
		if l, ok := m.Runs(pipeline); ok && l == layout {
			out = append(out, m.ID)
		} else if m.Legacy && slices.Contains(owners, m.ID) {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out, layout
}

// Backdate returns when, on this member's clock (now), an entry written
// at created on the server's clock was written, given ref, the latest
// server timestamp among the same batch of entries (at least this member's
// own heartbeat, put just before its watcher started): now − (ref −
// created), and never after now. Both timestamps come from the server, so
// clock skew between members does not enter; ref is at most the server's
// time, so an age is never overestimated (a live member is never judged
// dead), only underestimated by the time since ref.
func Backdate(now, ref, created time.Time) time.Time {
	if created.IsZero() || ref.IsZero() {
		return now
	}
	return now.Add(-max(0, ref.Sub(created)))
}

// Layout is the fingerprint of a pipeline's partition layout, which
// members sharing its partitions must agree on: input stream, subject, key
// token and partition count (FNV-1a 64, hex).
func Layout(stream, subject string, keyToken, partitions int) string {
	return strconv.FormatUint(rendezvousScore(stream+"\x00"+subject, strconv.Itoa(keyToken), partitions), 16)
}

// Lease is the rule of the fence that keeps a stale owner from writing:
// a partition's owner may write while its ownership record was renewed
// less than lease_ttl/2 ago — counted from the moment the renewal was
// sent, on the owner's own monotonic clock, so a process frozen with
// SIGSTOP finds it expired as soon as it runs again — and it has not been
// revoked (the record or a snapshot moved to a newer epoch). A taker waits
// lease_ttl from when it first saw the record's last revision, which was
// written after that renewal was sent: the owner stops writing at least
// lease_ttl/2 before anyone may take over, even with the two clocks
// running 30 % apart. The first check that finds it expired revokes it for
// good, so a partition never goes on after an expiry, even if a late
// renewal lands. Pure: the caller passes the time in (processor's fence
// holds one under a lock with the process's clock; the simulation, with
// its own).
type Lease struct {
	TTL     time.Duration
	LastOK  time.Time // when the last successful renewal (or the take) was sent
	Revoked bool
}

// NewLease returns the lease of a partition taken with a write sent at granted.
func NewLease(ttl time.Duration, granted time.Time) Lease {
	return Lease{TTL: ttl, LastOK: granted}
}

// OK reports whether the owner may still write at now; an expired lease
// is revoked.
func (l *Lease) OK(now time.Time) bool {
	if l.Revoked {
		return false
	}
	if now.Sub(l.LastOK) >= l.TTL/2 {
		l.Revoked = true
		return false
	}
	return true
}

// Renewed records a successful renewal sent at sent.
func (l *Lease) Renewed(sent time.Time) {
	if sent.After(l.LastOK) {
		l.LastOK = sent
	}
}

// Revoke stops every later write.
func (l *Lease) Revoke() { l.Revoked = true }
