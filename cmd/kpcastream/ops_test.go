package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natsembed"
	"github.com/kpcastream/kpcastream/processor"
)

// worker is a "kpcastream run" started in process by startRun.
type worker struct {
	cancel context.CancelFunc
	code   chan int
	log    *syncBuffer
}

// startRun starts "kpcastream run --config cfgFile" and waits until it is
// ready on httpPort.
func startRun(t *testing.T, cfgFile string, httpPort int, extra ...string) *worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{cancel: cancel, code: make(chan int, 1), log: &syncBuffer{}}
	go func() {
		w.code <- runMain(ctx, append([]string{"run", "--config", cfgFile}, extra...), &bytes.Buffer{}, w.log)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return w
			}
		}
		select {
		case c := <-w.code:
			cancel()
			t.Fatalf("run exited with %d before ready:\n%s", c, w.log.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("not ready after 20s:\n%s", w.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *worker) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	select {
	case c := <-w.code:
		if c != 0 {
			t.Errorf("run exit code %d:\n%s", c, w.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop 30s after cancel")
	}
}

// opsConfig writes a one-pipeline configuration (d = 3) with an embedded
// server and returns its path.
func opsConfig(t *testing.T, dir string, natsPort, httpPort, maxBatch int, outEncoding string) string {
	t.Helper()
	cfg := fmt.Sprintf(`
embedded: {port: %d}
data_dir: %s
http: {metrics_addr: "127.0.0.1:%d"}
log: {format: json, level: info}
workers: 1
pipelines:
  - name: ops
    input: {stream: OPS, subject: "ops.*.in", create_stream: true}
    learner: {kind: ikpca, dim: 3, components: 2, budget: 16, kernel: {name: rbf, gamma: 0.5}}
    output: {subject: "res.{key}", stream: OPSOUT, create_stream: true, encoding: %q}
    max_batch: %d
    snapshot: {every_messages: 5}
`, natsPort, filepath.Join(dir, "data"), httpPort, outEncoding, maxBatch)
	f := filepath.Join(dir, "kpcastream.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// warm publishes n good observations of key to the pipeline of opsConfig.
func warm(t *testing.T, nc *nats.Conn, key string, n int, enc codec.Encoding) {
	t.Helper()
	for i := range n {
		obs := []codec.Observation{{ID: fmt.Sprintf("w%d", i), X: []float64{float64(i%7) / 7, float64(i%5) / 5, float64(i%3) / 3}}}
		b, err := codec.EncodeObservations(nil, enc, obs)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("ops." + key + ".in")
		m.Data = b
		m.Header.Set("Content-Type", enc.ContentType())
		if _, err := js(t, nc).PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
}

func js(t *testing.T, nc *nats.Conn) nats.JetStreamContext {
	t.Helper()
	j, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestDLQ: bad messages are stored with their reason and listed by
// "dlq ls"; after a fix (a larger max_batch) "dlq republish --reason
// too_large --delete" sends them back to their input subject, where they
// are processed, and removes them from the dead-letter stream.
func TestDLQ(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := opsConfig(t, dir, natsPort, httpPort, 2, "json")
	w := startRun(t, cfgFile, httpPort)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	warm(t, nc, "s1", 20, codec.JSON)
	bad := []string{
		`{"batch":[{"x":[1,2,3],"id":"b1"},{"x":[1,2,2],"id":"b2"},{"x":[1,1,2],"id":"b3"}]}`, // 3 > max_batch 2
		`{"x":[1,2,3,4],"id":"wide"}`, // one value too many
	}
	for _, b := range bad {
		if _, err := js(t, nc).Publish("ops.s1.in", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	var entries []dlqEntry
	deadline := time.Now().Add(10 * time.Second)
	for len(entries) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("dead letters listed: %+v\n%s", entries, w.log.String())
		}
		time.Sleep(50 * time.Millisecond)
		code, out, errOut := runCmd(t, "dlq", "ls", "--config", cfgFile, "--json")
		if code != 0 {
			t.Fatalf("dlq ls: %d %s", code, errOut)
		}
		entries = entries[:0]
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var e dlqEntry
			if line != "" {
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("dlq ls line %q: %v", line, err)
				}
				entries = append(entries, e)
			}
		}
	}
	if e := entries[0]; e.Reason != "too_large" || e.Pipeline != "ops" || e.Key != "s1" || e.Subject != "ops.s1.in" || e.InputSeq != 21 ||
		!strings.Contains(string(e.Payload), `"b2"`) || time.Since(e.Time) > time.Minute {
		t.Errorf("first dead letter %+v", e)
	}
	if e := entries[1]; e.Reason != "dimension" || !strings.Contains(e.Detail, "more than 3 values") {
		t.Errorf("second dead letter %+v", e)
	}
	code, out, _ := runCmd(t, "dlq", "ls", "--config", cfgFile, "--reason", "dimension")
	if code != 0 || !strings.Contains(out, "1 dead letter\n") || !strings.Contains(out, "wide") {
		t.Errorf("dlq ls --reason dimension: %d\n%s", code, out)
	}
	if code, _, errOut := runCmd(t, "dlq", "republish", "--config", cfgFile); code != 1 || !strings.Contains(errOut, "select") {
		t.Errorf("republish with no selection: %d %s", code, errOut)
	}
	w.stop(t)

	// The fix: max_batch 8.
	opsConfig(t, dir, natsPort, httpPort, 8, "json")
	w = startRun(t, cfgFile, httpPort)
	defer w.stop(t)
	nc2, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	sub, err := nc2.SubscribeSync("res.s1")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "dlq", "republish", "--config", cfgFile, "--reason", "too_large", "--delete")
	if code != 0 || !strings.Contains(out, "republished 1 dead letter\n") {
		t.Fatalf("republish: %d %s %s", code, out, errOut)
	}
	got := map[string]bool{}
	for len(got) < 3 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("outputs of the republished batch: got %v: %v\n%s", got, err, w.log.String())
		}
		o, err := codec.DecodeOutput(m.Data, codec.JSON)
		if err != nil {
			t.Fatal(err)
		}
		got[o.ID] = true
	}
	if !got["b1"] || !got["b2"] || !got["b3"] {
		t.Errorf("outputs %v, want b1, b2, b3", got)
	}
	code, out, _ = runCmd(t, "dlq", "ls", "--config", cfgFile)
	if code != 0 || !strings.Contains(out, "1 dead letter\n") || strings.Contains(out, "too_large") {
		t.Errorf("after republish --delete: %d\n%s", code, out)
	}
}

// TestTail: msgpack outputs (the input's encoding) come out of "tail" as
// JSON lines, from the pipeline's subjects or a subject given by name, and
// dead letters with their reason.
func TestTail(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := opsConfig(t, dir, natsPort, httpPort, 4, "")
	w := startRun(t, cfgFile, httpPort)
	defer w.stop(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	warm(t, nc, "s1", 30, codec.Msgpack)
	if _, err := js(t, nc).Publish("ops.s1.in", []byte{0xc1}); err != nil { // never valid msgpack
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)

	check := func(name string, args ...string) []map[string]any {
		code, out, errOut := runCmd(t, append([]string{"tail"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		var lines []map[string]any
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("%s: line %q is not JSON: %v", name, sc.Text(), err)
			}
			lines = append(lines, v)
		}
		return lines
	}
	lines := check("pipeline", "--config", cfgFile, "--key", "s1", "--all", "--count", "3", "--timeout", "5s")
	if len(lines) != 3 {
		t.Fatalf("tail --all --count 3: %d lines", len(lines))
	}
	if z, ok := lines[0]["z"].([]any); !ok || len(z) != 2 || lines[0]["key"] != "s1" || !strings.HasPrefix(fmt.Sprint(lines[0]["id"]), "w") {
		t.Errorf("output line %v", lines[0])
	}
	// The input had no ts: the output carries the input message's stream time.
	if ts, _ := lines[0]["ts"].(float64); time.Since(time.Unix(int64(ts), 0)) > time.Minute || ts == 0 {
		t.Errorf("output ts %v, want the input's stream time", lines[0]["ts"])
	}
	lines = check("subject", "res.>", "--all", "--count", "1", "--meta", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if len(lines) != 1 || lines[0]["subject"] != "res.s1" {
		t.Errorf("tail SUBJECT --meta: %v", lines)
	}
	lines = check("dlq", "--config", cfgFile, "--dlq", "--all", "--count", "1", "--timeout", "5s")
	if len(lines) != 1 || lines[0]["headers"].(map[string]any)["Kpcastream-Error"] != "malformed" {
		t.Errorf("tail --dlq: %v", lines)
	}
	// Live: a new output arrives while tail follows.
	done := make(chan []map[string]any, 1)
	go func() { done <- check("live", "--config", cfgFile, "--count", "1", "--timeout", "10s") }()
	time.Sleep(300 * time.Millisecond)
	warm(t, nc, "s2", 30, codec.Msgpack)
	if l := <-done; len(l) != 1 || l[0]["key"] != "s2" {
		t.Errorf("live tail: %v", l)
	}
}

// TestPublishWidth: a CSV one column too wide for the pipeline (--drop
// forgotten) is refused before anything is sent, naming the columns; a
// file with rows of other widths names their lines.
func TestPublishWidth(t *testing.T) {
	dir := t.TempDir()
	cfgFile := opsConfig(t, dir, 1, 2, 4, "")
	csvFile := filepath.Join(dir, "wide.csv")
	_ = os.WriteFile(csvFile, []byte("a,b,c,label\n1,2,3,0\n4,5,6,1\n"), 0o600)
	// No server listens on port 1: a connect would fail differently.
	code, _, errOut := runCmd(t, "publish", "--config", cfgFile, "--subject", "ops.s1.in", "--in", csvFile)
	if code != 1 || !strings.Contains(errOut, "line 1: the header keeps 4 columns (a,b,c,label), the pipeline expects 3") ||
		!strings.Contains(errOut, "--drop") || !strings.Contains(errOut, "nothing was published") {
		t.Errorf("one column too wide: %d %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "publish", "--config", cfgFile, "--subject", "ops.s1.typo", "--in", csvFile, "--drop", "label")
	if code != 1 || !strings.Contains(errOut, "not one of pipeline ops's input subjects (ops.*.in)") {
		t.Errorf("wrong subject: %d %q", code, errOut)
	}
	for _, c := range []struct {
		f, s string
		ok   bool
	}{{"a.*.c", "a.b.c", true}, {"a.*.c", "a.b", false}, {"a.>", "a.b.c", true}, {"a.>", "a", false}, {"a.b", "a.b.c", false}} {
		if subjectMatches(c.f, c.s) != c.ok {
			t.Errorf("subjectMatches(%q, %q) = %v", c.f, c.s, !c.ok)
		}
	}
	noHeader := filepath.Join(dir, "ragged.csv")
	_ = os.WriteFile(noHeader, []byte("1,2,3\n# comment\n1,2\n4,5,6\n7,8,9,10\n"), 0o600)
	code, _, errOut = runCmd(t, "publish", "--dim", "3", "--nats-url", "nats://127.0.0.1:1", "--subject", "x", "--in", noHeader)
	if code != 1 || !strings.Contains(errOut, "line 3: 2 values; line 5: 4 values") {
		t.Errorf("ragged rows: %d %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "publish", "--dim", "2", "--nats-url", "nats://127.0.0.1:1", "--subject", "x", "--in", "-")
	_ = code
	// stdin is checked on its first row (not re-read): covered by the
	// header check above; here only that the flag parses.
	if strings.Contains(errOut, "flag provided but not defined") {
		t.Errorf("--dim: %q", errOut)
	}
}

// TestPublishContextAuth: publish logs in through a nats CLI context
// (NATS_CONTEXT) to a server that requires a password, and never prints
// the password, not even when it is wrong.
func TestPublishContextAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	const pass = "pa55-w0rd-xyz"
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, Username: "kp", Password: pass, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	defer s.Shutdown()
	home := t.TempDir()
	ctxDir := filepath.Join(home, "nats", "context")
	_ = os.MkdirAll(ctxDir, 0o700)
	_ = os.WriteFile(filepath.Join(ctxDir, "auth.json"), []byte(fmt.Sprintf(`{"url":%q,"user":"kp","password":%q}`, s.ClientURL(), pass)), 0o600)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("NATS_CONTEXT", "auth")
	csvFile := filepath.Join(t.TempDir(), "in.csv")
	_ = os.WriteFile(csvFile, []byte("a,b\n1,2\n3,4\n"), 0o600)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("kp", pass))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, _ := nc.SubscribeSync("ctx.in")
	_ = nc.Flush()
	code, out, errOut := runCmd(t, "publish", "--subject", "ctx.in", "--in", csvFile, "--encoding", "json")
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Fatalf("publish through the context: %d %q %q", code, out, errOut)
	}
	if strings.Contains(errOut, "\r") || !strings.HasSuffix(errOut, "\n") {
		t.Errorf("progress on a non-terminal: %q, want lines without \\r", errOut)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Errorf("nothing received: %v", err)
	}
	// A wrong password in a URL flag overrides the context, and is not printed.
	u := strings.Replace(s.ClientURL(), "nats://", "nats://kp:WRONG-"+pass+"@", 1)
	code, _, errOut = runCmd(t, "publish", "--subject", "ctx.in", "--in", csvFile, "--nats-url", u)
	if code != 1 || strings.Contains(errOut, pass) || !strings.Contains(errOut, "kp:xxxxx@") {
		t.Errorf("wrong password: %d %q", code, errOut)
	}
	// run with a password in its URL: the failed connect names the server redacted.
	cfg := filepath.Join(t.TempDir(), "k.yaml")
	_ = os.WriteFile(cfg, []byte("http: {metrics_addr: \"off\"}\npipelines:\n  - name: p\n    input: {subject: \"a.*\"}\n    learner: {dim: 2, components: 1, kernel: {name: rbf}}\n"), 0o600)
	code, _, errOut = runCmd(t, "run", "--config", cfg, "--nats-url", u)
	if code != 1 || strings.Contains(errOut, pass) || !strings.Contains(errOut, "kp:xxxxx@") {
		t.Errorf("run, wrong password: %d %q", code, errOut)
	}
}

// TestSnapshotCmd: "snapshot ls" lists the keys with their sequence and
// learner and flags a corrupt one; "snapshot rm" on the corrupt key while
// the workers run resets it through its owner (whose held message is then
// applied), and with no worker running deletes the snapshot.
func TestSnapshotCmd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := opsConfig(t, dir, natsPort, httpPort, 4, "json")
	w := startRun(t, cfgFile, httpPort)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	outs, err := nc.SubscribeSync("res.s1")
	if err != nil {
		t.Fatal(err)
	}
	warm(t, nc, "s1", 20, codec.JSON)
	warm(t, nc, "s2", 20, codec.JSON)
	lsJSON := func() map[string]snapInfo {
		code, out, errOut := runCmd(t, "snapshot", "ls", "--config", cfgFile, "--json")
		if code != 0 {
			t.Fatalf("snapshot ls: %d %s", code, errOut)
		}
		got := map[string]snapInfo{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var si snapInfo
			if line != "" {
				if err := json.Unmarshal([]byte(line), &si); err != nil {
					t.Fatal(err)
				}
				got[si.Key] = si
			}
		}
		return got
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := nc.Request("kpcastream.snapshot", []byte(`{"pipeline":"ops"}`), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		got := lsJSON()
		if got["s1"].Seen == 20 && got["s2"].Seen == 20 {
			if si := got["s1"]; si.Learner != "ikpca" || si.LastSeq != 20 || si.Bytes == 0 || si.Dim != 3 || si.Error != "" {
				t.Errorf("s1: %+v", si)
			}
			// The basis version listed is the one of the key's last output.
			var last codec.Output
			for {
				m, err := outs.NextMsg(time.Second)
				if err != nil {
					break
				}
				if m.Header.Get(processor.HeaderLane) != "" {
					continue // a lane's end of batch: empty, never stored
				}
				if err := json.Unmarshal(m.Data, &last); err != nil {
					t.Fatal(err)
				}
			}
			if last.BasisVersion == 0 || got["s1"].BasisVersion != int64(last.BasisVersion) {
				t.Errorf("s1: snapshot ls says basis version %d, its last output (seq %d) %d", got["s1"].BasisVersion, last.Seq, last.BasisVersion)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Corrupt s2 behind the worker's back, then unload it by restarting.
	w.stop(t)
	w = startRun(t, cfgFile, httpPort)
	nc.Close()
	if nc, err = nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort)); err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	jsn, _ := jetstream.New(nc)
	kv, err := jsn.KeyValue(context.Background(), "kpcastream-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "ops.s2", []byte("KPCS garbage")); err != nil {
		t.Fatal(err)
	}
	if si := lsJSON()["s2"]; !strings.Contains(si.Error, "corrupt") {
		t.Errorf("corrupt s2 listed as %+v", si)
	}
	sub, _ := nc.SubscribeSync("res.s2")
	warm(t, nc, "s2", 1, codec.JSON) // held: the key's snapshot is corrupt
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(w.log.String(), "kpcastream snapshot rm --config FILE --pipeline ops --key s2") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal naming the fix:\n%s", w.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errOut := runCmd(t, "snapshot", "rm", "--config", cfgFile, "--key", "s2")
	if code != 0 || !strings.Contains(out, "reset by its owner") {
		t.Fatalf("snapshot rm (workers running): %d %s %s", code, out, errOut)
	}
	if _, err := sub.NextMsg(time.Second); err == nil {
		t.Errorf("a fresh learner gave an output for its first message")
	}
	var si snapInfo
	deadline = time.Now().Add(10 * time.Second)
	for si = lsJSON()["s2"]; si.Error != "" || si.Learner != "ikpca"; si = lsJSON()["s2"] {
		if time.Now().After(deadline) {
			t.Fatalf("s2 after the reset: %+v", si)
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.stop(t)
	// The same store, served with no worker running.
	srv, _, err := natsembed.StartEmbedded(context.Background(), natsembed.Options{Port: natsPort, StoreDir: filepath.Join(dir, "data", "jetstream")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if si := lsJSON()["s2"]; si.Seen != 1 || si.Error != "" {
		t.Errorf("s2 after the reset and a final snapshot: %+v (want the held message applied to a fresh learner)", si)
	}
	// No worker: rm deletes.
	code, out, errOut = runCmd(t, "snapshot", "rm", "--config", cfgFile, "--key", "s1")
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("snapshot rm (no worker): %d %s %s", code, out, errOut)
	}
	if got := lsJSON(); len(got) != 1 || got["s1"].Key != "" {
		t.Errorf("after rm s1: %+v", got)
	}
	code, out, _ = runCmd(t, "snapshot", "show", "--config", cfgFile, "--key", "s2")
	if code != 0 || !strings.Contains(out, `"learner": "ikpca"`) {
		t.Errorf("snapshot show: %d %s", code, out)
	}
	if code, _, errOut := runCmd(t, "snapshot", "rm", "--config", cfgFile, "--key", "nope"); code != 1 || !strings.Contains(errOut, "no snapshot") {
		t.Errorf("rm of a missing key: %d %s", code, errOut)
	}
}

// TestSnapshotRmForce: "snapshot rm --force" under a running owner. The
// owner's next save of the key fails its compare-and-set, the partition is
// fenced and taken again under a newer epoch, and the key goes on from a
// fresh learner (replayed from the partition's checkpoint); the worker
// keeps running.
func TestSnapshotRmForce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := opsConfig(t, dir, natsPort, httpPort, 4, "json")
	w := startRun(t, cfgFile, httpPort)
	defer w.stop(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ls := func() snapInfo {
		code, out, errOut := runCmd(t, "snapshot", "ls", "--config", cfgFile, "--key", "s1", "--json")
		if code != 0 {
			t.Fatalf("snapshot ls: %d %s", code, errOut)
		}
		var si snapInfo
		if strings.TrimSpace(out) != "" {
			if err := json.Unmarshal([]byte(out), &si); err != nil {
				t.Fatal(err)
			}
		}
		return si
	}
	warm(t, nc, "s1", 20, codec.JSON)
	deadline := time.Now().Add(10 * time.Second)
	for ls().Seen != 20 {
		// The policy (every 5 messages) may have saved at 16 with a save in
		// flight; ask for the rest.
		if _, err := nc.Request("kpcastream.snapshot", []byte(`{"pipeline":"ops"}`), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot after 20 messages: %+v", ls())
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := ls()
	code, out, errOut := runCmd(t, "snapshot", "rm", "--config", cfgFile, "--key", "s1", "--force")
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("rm --force: %d %s %s", code, out, errOut)
	}
	warm(t, nc, "s1", 10, codec.JSON)
	deadline = time.Now().Add(20 * time.Second)
	var si snapInfo
	for si = ls(); si.Epoch <= before.Epoch || si.Error != "" || si.Seen == 0; si = ls() {
		if time.Now().After(deadline) {
			t.Fatalf("after rm --force: %+v (before %+v)\n%s", si, before, w.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(w.log.String(), "snapshot conflict") {
		t.Errorf("no conflict logged:\n%s", w.log.String())
	}
	t.Logf("before: epoch %d seen %d; after: epoch %d seen %d last_seq %d", before.Epoch, before.Seen, si.Epoch, si.Seen, si.LastSeq)
}

// TestPayloadJSON: inputs and outputs of either encoding, batches too,
// become one JSON value; what decodes as neither is shown, not dropped.
func TestPayloadJSON(t *testing.T) {
	batch, err := codec.EncodeObservations(nil, codec.Msgpack, []codec.Observation{{ID: "a", X: []float64{1, 2}}, {X: []float64{3, 4}, TS: 5}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := codec.EncodeOutput(nil, codec.Msgpack, &codec.Output{ID: "o", Key: "k", Seq: 3, Z: []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, ct string
		data     []byte
		want     string
	}{
		{"json", "", []byte(` { "x" : [1, 2] } `), `{"x":[1,2]}`},
		{"msgpack batch", "application/msgpack", batch, `"batch"`},
		{"msgpack output", "", out, `"key":"k"`},
		{"undecodable", "", []byte{0xc1, 'h', 'i'}, `{"undecodable":`},
		{"bad json", "application/json", []byte(`{"x":`), `{"undecodable":"{\"x\":"}`},
		// Text is shown as its text, not as the msgpack integer of its
		// first byte (issue 33 row 7: preview 104 for "hello").
		{"text", "", []byte("hello"), `{"undecodable":"hello"}`},
	} {
		got := payloadJSON(c.data, c.ct)
		if !json.Valid(got) || !strings.Contains(string(got), c.want) {
			t.Errorf("%s: %s, want JSON containing %s", c.name, got, c.want)
		}
	}
}

// TestRunContext: "kpcastream run --context" logs in to a server that
// requires a password (and has JetStream), named only by a context file;
// the password never appears in run's log.
func TestRunContext(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	const pass = "run-s3cret-pa55"
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, Username: "kp", Password: pass, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	defer s.Shutdown()
	dir := t.TempDir()
	ctxFile := filepath.Join(dir, "ctx", "auth.json")
	_ = os.MkdirAll(filepath.Dir(ctxFile), 0o700)
	_ = os.WriteFile(ctxFile, []byte(fmt.Sprintf(`{"url":%q,"user":"kp","password":%q}`, s.ClientURL(), pass)), 0o600)
	httpPort := freePort(t)
	cfg := filepath.Join(dir, "k.yaml")
	_ = os.WriteFile(cfg, []byte(fmt.Sprintf(`http: {metrics_addr: "127.0.0.1:%d"}
log: {format: json, level: debug}
pipelines:
  - name: p
    input: {stream: P, subject: "p.*.in", create_stream: true}
    learner: {dim: 2, components: 1, kernel: {name: rbf}}
`, httpPort)), 0o600)
	w := startRun(t, cfg, httpPort, "--context", ctxFile)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("kp", pass))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("$SRV.PING.kpcastream", nil, 5*time.Second); err != nil {
		t.Errorf("the worker is not on the context's server: %v", err)
	}
	w.stop(t)
	if log := w.log.String(); strings.Contains(log, pass) || !strings.Contains(log, `"context"`) {
		t.Errorf("run's log names the password, or not the context:\n%s", log)
	}
}
