package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// publishStream starts a server with a stream capturing "pi.>" and
// returns its URL and a function counting the stream's messages.
func publishStream(t *testing.T) (string, func() uint64) {
	t.Helper()
	_, url := natstest.RunServer(t)
	_, js := natstest.Connect(t, url)
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PI", Subjects: []string{"pi.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return url, func() uint64 {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
}

// TestPublishInterrupt: Ctrl-C during publish (ctx cancelled) says how many
// rows were published, prints the message count on stdout as a finished
// run does, and exits 130; the count is exactly what the stream holds
// (issue 23, item 4: it printed "context canceled" and exited 1).
func TestPublishInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	url, count := publishStream(t)
	var rows strings.Builder
	rows.WriteString("a,b,c\n")
	for i := range 1000 {
		fmt.Fprintf(&rows, "%d,%d,%d\n", i, i+1, i+2)
	}
	in := filepath.Join(t.TempDir(), "many.csv")
	if err := os.WriteFile(in, []byte(rows.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	code := runMain(ctx, []string{"publish", "--nats-url", url, "--subject", "pi.k.in", "--in", in, "--rate", "100", "--batch", "2"}, &out, &errb)
	if code != 130 {
		t.Fatalf("exit %d, want 130; stderr %q", code, errb.String())
	}
	n, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil || n < 1 || n >= 500 {
		t.Fatalf("stdout %q: want the count of messages published before the interrupt", out.String())
	}
	if got := count(); got != uint64(n) {
		t.Errorf("stdout says %d messages, the stream holds %d", n, got)
	}
	want := fmt.Sprintf("kpcastream publish: interrupted: %d messages (%d rows) of %s published, the rest not sent", n, 2*n, in)
	if !strings.Contains(errb.String(), want) || strings.Contains(errb.String(), "context canceled") {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
}

// TestPublishBadValue: a value that is not a number anywhere in a file is
// reported, naming its line and its column by position and name, before
// anything is published (as rows of a wrong width are); from stdin, which
// is checked as it is read, the error says how many rows went out before it.
func TestPublishBadValue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	url, count := publishStream(t)
	bad := "a,b,c\n1,2,3\n4,5,six\n7,8,9\n"
	in := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(in, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--dim", "3"}, {"--drop", "a"}} {
		args := append([]string{"publish", "--nats-url", url, "--subject", "pi.k.in", "--in", in}, extra...)
		code, out, errOut := runCmd(t, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, `line 3, column 3 ("c"): "six" is not a finite number; nothing was published`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", extra, code, out, errOut)
		}
	}
	if got := count(); got != 0 {
		t.Errorf("%d messages published from a bad file", got)
	}

	// stdin: rows before the bad one are published, and the error says so.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin; r.Close() }()
	go func() { _, _ = w.WriteString(bad); w.Close() }()
	code, _, errOut := runCmd(t, "publish", "--nats-url", url, "--subject", "pi.k.in", "--in", "-")
	want := `stdin: line 3, column 3 ("c"): "six" is not a finite number; 1 row before it published (1 message), the rest not`
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("stdin: exit %d, stderr %q, want %q", code, errOut, want)
	}
	if got := count(); got != 1 {
		t.Errorf("stdin: the stream holds %d messages, want the 1 before the bad row", got)
	}
}

// TestPlural: counts read as English ("1 dead letter", "1 pass").
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "pass", "1 pass"}, {2, "pass", "2 passes"}, {0, "row", "0 rows"}, {1, "dead letter", "1 dead letter"}, {3, "dead letter", "3 dead letters"}, {2, "batch", "2 batches"}} {
		if got := plural(c.n, c.noun); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
