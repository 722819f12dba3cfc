package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestDemoClassify runs demo --classify briefly: the status lines show the
// classifier's accuracy, which is high on the two rings.
func TestDemoClassify(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded NATS server")
	}
	code, stdout, stderr := runCmd(t, "demo", "--classify", "--duration", "6s", "--port", "-1", "--rate", "500", "--drift-every", "3s")
	if code != 0 {
		t.Fatalf("demo exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	all := regexp.MustCompile(`accuracy [0-9.]+ \((\d+) predictions; ([0-9.]+) overall\)`).FindAllStringSubmatch(stdout, -1)
	if len(all) == 0 {
		t.Fatalf("no accuracy on the status lines:\n%s", stdout)
	}
	last := all[len(all)-1]
	if acc, _ := strconv.ParseFloat(last[2], 64); acc < 0.9 {
		t.Errorf("overall accuracy %v on the two rings, want ≥ 0.9:\n%s", acc, stdout)
	}
}
