package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestRunProcessMemory: "kpcastream run" with process_memory and an
// external server keeps Go's soft memory limit at the target less the
// file pages it has resident, at least the floor, and shows the target,
// the limit, the file pages and the RSS on /metrics.
func TestRunProcessMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc/self/status (%v): run sets the limit once, without the file pages", err)
	}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Cleanup(func() { os.Setenv("GOMEMLIMIT", v) })
		if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
			t.Fatal(err)
		}
	}
	_, url := natstest.RunServer(t)
	dir := t.TempDir()
	httpPort := freePort(t)
	const target = 1 << 30 // 64 MiB of budget: floor 160 MiB, ceiling 464 MiB
	cfg := fmt.Sprintf(`
nats: {url: %q}
data_dir: %s
http: {metrics_addr: "127.0.0.1:%d"}
log: {format: json, level: info}
process_memory: %d
workers: 1
pipelines:
  - name: pm
    input: {stream: PM, subject: "pm.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
    memory_budget: 67108864
`, url, filepath.Join(dir, "data"), httpPort, target)
	cfgFile := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runErr syncBuffer
	code := make(chan int, 1)
	go func() { code <- runMain(ctx, []string{"run", "--config", cfgFile}, &syncBuffer{}, &runErr) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	deadline := time.Now().Add(15 * time.Second)
	var metrics map[string]float64
	for {
		if m, err := scrape(base + "/metrics"); err == nil && m["kpcastream_process_memory_target_bytes"] > 0 {
			metrics = m
			break
		}
		select {
		case c := <-code:
			t.Fatalf("run exited with %d:\n%s", c, runErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kpcastream_process_memory_* on /metrics after 15s:\n%s", runErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p := "kpcastream_process_memory_"
	limit, file, rss := metrics[p+"limit_bytes"], metrics[p+"file_bytes"], metrics[p+"rss_bytes"]
	const floor = 64<<20*3/2 + 64<<20
	if metrics[p+"target_bytes"] != target || file < 1<<20 || rss <= file || limit < floor || limit > target-file/2 {
		t.Errorf("/metrics %v: want target %d, file pages over 1 MiB, an RSS above them, a limit in [%d, target − file pages]", metrics, target, floor)
	}
	if got := debug.SetMemoryLimit(-1); got < floor || got > target-int64(file)/2 {
		t.Errorf("Go's soft limit %d: want the target less the file pages (%0.f), at least %d", got, file, floor)
	}
	if !strings.Contains(runErr.String(), "process_memory: Go's soft memory limit kept at the target less the file pages resident") {
		t.Errorf("the log does not say process_memory's limit:\n%s", runErr.String())
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

// scrape reads the unlabelled samples of a Prometheus text page.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// TestRunStoppedWhileStarting: a "kpcastream run" stopped (SIGTERM) while
// it is still starting exits with status 0 and says so, like one stopped
// after its start, instead of failing with the call the stop cancelled
// (TestFleetStop under load: "snapshot: open object bucket …: context
// canceled", exit status 1).
func TestRunStoppedWhileStarting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	_, url := natstest.RunServer(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
nats: {url: %q}
data_dir: %s
http: {metrics_addr: "off"}
log: {format: json, level: info}
pipelines:
  - name: stopped
    input: {stream: STOPPED, subject: "stopped.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
`, url, filepath.Join(dir, "data"))
	cfgFile := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the stop came before the start finished
	var stdout, stderr strings.Builder
	if code := runMain(ctx, []string{"run", "--config", cfgFile}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped while starting") {
		t.Errorf("stderr does not say it stopped while starting:\n%s", stderr.String())
	}
}
