package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestBenchCommand checks "kpcastream bench" through runMain: -h lists the
// flags of issue 20 and exits 0, a bad flag value exits 2 naming it, and
// (not under -short) a raw-baseline run with tiny counts, directly and
// over a 1 ms round trip, exits 0 with both rows in its summary.
func TestBenchCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"bench", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench -h: exit %d, want 0\n%s", code, stderr.String())
	}
	for _, f := range []string{"-mode", "-rtt", "-output", "-duration", "-window", "-nats-url", "-core", "-count"} {
		if !strings.Contains(stdout.String(), "  "+f+" ") && !strings.Contains(stdout.String(), "  "+f+"\n") {
			t.Errorf("bench -h does not list %s:\n%s", f, stdout.String())
		}
	}
	stderr.Reset()
	if code := runMain(context.Background(), []string{"bench", "--rtt", "later"}, &stdout, &stderr); code != 2 {
		t.Errorf("bench --rtt later: exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "--rtt") {
		t.Errorf("bench --rtt later: stderr does not name --rtt:\n%s", stderr.String())
	}
	if testing.Short() {
		return
	}
	stdout.Reset()
	stderr.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"bench", "--mode", "raw", "--count", "200", "--budget", "4", "--dim", "3", "--components", "2",
		"--storage", "memory", "--progress", "0", "--duration", "0"}
	if code := runMain(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("%v: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", args, code, stdout.String(), stderr.String())
	}
	for _, row := range []string{"\nraw ", "\nraw@1ms "} {
		if !strings.Contains(stdout.String(), row) {
			t.Errorf("no %q row in\n%s", strings.TrimSpace(row), stdout.String())
		}
	}
}
