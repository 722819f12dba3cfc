package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestPublishDefaultEncoding: publish sends JSON unless --encoding says
// msgpack (the default was msgpack before; README, "Message formats").
func TestPublishDefaultEncoding(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	_, url := natstest.RunServer(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("enc.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the subscription is in place before anything is published
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "x.csv")
	if err := os.WriteFile(in, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		ct   string
	}{{nil, "application/json"}, {[]string{"--encoding", "msgpack"}, "application/msgpack"}} {
		args := append([]string{"publish", "--nats-url", url, "--subject", "enc.k.in", "--in", in}, c.args...)
		if code, _, stderr := runCmd(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get("Content-Type"); got != c.ct {
			t.Errorf("%v: Content-Type %q, want %q", c.args, got, c.ct)
		}
		if c.args == nil {
			var v struct{ X []float64 }
			if err := json.Unmarshal(m.Data, &v); err != nil || len(v.X) != 2 || v.X[0] != 1 || v.X[1] != 2 {
				t.Errorf("default payload %q: %v %v, want JSON with x [1 2]", m.Data, v, err)
			}
		}
	}
}
