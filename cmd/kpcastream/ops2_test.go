package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/kpcastream/kpcastream/internal/buildinfo"
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

// TestMicroInfo: what "nats micro info kpcastream" shows: the binary's
// version, each endpoint once (the member's own ones named member-<op>,
// on their old subjects) with a small metadata of its own, and no stats
// JSON repeated under every endpoint (issue 23, item 9).
func TestMicroInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	w := startRun(t, opsConfig(t, dir, natsPort, httpPort, 4, "json"), httpPort)
	defer w.stop(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var info micro.Info
	m, err := nc.Request("$SRV.INFO.kpcastream", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if want := buildinfo.Read().SemVer(); info.Version != want || info.Metadata["build"] != buildinfo.Read().Version {
		t.Errorf("service version %q (build %q), want the binary's %q", info.Version, info.Metadata["build"], want)
	}
	member := info.Metadata["member"]
	names := map[string]string{}
	for _, ep := range info.Endpoints {
		if prev, dup := names[ep.Name]; dup {
			t.Errorf("endpoint %q listed twice (%s, %s)", ep.Name, prev, ep.Subject)
		}
		names[ep.Name] = ep.Subject
		md, _ := json.Marshal(ep.Metadata)
		if ep.Metadata["description"] == "" || len(md) > 400 {
			t.Errorf("endpoint %s: metadata %s, want a short description of its own", ep.Name, md)
		}
	}
	for name, subj := range map[string]string{"stats": "kpcastream.stats", "model": "kpcastream.model", "member-stats": "kpcastream.i." + member + ".stats",
		"member-reset": "kpcastream.i." + member + ".reset", "accept": "kpcastream.accept"} {
		if names[name] != subj {
			t.Errorf("endpoint %s on %q, want %q (endpoints %v)", name, names[name], subj, names)
		}
	}
	m, err = nc.Request("$SRV.STATS.kpcastream", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		t.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		if len(ep.Data) > 0 && string(ep.Data) != "null" {
			t.Errorf("endpoint %s carries stats data %.80s…", ep.Name, ep.Data)
		}
	}
	// The member's endpoints still answer on their subjects.
	if m, err := nc.Request("kpcastream.i."+member+".stats", nil, 5*time.Second); err != nil || !strings.Contains(string(m.Data), "ops") {
		t.Errorf("member stats: %v %v", m, err)
	}
}
