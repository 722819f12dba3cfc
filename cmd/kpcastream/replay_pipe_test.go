package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain runs the tests, or with KPCASTREAM_TEST_ARGS set (command-line
// arguments separated by newlines) the command itself as main does, with
// this process's stdout and stderr: TestReplayBrokenPipe's subprocess.
func TestMain(m *testing.M) {
	if args := os.Getenv("KPCASTREAM_TEST_ARGS"); args != "" {
		os.Exit(runMain(context.Background(), strings.Split(args, "\n"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestReplayBrokenPipe (issue 33 #13): "replay … 2>&1 | head -2" killed
// replay with SIGPIPE at its third line of progress, before model.json
// was written. A replay's product is its files: it finishes them when
// the reader of its messages has gone.
func TestReplayBrokenPipe(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("needs sh and head:", err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	args := []string{"replay", "--in", filepath.Join("..", "..", "testdata", "data", "drift_stream.csv"), "--drop", "phase",
		"--budget", "50", "--components", "3", "--progress", "1ns", "--model-out", model}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `"$0" 2>&1 | head -2`, os.Args[0])
	cmd.Env = append(os.Environ(), "KPCASTREAM_TEST_ARGS="+strings.Join(args, "\n"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(string(out), "\n"); n != 2 || !strings.Contains(string(out), "replay: ") {
		t.Errorf("head -2 printed %q, want two progress lines", out)
	}
	// sh waited for both ends of the pipe: the replay has ended.
	if _, err := os.Stat(model); err != nil {
		t.Errorf("no model.json: the broken pipe stopped the replay (%v)", err)
	}
}
