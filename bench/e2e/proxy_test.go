package e2e

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"
)

// arrival is a read: when it returned and the stream offset it ended at.
type arrival struct {
	at  time.Time
	end int
}

// readAll reads c until EOF or want bytes, recording each read.
func readAll(c net.Conn, want int) ([]byte, []arrival, error) {
	var got []byte
	var arr []arrival
	buf := make([]byte, 32<<10)
	for len(got) < want {
		n, err := c.Read(buf)
		if n > 0 {
			got = append(got, buf[:n]...)
			arr = append(arr, arrival{at: time.Now(), end: len(got)})
		}
		if err != nil {
			if err == io.EOF {
				break
			}
			return got, arr, err
		}
	}
	return got, arr, nil
}

// arrivedAt returns when the byte at offset off was read.
func arrivedAt(arr []arrival, off int) time.Time {
	for _, a := range arr {
		if off < a.end {
			return a.at
		}
	}
	return time.Time{}
}

// listenLoopback returns a listener on a free loopback port, closed at cleanup.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// TestDelayProxy sends 100 chunks 300 µs apart through a proxy with a
// 5 ms one-way delay to a server that echoes them, and checks that the
// server and the client get every byte in order and unchanged, the server
// each chunk no earlier than 5 ms after it was written and the client its
// echo no earlier than 10 ms after; then that Close ends every goroutine.
func TestDelayProxy(t *testing.T) {
	const (
		delay  = 5 * time.Millisecond
		chunks = 100
		size   = 1000
	)
	before := runtime.NumGoroutine()
	ln := listenLoopback(t)
	type result struct {
		got []byte
		arr []arrival
		err error
	}
	srv := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- result{err: err}
			return
		}
		defer c.Close()
		var got []byte
		var arr []arrival
		buf := make([]byte, 32<<10)
		for len(got) < chunks*size {
			n, err := c.Read(buf)
			if n > 0 {
				got = append(got, buf[:n]...)
				arr = append(arr, arrival{at: time.Now(), end: len(got)})
				if _, err := c.Write(buf[:n]); err != nil {
					srv <- result{got, arr, err}
					return
				}
			}
			if err != nil {
				srv <- result{got, arr, err}
				return
			}
		}
		srv <- result{got, arr, nil}
	}()
	p, err := newDelayProxy(ln.Addr().String(), delay)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	sent := make([]byte, chunks*size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range sent {
		sent[i] = byte(rng.Uint32())
	}
	echo := make(chan result, 1)
	go func() {
		got, arr, err := readAll(c, len(sent))
		echo <- result{got, arr, err}
	}()
	at := make([]time.Time, chunks)
	for i := range chunks {
		at[i] = time.Now()
		if _, err := c.Write(sent[i*size : (i+1)*size]); err != nil {
			t.Fatalf("write chunk %d: %v", i, err)
		}
		time.Sleep(300 * time.Microsecond)
	}
	var s, e result
	for _, w := range []struct {
		name string
		ch   chan result
		r    *result
	}{{"server", srv, &s}, {"client", echo, &e}} {
		select {
		case *w.r = <-w.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not every byte arrived within 10s", w.name)
		}
		if w.r.err != nil {
			t.Fatalf("%s: %v", w.name, w.r.err)
		}
	}
	for _, w := range []struct {
		name string
		r    result
		min  time.Duration
	}{{"server", s, delay}, {"client (echo)", e, 2 * delay}} {
		if !bytes.Equal(w.r.got, sent) {
			t.Fatalf("%s: got %d bytes differing from the %d sent (first difference at %d)", w.name, len(w.r.got), len(sent), firstDiff(w.r.got, sent))
		}
		for i := range chunks {
			if d := arrivedAt(w.r.arr, i*size).Sub(at[i]); d < w.min {
				t.Errorf("%s: chunk %d arrived %v after it was written, want ≥ %v", w.name, i, d, w.min)
			}
		}
	}
	_ = c.Close()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}

// TestDelayProxyThroughput pushes 32 MiB one way through a proxy with a
// 4 ms delay. A proxy that slept the delay after each read before the
// next would need at least 512 reads × 4 ms ≈ 2 s; the pipelined one
// takes the delay once plus the copying, so the test wants under half of
// that.
func TestDelayProxyThroughput(t *testing.T) {
	const (
		delay = 4 * time.Millisecond
		total = 32 << 20
	)
	serial := time.Duration(total/proxyReadSize) * delay
	ln := listenLoopback(t)
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- int(n)
	}()
	p, err := newDelayProxy(ln.Addr().String(), delay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	start := time.Now()
	for sent := 0; sent < total; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Close()
	var n int
	select {
	case n = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("not drained within 30s")
	}
	elapsed := time.Since(start)
	if n != total {
		t.Fatalf("server got %d bytes, want %d", n, total)
	}
	if elapsed > serial/2 {
		t.Errorf("32 MiB took %v through a %v proxy, want < %v (half of a read-sleep-write proxy's %v)", elapsed, delay, serial/2, serial)
	}
	t.Logf("32 MiB in %v (%.0f MiB/s) with a %v one-way delay", elapsed, float64(total)/(1<<20)/elapsed.Seconds(), delay)
}

// firstDiff returns the first index where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
