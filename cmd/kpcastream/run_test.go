package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kpcastream/kpcastream/codec"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunAndPublish starts "kpcastream run" with its embedded server, feeds
// it a CSV with "kpcastream publish", and reads the projections.
func TestRunAndPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`
embedded: {port: %d}
data_dir: %s
http: {metrics_addr: "127.0.0.1:%d"}
log: {format: json, level: warn}
workers: 1
pipelines:
  - name: dev
    input: {stream: DEV, subject: "dev.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
    output: {subject: "dev.{key}.out", stream: DEVOUT, create_stream: true}
`, natsPort, filepath.Join(dir, "data"), httpPort)
	cfgFile := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var csv strings.Builder
	csv.WriteString("id,a,b,c,label\n")
	const rows = 40
	for i := range rows {
		fmt.Fprintf(&csv, "r%d,%.3f,%.3f,%.3f,%d\n", i, float64(i%7)/7, float64(i%5)/5, float64(i%3)/3, i%2)
	}
	csvFile := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csvFile, []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runErr syncBuffer
	code := make(chan int, 1)
	go func() { code <- runMain(ctx, []string{"run", "--config", cfgFile}, &bytes.Buffer{}, &runErr) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case c := <-code:
			t.Fatalf("run exited with %d before ready:\n%s", c, runErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 15s:\n%s", runErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("dev.*.out")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	args := []string{"publish", "--subject", "dev.s1.in", "--nats-url", url, "--in", csvFile, "--drop", "label",
		"--id-column", "id", "--batch", "2", "--encoding", "json", "--rate", "2000"}
	if c := runMain(ctx, args, &out, &errOut); c != 0 {
		t.Fatalf("publish exited with %d: %s", c, errOut.String())
	}
	if got := strings.TrimSpace(out.String()); got != fmt.Sprint(rows/2) {
		t.Errorf("publish stdout: got %q, want %d messages", got, rows/2)
	}
	if !strings.Contains(errOut.String(), fmt.Sprintf("published %d messages (%d rows)", rows/2, rows)) {
		t.Errorf("progress line: %q", errOut.String())
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no projection: %v\n%s", err, runErr.String())
	}
	o, err := codec.DecodeOutput(m.Data, codec.JSON)
	if err != nil || o.Key != "s1" || len(o.Z) != 2 || !strings.HasPrefix(o.ID, "r") {
		t.Errorf("output: %+v, %v", o, err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/metrics: %d", resp.StatusCode)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("run exit code %d after cancel:\n%s", c, runErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop 30s after cancel")
	}
}

func TestRunUsage(t *testing.T) {
	var errOut bytes.Buffer
	if c := runMain(context.Background(), []string{"run"}, &bytes.Buffer{}, &errOut); c != 2 {
		t.Errorf("run without --config: exit %d, want 2", c)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("pipelines: [{name: 'x y'}]\n"), 0o600)
	errOut.Reset()
	if c := runMain(context.Background(), []string{"run", "--config", bad}, &bytes.Buffer{}, &errOut); c != 1 ||
		!strings.Contains(errOut.String(), "pipelines[0].name") || !strings.Contains(errOut.String(), "pipelines[0].input.subject") {
		t.Errorf("bad config: exit %d, stderr %q", c, errOut.String())
	}
}

// TestRunPortInUse: a busy embedded-server or metrics port is said once,
// with a hint naming how to move it (issue 33 row 8: "bind: address already
// in use" twice, no hint of KPCASTREAM_EMBEDDED_PORT or --metrics-addr).
func TestRunPortInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := held.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	write := func(natsPort int, metrics string) string {
		f := filepath.Join(dir, fmt.Sprint("c", natsPort, ".yaml"))
		cfg := fmt.Sprintf(`embedded: {port: %d}
data_dir: %s
http: {metrics_addr: %q}
log: {format: json, level: info}
pipelines:
  - name: dev
    input: {stream: DEV, subject: "dev.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
`, natsPort, filepath.Join(dir, "data"), metrics)
		if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, c := range []struct {
		name, file string
		hints      []string
	}{
		{"embedded", write(busy, "off"), []string{"KPCASTREAM_EMBEDDED_PORT=", "--nats-url nats://127.0.0.1:" + fmt.Sprint(busy)}},
		{"metrics", write(freePort(t), fmt.Sprint("127.0.0.1:", busy)), []string{"--metrics-addr 127.0.0.1:0", "KPCASTREAM_METRICS_ADDR", "--metrics-addr off"}},
	} {
		code, _, errOut := runCmd(t, "run", "--config", c.file)
		if code != 1 || strings.Count(errOut, "address already in use") != 1 {
			t.Errorf("%s port in use: exit %d, want 1 and the error once:\n%s", c.name, code, errOut)
		}
		for _, h := range c.hints {
			if !strings.Contains(errOut, h) {
				t.Errorf("%s port in use: no hint %q:\n%s", c.name, h, errOut)
			}
		}
	}
}
