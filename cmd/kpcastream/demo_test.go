package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDemo runs the README's first command (bounded, on a free port) and
// checks that projections come out within seconds, a status line per key
// and the live page's address are printed, and nothing is dead-lettered.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded NATS server")
	}
	code, stdout, stderr := runCmd(t, "demo", "--duration", "6s", "--port", "-1", "--rate", "500", "--drift-every", "3s")
	if code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "sensor-0: explained") || !strings.Contains(stdout, "sensor-1: explained") || !strings.Contains(stdout, "eig ") {
		t.Errorf("no status line of each key with explained variance and eigenvalues:\n%s", stdout)
	}
	if !regexp.MustCompile(`live page http://127\.0\.0\.1:\d+/ui/`).MatchString(stdout) {
		t.Errorf("the demo did not print its live page's address:\n%s", stdout)
	}
	m := regexp.MustCompile(`published (\d+), projected (\d+), dead-lettered (\d+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no summary line:\n%s", stdout)
	}
	pub, _ := strconv.Atoi(m[1])
	proj, _ := strconv.Atoi(m[2])
	if pub < 1000 || proj < pub/2 || m[3] != "0" {
		t.Errorf("published %d, projected %d, dead-lettered %s: want ≥ 1000 published, most projected, none dead-lettered", pub, proj, m[3])
	}
}
