package processor

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// slowUplink is a TCP proxy to a nats-server that delays what clients
// send by delay (what the server sends goes straight back): a
// connection's subscription reaches the server delay after it was
// written, while another connection's publish does not wait.
type slowUplink struct {
	ln    net.Listener
	delay time.Duration
	wg    sync.WaitGroup
}

func newSlowUplink(t *testing.T, server string, delay time.Duration) *slowUplink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &slowUplink{ln: ln, delay: delay}
	addr := server[len("nats://"):]
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			u.wg.Add(2)
			go func() { defer u.wg.Done(); _, _ = io.Copy(c, s); c.Close() }()
			go func() { defer u.wg.Done(); u.late(s, c); s.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return u
}

// late copies from src to dst, each chunk delay after it was read, in order.
func (u *slowUplink) late(dst, src net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{at: time.Now().Add(u.delay), b: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			close(q)
			<-done
			return
		}
	}
}

func (u *slowUplink) url() string { return "nats://" + u.ln.Addr().String() }

// TestCoreInputReadyConfirmed: a core NATS pipeline says it is ready only
// once the server knows its subscription, so that a message published
// right after Ready, from another connection, is processed. Here the
// processor's connection delays what it sends by 200 ms: without the
// round trip that confirms the subscription (partition.runCore's flush),
// Ready came 200 ms before the server knew it, and the message was
// dropped (TestBench/core lost a whole warm-up under -race in CI).
func TestCoreInputReadyConfirmed(t *testing.T) {
	e := newEnv(t)
	u := newSlowUplink(t, e.url, 200*time.Millisecond)
	nc, err := nats.Connect(u.url(), nats.Name("slow uplink"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.nc.SubscribeSync("ready.out.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pc := PipelineConfig{Name: "ready", Input: InputConfig{Subject: "ready.in"}, Learner: testLearnerConfig(),
		Output: OutputConfig{Subject: "ready.out.{key}", Encoding: "json"}}
	r := e.startOn(t, Config{Pipelines: []PipelineConfig{pc}}, newPCA, nc, js, nil)
	// Right after Ready, from another connection.
	body := `{"batch":[[1,2,3],[2,1,0],[0,1,1],[1,1,1],[3,2,1],[0,0,1]]}`
	if err := e.nc.Publish("ready.in", []byte(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := out.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no output for a message published right after Ready: %v (dropped: the server did not know the subscription yet)", err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
