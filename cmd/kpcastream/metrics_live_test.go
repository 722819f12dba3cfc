package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"
)

const (
	dashboardFile = "../../deploy/grafana/kpcastream-dashboard.json"
	rulesFile     = "../../deploy/prometheus/kpcastream-rules.yaml"
)

// promtool returns the path of Prometheus' promtool. It skips the test when
// promtool is not installed, except under CI=true (.ci/run installs it),
// where a missing promtool fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool not found under CI=true (.ci/run installs Debian's prometheus package): %v", err)
		}
		t.Skipf("promtool not installed (apt-get install prometheus); CI runs this check: %v", err)
	}
	return p
}

// liveMetrics starts "kpcastream run" with its embedded server, publishes
// 40 good messages and one of the wrong dimension, waits until they are
// handled and returns the text of /metrics.
func liveMetrics(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfg := fmt.Sprintf(`
embedded: {port: %d}
data_dir: %s
http: {metrics_addr: "127.0.0.1:%d"}
log: {format: json, level: error}
workers: 1
pipelines:
  - name: live
    input: {stream: LIVE, subject: "live.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
    output: {subject: "live.{key}.out"}
    snapshot: {every_messages: 10}
`, natsPort, filepath.Join(dir, "data"), httpPort)
	cfgFile := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr syncBuffer
	code := make(chan int, 1)
	go func() { code <- runMain(ctx, []string{"run", "--config", cfgFile}, &bytes.Buffer{}, &runErr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-code:
		case <-time.After(30 * time.Second):
			t.Error("run did not stop 30s after cancel")
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			select {
			case c := <-code:
				t.Fatalf("run exited with %d:\n%s", c, runErr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 20s:\n%s", what, runErr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("ready", func() bool { c, _ := get("/readyz"); return c == 200 })
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range 40 {
		msg := fmt.Sprintf(`{"x":[%g,%g,%g],"id":"r%d"}`, float64(i%7)/7, float64(i%5)/5, float64(i%3)/3, i)
		if err := nc.Publish(fmt.Sprintf("live.k%d.in", i%2), []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish("live.k0.in", []byte(`{"x":[1,2]}`)); err != nil { // wrong dimension: dead-lettered
		t.Fatal(err)
	}
	var body string
	waitUntil("41 messages handled", func() bool {
		_, body = get("/metrics")
		return strings.Contains(body, `kpcastream_dead_letters_total{pipeline="live",reason="dimension"} 1`) &&
			regexp.MustCompile(`kpcastream_outputs_total\{pipeline="live"\} [1-9]`).MatchString(body) &&
			regexp.MustCompile(`kpcastream_snapshot_duration_seconds_count\{pipeline="live"\} [1-9]`).MatchString(body)
	})
	return body
}

// families returns the metric families of a text exposition by name, with
// their types.
func families(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// queried returns every kpcastream_ metric name in the expressions of the
// dashboard and the alert rules.
func queried(t *testing.T) map[string][]string {
	t.Helper()
	var exprs []struct{ where, expr string }
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, struct{ where, expr string }{"dashboard panel " + p.Title, tg.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		if b, err := json.Marshal(v.Query); err == nil {
			exprs = append(exprs, struct{ where, expr string }{"dashboard variable " + v.Name, string(b)})
		}
	}
	raw, err = os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Record, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, struct{ where, expr string }{"rule " + r.Alert + r.Record, r.Expr})
		}
	}
	names := map[string][]string{}
	re := regexp.MustCompile(`\bkpcastream_[a-zA-Z0-9_]+`)
	for _, e := range exprs {
		for _, n := range re.FindAllString(e.expr, -1) {
			names[n] = append(names[n], e.where)
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d metrics queried by the dashboard and rules: %v", len(names), names)
	}
	return names
}

// TestLiveMetrics scrapes a running pipeline that has processed messages
// and dead-lettered one: promtool check metrics finds no problem; every
// metric the Grafana dashboard and the alert rules query exists (so a
// renamed metric cannot silently break them); promtool check rules accepts
// the rules.
func TestLiveMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	body := liveMetrics(t)
	fams := families(body)
	var missing []string
	for name, where := range queried(t) {
		if _, ok := fams[name]; ok {
			continue
		}
		if base, ok := strings.CutSuffix(name, "_bucket"); ok && fams[base] == "histogram" {
			continue
		}
		if base, ok := strings.CutSuffix(name, "_sum"); ok && fams[base] == "histogram" {
			continue
		}
		if base, ok := strings.CutSuffix(name, "_count"); ok && fams[base] == "histogram" {
			continue
		}
		missing = append(missing, fmt.Sprintf("%s (in %s)", name, strings.Join(where, ", ")))
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("queried but not exposed: %s", m)
	}
	if !strings.Contains(body, "kpcastream_build_info{") {
		t.Error("no kpcastream_build_info")
	}

	t.Run("promtool", func(t *testing.T) {
		pt := promtool(t)
		cmd := exec.Command(pt, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
		if out, err := exec.Command(pt, "check", "rules", rulesFile).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
		// The dashboard's queries, with its variables filled in, as
		// recording rules: promtool parses each one.
		var recs []map[string]string
		for i, e := range dashboardExprs(t) {
			e = strings.NewReplacer("$pipeline", ".*", "$__rate_interval", "5m").Replace(e)
			recs = append(recs, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", i), "expr": e})
		}
		b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recs}}})
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(pt, "check", "rules", f).CombinedOutput(); err != nil {
			t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
		}
	})
}

// dashboardExprs returns the PromQL of every panel of the dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct{ Targets []struct{ Expr string } }
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}
