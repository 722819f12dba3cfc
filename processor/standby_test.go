package processor

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestStandbyVisible: a member that owns no partition (a hot standby: one
// partition, two members) answers the micro discovery ($SRV.PING, what
// "nats micro ls" sends) like the owner, with its member id.
func TestStandbyVisible(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("standby")
	cfg := Config{Pipelines: []PipelineConfig{pc}, LeaseTTL: time.Second}
	member := func() *running {
		nc, js := natstest.Connect(t, e.url)
		return e.startOn(t, cfg, newPCA, nc, js, nil)
	}
	a, b := member(), member()
	owned := func(r *running) int {
		n := 0
		for _, s := range r.p.Stats() {
			n += len(s.Partitions)
		}
		return n
	}
	waitFor(t, 10*time.Second, "one owner", func() bool { return owned(a)+owned(b) == 1 })
	// Ping until both answer (a member's service starts as it becomes a
	// member, which may follow the other's take by a moment), at most 10 s.
	members := map[string]bool{}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !(members[a.p.ID()] && members[b.p.ID()]); {
		inbox := e.nc.NewRespInbox()
		sub, err := e.nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.nc.PublishRequest("$SRV.PING.kpcastream", inbox, nil); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := sub.NextMsg(500 * time.Millisecond)
			if err != nil {
				break
			}
			var ping struct {
				Metadata map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(m.Data, &ping); err != nil {
				t.Fatal(err)
			}
			members[ping.Metadata["member"]] = true
		}
		_ = sub.Unsubscribe()
	}
	if !members[a.p.ID()] || !members[b.p.ID()] {
		t.Errorf("$SRV.PING answered by %v, want both %s and %s (owner and standby)", members, a.p.ID(), b.p.ID())
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}
