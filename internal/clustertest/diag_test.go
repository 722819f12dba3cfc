package clustertest_test

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// diagnose logs, for a failure, what each running node knows of
// JetStream (its meta leader; each stream's and consumer's leader and
// replicas; its unhealthy assets; its raft groups without a leader or
// catching up), the state of each client connection, each worker's
// info-level log since since (its warnings are in the test log already),
// and the stacks of the goroutines running product code.
func diagnose(t *testing.T, c *cluster, conns map[string]*nats.Conn, ws []*worker, since time.Time) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "diagnosis at %s\n", time.Now().UTC().Format("15:04:05.000"))
	for _, n := range c.nodes {
		if n.s == nil {
			fmt.Fprintf(&b, "node %s: down\n", n.name)
			continue
		}
		nodeState(&b, n)
	}
	names := make([]string, 0, len(conns))
	for name := range conns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		nc := conns[name]
		fmt.Fprintf(&b, "client %s: %v on %q, reconnects %d, last error %v\n", name, nc.Status(), nc.ConnectedUrlRedacted(), nc.Reconnects, nc.LastError())
	}
	for _, w := range ws {
		fmt.Fprintf(&b, "client %s: %v on %q, reconnects %d, last error %v\n", w.name, w.nc.Status(), w.nc.ConnectedUrlRedacted(), w.nc.Reconnects, w.nc.LastError())
		for _, e := range w.logs.All() {
			if e.Level != zap.InfoLevel || e.Time.Before(since) {
				continue
			}
			fmt.Fprintf(&b, "  %s %s %s %v\n", w.name, e.Time.UTC().Format("15:04:05.000"), e.Message, e.ContextMap())
		}
	}
	t.Log(b.String())

	// The goroutines that run product code (the servers' are many, and
	// not suspects until the above says so).
	var all bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&all, 2)
	var ours []string
	for _, g := range strings.Split(all.String(), "\n\n") {
		if strings.Contains(g, "kpcastream/kpcastream/processor") || strings.Contains(g, "kpcastream/kpcastream/snapshot") {
			ours = append(ours, g)
		}
	}
	t.Logf("%d goroutines of product code:\n%s", len(ours), strings.Join(ours, "\n\n"))
}

// nodeState writes what node n knows of JetStream.
func nodeState(b *strings.Builder, n *node) {
	s := n.s
	fmt.Fprintf(b, "node %s: running, meta leader %v, current %v\n", n.name, s.JetStreamIsLeader(), s.JetStreamIsCurrent())
	js, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true, RaftGroups: true})
	if err != nil {
		fmt.Fprintf(b, "  jsz: %v\n", err)
		return
	}
	if js.Meta != nil {
		fmt.Fprintf(b, "  meta: leader %q, size %d, pending %d, pending requests %d\n", js.Meta.Leader, js.Meta.Size, js.Meta.Pending, js.Meta.PendingRequests)
	}
	groups := map[string]string{} // raft group → stream or consumer
	for _, a := range js.AccountDetails {
		for _, sd := range a.Streams {
			groups[sd.RaftGroup] = "stream " + sd.Name
			leader := ""
			var reps []string
			if sd.Cluster != nil {
				leader = sd.Cluster.Leader
				for _, r := range sd.Cluster.Replicas {
					reps = append(reps, fmt.Sprintf("%s(current %v, offline %v, active %v, lag %d)", r.Name, r.Current, r.Offline, r.Active.Round(time.Millisecond), r.Lag))
				}
			}
			fmt.Fprintf(b, "  stream %s: leader %q, msgs %d, last %d, replicas %s\n", sd.Name, leader, sd.State.Msgs, sd.State.LastSeq, strings.Join(reps, " "))
			for _, rg := range sd.ConsumerRaftGroups {
				groups[rg.RaftGroup] = "consumer " + sd.Name + "/" + rg.Name
			}
			for _, ci := range sd.Consumer {
				leader := ""
				if ci.Cluster != nil {
					leader = ci.Cluster.Leader
				}
				fmt.Fprintf(b, "    consumer %s: leader %q, delivered %d, ack floor %d, pending %d, ack pending %d, waiting %d\n",
					ci.Name, leader, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.NumWaiting)
			}
		}
	}
	if h := s.Healthz(&server.HealthzOptions{Details: true}); h != nil && (h.Error != "" || len(h.Errors) > 0) {
		fmt.Fprintf(b, "  healthz: %s %s\n", h.Status, h.Error)
		for _, e := range h.Errors {
			fmt.Fprintf(b, "    %s %s: %s\n", e.Stream, e.Consumer, e.Error)
		}
	}
	rz := s.Raftz(&server.RaftzOptions{})
	if rz == nil {
		return
	}
	for acc, gs := range *rz {
		for id, g := range gs {
			if g.Leader != "" && !g.CatchingUp && g.Committed == g.Applied {
				continue
			}
			what := groups[id]
			if what == "" {
				what = acc
			}
			fmt.Fprintf(b, "  raft %s (%s): state %s, leader %q, term %d, committed %d, applied %d, catching up %v, proposals %d, entries %d, apply %d\n",
				id, what, g.State, g.Leader, g.Term, g.Committed, g.Applied, g.CatchingUp, g.IPQPropLen, g.IPQEntryLen, g.IPQApplyLen)
		}
	}
}
