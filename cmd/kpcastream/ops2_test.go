package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestRunLogStart: "run" logs the embedded server's start in one line (its
// 25-line banner at debug) and the live page's address (issue 23, item 7).
func TestRunLogStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := opsConfig(t, dir, natsPort, httpPort, 4, "json")
	w := startRun(t, cfgFile, httpPort)
	w.stop(t)
	log := w.log.String()
	for _, banner := range []string{"Starting nats-server", "JETSTREAM", "_ ___ _____", "Server is ready"} {
		if strings.Contains(log, banner) {
			t.Errorf("the nats-server banner (%q) is logged at info:\n%s", banner, log)
		}
	}
	if !strings.Contains(log, `"msg":"embedded nats-server started","url":"nats://127.0.0.1:`+fmt.Sprint(natsPort)+`"`) {
		t.Errorf("no line for the embedded server's start:\n%s", log)
	}
	if want := fmt.Sprintf(`"msg":"live page","url":"http://127.0.0.1:%d/ui/"`, httpPort); !strings.Contains(log, want) {
		t.Errorf("the live page's URL (%s) is not logged:\n%s", want, log)
	}
}

// TestNoServerHint: with the quick start's configuration and no "run", the
// client commands fail with a hint that the embedded server lives inside
// "run" (issue 23, item 8: a bare "no servers available").
func TestNoServerHint(t *testing.T) {
	// No URL from the environment or a selected nats context.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("NATS_CONTEXT", "")
	t.Setenv("NATS_URL", "")
	dir := t.TempDir()
	cfgFile := opsConfig(t, dir, freePort(t), freePort(t), 4, "json") // nothing listens on the port
	for _, args := range [][]string{
		{"snapshot", "ls", "--config", cfgFile},
		{"dlq", "ls", "--config", cfgFile},
		{"tail", "--config", cfgFile, "--count", "1"},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, "no servers available") ||
			!strings.Contains(errOut, fmt.Sprintf(`uses the embedded NATS server, which runs only while "kpcastream run --config %s" runs`, cfgFile)) ||
			!strings.Contains(errOut, "nats-server -js") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	// A URL given explicitly gets no hint about the embedded server.
	code, _, errOut := runCmd(t, "snapshot", "ls", "--config", cfgFile, "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)))
	if code != 1 || strings.Contains(errOut, "hint:") {
		t.Errorf("explicit URL: exit %d, stderr %q", code, errOut)
	}
}
