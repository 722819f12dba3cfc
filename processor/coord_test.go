package processor

import (
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// TestMemberFrom checks the heartbeat format: the pipelines a member
// announces, and a heartbeat of an older version (no "pipelines") read as
// a legacy member.
func TestMemberFrom(t *testing.T) {
	m := memberFrom("a", []byte(`{"id":"a","started":"2026-01-02T03:04:05Z","pipelines":[{"name":"x","partitions":4,"layout":"f00"}]}`))
	if m.Legacy || len(m.Pipelines) != 1 || m.Pipelines[0] != (ownership.MemberPipeline{Name: "x", Partitions: 4, Layout: "f00"}) || m.Started.Year() != 2026 {
		t.Errorf("new heartbeat read as %+v", m)
	}
	if m := memberFrom("b", []byte(`{"id":"b","host":"h","pid":1,"started":"2026-01-02T03:04:05Z","renewed":"2026-01-02T03:04:05Z"}`)); !m.Legacy {
		t.Errorf("heartbeat without pipelines read as %+v, want legacy", m)
	}
	if m := memberFrom("c", []byte(`{"pipelines":[]}`)); m.Legacy {
		t.Errorf("heartbeat with an empty pipeline list read as legacy: %+v", m)
	}
	if m := memberFrom("d", []byte(`not json`)); !m.Legacy || m.ID != "d" {
		t.Errorf("unreadable heartbeat read as %+v, want legacy d", m)
	}
	a, b := pipelineConfig("x"), pipelineConfig("x")
	b.Partitions = 3
	if layoutOf(a) == layoutOf(b) {
		t.Error("layouts with different partition counts are equal")
	}
	if layoutOf(a) != layoutOf(pipelineConfig("x")) {
		t.Error("layout of one config is not stable")
	}
}

// TestPullTiming checks that pull heartbeats and expiries fit nats.go's
// limits and that a lost pull is issued again within lease_ttl.
func TestPullTiming(t *testing.T) {
	for _, ttl := range []time.Duration{30 * time.Millisecond, 600 * time.Millisecond, 3 * time.Second, 10 * time.Second, time.Minute, time.Hour} {
		hb, exp := pullTiming(ttl)
		if hb < 500*time.Millisecond || hb > 30*time.Second || exp < time.Second || hb > exp/2 {
			t.Errorf("lease_ttl %v: heartbeat %v, expiry %v outside nats.go's limits", ttl, hb, exp)
		}
		if repull := 2 * hb; repull > max(ttl/2, time.Second) {
			t.Errorf("lease_ttl %v: a lost pull is issued again after %v, want ≤ max(lease_ttl/2, 1s)", ttl, repull)
		}
	}
	h := &pullHealth{window: time.Second, gap: 300 * time.Millisecond}
	t0 := time.Unix(0, 0)
	steps := []struct {
		at        time.Duration
		delivered bool
		want      bool
	}{
		{0, false, false},
		{250 * time.Millisecond, false, false},
		{500 * time.Millisecond, false, false},
		{900 * time.Millisecond, false, false}, // gap 400ms > 300ms: a new streak
		{1100 * time.Millisecond, false, false},
		{1400 * time.Millisecond, false, false},
		{1700 * time.Millisecond, false, false},
		{1900 * time.Millisecond, false, true}, // a streak of 1s
		{2000 * time.Millisecond, true, false}, // a delivery ends it
		{2100 * time.Millisecond, false, false},
	}
	for _, s := range steps {
		if s.delivered {
			h.delivered()
			continue
		}
		if got := h.failed(t0.Add(s.at)); got != s.want {
			t.Errorf("failure at %v: failed = %v, want %v", s.at, got, s.want)
		}
	}
}

// TestPullHealthLostAfterDelivery: a consumer that has delivered is given
// up after a streak of lost (it was lost with its server), one that never
// delivered only after window (it may still be starting).
func TestPullHealthLostAfterDelivery(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fresh := &pullHealth{window: 3 * time.Second, lost: 1500 * time.Millisecond, gap: 2250 * time.Millisecond}
	for _, ms := range []int{0, 1500, 1600} {
		if fresh.failed(at(ms)) {
			t.Errorf("never delivered: given up at %d ms, want after the 3 s window", ms)
		}
	}
	if !fresh.failed(at(3000)) {
		t.Error("never delivered: not given up after a streak of 3 s")
	}
	h := &pullHealth{window: 3 * time.Second, lost: 1500 * time.Millisecond, gap: 2250 * time.Millisecond}
	h.delivered()
	if h.failed(at(0)) || h.failed(at(1400)) {
		t.Error("delivered: given up before a streak of 1.5 s")
	}
	if !h.failed(at(1500)) {
		t.Error("delivered: not given up after a streak of 1.5 s")
	}
	h.delivered()
	if h.failed(at(1600)) {
		t.Error("a delivery did not end the streak")
	}
}
