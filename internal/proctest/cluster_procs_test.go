package proctest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Three nats-server processes as one JetStream cluster on loopback, each
// with a store in a temporary directory, that a test can SIGKILL and
// start again on the same store (TestClusterNodeLoss).

var natsProgram = &program{env: "KPCASTREAM_NATS_SERVER", name: "nats-server", pkg: "github.com/nats-io/nats-server/v2"}

// natsServerBinary returns a nats-server executable: the one named by
// KPCASTREAM_NATS_SERVER (a machine without Go), else one built once from
// the module cache's nats-server (the version go.mod requires).
func natsServerBinary(t testing.TB) string { return natsProgram.get(t) }

// natsNode is one server of a natsCluster.
type natsNode struct {
	name              string
	port, route, http int
	conf, log         string
	cmd               *exec.Cmd
	done              chan struct{} // closed when cmd has exited
}

// natsCluster is three nats-server processes clustered over loopback.
type natsCluster struct {
	t     testing.TB
	bin   string
	nodes []*natsNode
}

// freePorts returns n TCP ports free on loopback right now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// startNATSCluster starts three servers n0..n2, logging into logDir, and
// waits until JetStream answers on each.
func startNATSCluster(t testing.TB, logDir string) *natsCluster {
	t.Helper()
	c := &natsCluster{t: t, bin: natsServerBinary(t)}
	ports := freePorts(t, 9)
	dir := t.TempDir()
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	for i := range 3 {
		n := &natsNode{name: fmt.Sprintf("n%d", i), port: ports[i], route: ports[3+i], http: ports[6+i],
			conf: filepath.Join(dir, fmt.Sprintf("n%d.conf", i)), log: filepath.Join(logDir, fmt.Sprintf("n%d.log", i))}
		store := filepath.Join(dir, n.name)
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster {
  name: nodeloss
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, n.name, n.port, n.http, store, n.route, strings.Join(routes, ", "))
		if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	for i := range c.nodes {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.kill(i)
		}
	})
	for i := range c.nodes {
		c.waitJetStream(i, 60*time.Second)
	}
	return c
}

// start execs node i on its store (again, after kill).
func (c *natsCluster) start(i int) {
	n := c.nodes[i]
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	n.cmd = exec.Command(c.bin, "-c", n.conf)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}(n.cmd, n.done)
}

// kill SIGKILLs node i and waits for it to exit (nothing if it is down).
func (c *natsCluster) kill(i int) {
	n := c.nodes[i]
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

func (c *natsCluster) url(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].port) }

// urls is every server's URL, comma-separated.
func (c *natsCluster) urls() string {
	var us []string
	for i := range c.nodes {
		us = append(us, c.url(i))
	}
	return strings.Join(us, ",")
}

// index returns the index of the server called name, or -1.
func (c *natsCluster) index(name string) int {
	for i, n := range c.nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// waitJetStream waits until node i answers a JetStream account request.
func (c *natsCluster) waitJetStream(i int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nc, err := nats.Connect(c.url(i), nats.Timeout(time.Second))
		if err == nil {
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			nc.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nats-server %s: JetStream not answering after %v: %v", c.nodes[i].name, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metaLeader returns the name of the JetStream meta leader as node i's
// monitoring endpoint reports it ("" when unknown).
func (c *natsCluster) metaLeader(i int) string {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", c.nodes[i].http))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Meta struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return ""
	}
	return v.Meta.Leader
}

// connect connects to the servers listed (each reconnects forever).
func connectCluster(t testing.TB, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.Name("proctest"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// leaderOf returns the server name leading stream name ("" when unknown).
func leaderOf(js jetstream.JetStream, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// stepOff asks stream name's leader to step down until another server
// than avoid leads it (a few tries); it returns the leader after.
func stepOff(nc *nats.Conn, js jetstream.JetStream, name, avoid string) string {
	for range 5 {
		l := leaderOf(js, name)
		if l != avoid && l != "" {
			return l
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+name, nil, 3*time.Second)
		time.Sleep(500 * time.Millisecond)
	}
	return leaderOf(js, name)
}
