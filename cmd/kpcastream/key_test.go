package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kpcastream/kpcastream/codec"
)

// TestKeyCmd: "kpcastream key show|accept|reset" against a running worker
// (issue 33 item 2): the model summary and export, accept and reset
// through the owner, with the flags or the pipeline and key as arguments,
// and an unknown key or no worker said plainly.
func TestKeyCmd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := filepath.Join(dir, "kpcastream.yaml")
	cfg := fmt.Sprintf(`
embedded: {port: %d}
data_dir: %s
http: {metrics_addr: "127.0.0.1:%d"}
log: {format: json, level: warn}
workers: 1
pipelines:
  - name: ops
    input: {stream: OPS, subject: "ops.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
    monitor: {warmup: 32}
`, natsPort, filepath.Join(dir, "data"), httpPort)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startRun(t, cfgFile, httpPort)
	defer w.stop(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	warm(t, nc, "s1", 60, codec.JSON)

	var out, errOut string
	var code int
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, out, errOut = runCmd(t, "key", "show", "--config", cfgFile, "--key", "s1")
		if code == 0 && strings.Contains(out, "seen         60") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"pipeline     ops", "key          s1", "learner      ikpca", "dim          3", "components   2", "monitor      level 0.99, learn always, limits SPE "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("key show: %d, no %q:\n%s%s", code, want, out, errOut)
		}
	}
	model := filepath.Join(dir, "m.json")
	code, out, errOut = runCmd(t, "key", "show", "ops", "s1", "--config", cfgFile, "--json", "--model-out", model)
	if _, err := codec.DecodeModel([]byte(out)); code != 0 || err != nil {
		t.Errorf("key show ops s1 --json: %d %v\n%s", code, err, errOut)
	}
	if b, err := os.ReadFile(model); err != nil || !json.Valid(b) {
		t.Errorf("--model-out: %v", err)
	}
	code, out, errOut = runCmd(t, "key", "accept", "--config", cfgFile, "s1")
	if code != 0 || !strings.Contains(out, `key "s1" of pipeline ops: its current regime is accepted`) {
		t.Errorf("key accept: %d %s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "key", "reset", "--config", cfgFile, "--key", "s1")
	if code != 0 || !strings.Contains(out, `key "s1" of pipeline ops reset by its owner`) {
		t.Errorf("key reset: %d %s%s", code, out, errOut)
	}
	code, _, errOut = runCmd(t, "key", "show", "--config", cfgFile, "--key", "nope")
	if code != 1 || !strings.Contains(errOut, `pipeline ops has no learner for key "nope"`) {
		t.Errorf("key show of an unknown key: %d %s", code, errOut)
	}
	// The service's name: without --config, the default one, and a
	// name no worker serves is said so.
	code, _, errOut = runCmd(t, "key", "show", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort), "--pipeline", "ops", "--key", "s1", "--service", "other")
	if code != 1 || !strings.Contains(errOut, "no worker answers other.model") {
		t.Errorf("key show --service other: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "key", "accept", "--config", cfgFile)
	if code != 2 || !strings.Contains(errOut, "missing --key") {
		t.Errorf("key accept without a key: %d %s", code, errOut)
	}
}
