package natsconn_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/internal/natsconn"
	"github.com/kpcastream/kpcastream/internal/natsembed"
)

const secret = "S3cr3t-pa55"

// authServer runs a nats-server on port (-1: any) that requires user
// "kp" with password secret, logging through the embedded server's logger
// into log, with every protocol trace on.
func authServer(t *testing.T, port int, log *zap.Logger) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, Username: "kp", Password: secret,
		NoSigs: true, Debug: true, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	s.SetLoggerV2(natsembed.Logger(log), true, true, false)
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return s
}

// TestSecretsRedacted: a failed connect (wrong password in the URL) and a
// successful one followed by a server restart and a reconnect; neither an
// error nor any log line (ours or the server's) holds a password.
func TestSecretsRedacted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	s := authServer(t, -1, log)
	port := s.Addr().(*net.TCPAddr).Port
	var errs []string

	// Wrong password, in the URL.
	wrong := "W0ng-pa55"
	_, err := natsconn.Connect(natsconn.Settings{URL: fmt.Sprintf("nats://kp:%s@127.0.0.1:%d", wrong, port)}, natsconn.Conn{Name: "t", Logger: log})
	if err == nil {
		t.Fatal("wrong password: connected")
	}
	errs = append(errs, err.Error())
	if !strings.Contains(err.Error(), "kp:"+natsconn.Redacted+"@127.0.0.1") {
		t.Errorf("error %q does not name the redacted server", err)
	}
	// Wrong password, as a setting.
	_, err = natsconn.Connect(natsconn.Settings{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), User: "kp", Password: wrong}, natsconn.Conn{Name: "t", Logger: log})
	if err == nil {
		t.Fatal("wrong password: connected")
	}
	errs = append(errs, err.Error())

	// The right one, then a restart of the server.
	nc, err := natsconn.Connect(natsconn.Settings{URL: fmt.Sprintf("nats://kp:%s@127.0.0.1:%d", secret, port)},
		natsconn.Conn{Name: "t", Logger: log, Forever: true, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s.Shutdown()
	s.WaitForShutdown()
	s = authServer(t, port, log)
	defer s.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessage("nats reconnected").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reconnect logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := nc.Publish("x", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessage("nats disconnected").Len() == 0 {
		t.Error("no disconnect logged")
	}

	// Redact and RedactText themselves.
	for _, c := range []struct{ in, want string }{
		{"nats://kp:" + secret + "@h:4222", "nats://kp:xxxxx@h:4222"},
		{"nats://" + secret + "@h:4222,tls://u:" + secret + "@g", "nats://xxxxx@h:4222,tls://u:xxxxx@g"},
		{"nats://h:4222", "nats://h:4222"},
	} {
		if got := natsconn.Redact(c.in); got != c.want {
			t.Errorf("natsconn.Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		errs = append(errs, natsconn.Redact(c.in))
	}
	if got := natsconn.RedactText(`dial "nats://kp:` + secret + `@h:1" failed`); got != `dial "nats://kp:xxxxx@h:1" failed` {
		t.Errorf("RedactText: %q", got)
	}

	var lines []string
	for _, e := range logs.All() {
		var b strings.Builder
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
		lines = append(lines, b.String())
	}
	if len(lines) < 10 {
		t.Fatalf("only %d log lines captured", len(lines))
	}
	for _, l := range append(lines, errs...) {
		if strings.Contains(l, secret) || strings.Contains(l, wrong) {
			t.Errorf("secret in %q", l)
		}
	}
	t.Logf("%d log lines and %d errors checked; e.g. %q", len(lines), len(errs), errs[0])
}

// TestPrecedence: flag > environment > context > file, per setting, with
// the authentication taken whole from the highest source that names one.
func TestPrecedence(t *testing.T) {
	home := t.TempDir()
	ctxDir := filepath.Join(home, ".config", "nats", "context")
	if err := os.MkdirAll(ctxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(ctxDir, name+".json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("c1", `{"description":"x","url":"nats://ctx:4222","token":"ctxtok","ca":"ctx-ca.pem","nsc":"","jetstream_domain":""}`)
	write("c2", `{"url":"nats://ctx2:4222","creds":"file:///etc/c2.creds"}`)
	write("bad", `{"creds":"op://vault/item/field"}`)
	if err := os.WriteFile(filepath.Join(home, ".config", "nats", "context.txt"), []byte("c2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := natsconn.Settings{URL: "nats://file:4222", User: "fu", Password: "fp", Cert: "f.crt", Key: "f.key"}
	for _, c := range []struct {
		name     string
		env      map[string]string
		flags    natsconn.Settings
		flagCtx  string
		selected bool
		want     natsconn.Settings
		wantCtx  string
		err      string
	}{
		{name: "file only", want: file},
		{name: "selected context unused by run", want: file},
		{name: "selected context", selected: true, wantCtx: "c2",
			want: natsconn.Settings{URL: "nats://ctx2:4222", Creds: "/etc/c2.creds", Cert: "f.crt", Key: "f.key"}},
		{name: "env context over file", env: map[string]string{"NATS_CONTEXT": "c1"}, wantCtx: "c1",
			want: natsconn.Settings{URL: "nats://ctx:4222", Token: "ctxtok", CA: "ctx-ca.pem", Cert: "f.crt", Key: "f.key"}},
		{name: "flag context over env context", env: map[string]string{"NATS_CONTEXT": "c1"}, flagCtx: "c2", wantCtx: "c2",
			want: natsconn.Settings{URL: "nats://ctx2:4222", Creds: "/etc/c2.creds", Cert: "f.crt", Key: "f.key"}},
		{name: "env over context", env: map[string]string{"NATS_CONTEXT": "c1", "NATS_URL": "nats://env:4222", "NATS_USER": "eu", "NATS_PASSWORD": "ep"},
			wantCtx: "c1", want: natsconn.Settings{URL: "nats://env:4222", User: "eu", Password: "ep", CA: "ctx-ca.pem", Cert: "f.crt", Key: "f.key"}},
		{name: "KPCASTREAM_NATS_URL over NATS_URL", env: map[string]string{"NATS_URL": "nats://a", "KPCASTREAM_NATS_URL": "nats://b"},
			want: natsconn.Settings{URL: "nats://b", User: "fu", Password: "fp", Cert: "f.crt", Key: "f.key"}},
		{name: "flag over env", env: map[string]string{"NATS_CONTEXT": "c1", "NATS_URL": "nats://env:4222", "NATS_TOKEN": "et", "NATS_CA": "e-ca"},
			flags: natsconn.Settings{URL: "nats://flag:4222", NKey: "f.nk", Cert: "c.crt", Key: "c.key"}, wantCtx: "c1",
			want: natsconn.Settings{URL: "nats://flag:4222", NKey: "f.nk", CA: "e-ca", Cert: "c.crt", Key: "c.key"}},
		{name: "missing context", flagCtx: "nope", err: "nope"},
		{name: "unsupported scheme", flagCtx: "bad", err: `scheme "op"`},
		{name: "path in name", flagCtx: "../x", err: "not a context name"},
		{name: "password without user", env: map[string]string{"NATS_PASSWORD": "p"}, err: "password needs a user"},
		{name: "auth taken whole", flags: natsconn.Settings{Token: "t"}, env: map[string]string{"NATS_PASSWORD": "p"},
			want: natsconn.Settings{URL: "nats://file:4222", Token: "t", Cert: "f.crt", Key: "f.key"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) {
				if k == "HOME" {
					return home, true
				}
				v, ok := c.env[k]
				return v, ok
			}
			got, ctxName, err := natsconn.Resolve(natsconn.Sources{Flags: c.flags, Context: c.flagCtx, Getenv: getenv, File: file, Selected: c.selected})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want || ctxName != c.wantCtx {
				t.Errorf("got %+v (context %q), want %+v (%q)", got, ctxName, c.want, c.wantCtx)
			}
		})
	}
}

// TestContextConnect: a context file pointing at a server that requires a
// password connects; without it the server refuses.
func TestContextConnect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a nats-server")
	}
	s := authServer(t, -1, zap.NewNop())
	defer s.Shutdown()
	home := t.TempDir()
	dir := filepath.Join(home, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"url":%q,"user":"kp","password":%q}`, s.ClientURL(), secret)
	if err := os.WriteFile(filepath.Join(dir, "auth.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) (string, bool) {
		switch k {
		case "XDG_CONFIG_HOME":
			return home, true
		case "NATS_CONTEXT":
			return "auth", true
		}
		return "", false
	}
	st, _, err := natsconn.Resolve(natsconn.Sources{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsconn.Connect(st, natsconn.Conn{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	_, err = natsconn.Connect(natsconn.Settings{URL: s.ClientURL()}, natsconn.Conn{Name: "t"})
	if err == nil || !errors.Is(err, errors.Unwrap(err)) {
		t.Fatalf("no credentials: err = %v, want a refusal", err)
	}
}
