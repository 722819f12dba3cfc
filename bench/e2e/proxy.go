package e2e

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// proxyReadSize is the largest chunk a delayProxy reads at once.
const proxyReadSize = 64 << 10

// proxyQueue bounds the chunks in flight in one direction of one
// connection: at most proxyQueue × proxyReadSize bytes (64 MiB) wait for
// their delay, far more than loopback carries in a millisecond, so the
// queue never limits throughput; a reader that finds it full stops
// reading, and TCP's flow control pushes back on the sender.
const proxyQueue = 1024

// delayProxy forwards TCP connections from a loopback listener to a
// target address and delays every byte by a fixed time in each direction,
// simulating a network round trip of twice that. Bytes keep their order
// and are never changed or merged across directions. The delay is a
// pipeline, not a pause: a reader stamps each chunk with the time it
// arrived and queues it, and a writer releases it once the delay has
// passed since that stamp, so chunks read a microsecond apart leave a
// microsecond apart and throughput is that of the proxy without the
// delay. A chunk never leaves early; it may leave late by the sleep's
// granularity (≈ 0.05–0.1 ms with sleepPrecise on Linux), which is why
// the bench measures and prints the round trip seen through the proxy.
//
// Close stops the listener, closes every connection and waits for every
// goroutine the proxy started. Its methods are safe for concurrent use.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration // one way

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	late   latencyHist // how late chunks left, one sample per write
	wg     sync.WaitGroup
}

// Lateness returns the median, 99th percentile and maximum of how late
// the proxy's writes left after their first chunk was due, and the number
// of writes: the simulated delay is the asked one plus this.
func (p *delayProxy) Lateness() (p50, p99, maxLate time.Duration, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.late.quantile(0.5), p.late.quantile(0.99), p.late.max, p.late.n
}

// wrote records the lateness of a write whose first chunk was due at due.
func (p *delayProxy) wrote(due time.Time) {
	late := time.Since(due)
	p.mu.Lock()
	p.late.add(late)
	p.mu.Unlock()
}

// newDelayProxy listens on 127.0.0.1 on a free port and forwards to
// target (host:port), delaying each direction by oneWay.
func newDelayProxy(target string, oneWay time.Duration) (*delayProxy, error) {
	if oneWay < 0 {
		return nil, fmt.Errorf("delay proxy: negative delay %v", oneWay)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("delay proxy: %w", err)
	}
	p := &delayProxy{ln: ln, target: target, delay: oneWay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's listening address, host:port.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops the proxy: no new connections, every open one closed. It
// returns when all the proxy's goroutines have exited.
func (p *delayProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c to be closed by Close; false when the proxy is closed.
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target and runs both directions until either
// side closes.
func (p *delayProxy) serve(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c) {
		_ = c.Close()
		return
	}
	defer p.untrack(c)
	defer c.Close()
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	defer up.Close()
	var dirs sync.WaitGroup
	dirs.Add(2)
	go func() { defer dirs.Done(); p.pipe(up, c) }()
	go func() { defer dirs.Done(); p.pipe(c, up) }()
	dirs.Wait()
}

// chunk is bytes read at a time; they leave at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk delayed by p.delay from the moment
// it was read. It returns when src ends or either side fails; it then
// closes both, so the other direction ends too.
func (p *delayProxy) pipe(dst, src net.Conn) {
	q := make(chan chunk, proxyQueue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.release(dst, q)
		// dst failed or q was closed: make src's reader return too.
		_ = src.Close()
		for range q { // let the reader exit if it is blocked on a full queue
		}
	}()
	buf := make([]byte, proxyReadSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	_ = dst.Close()
}

// release writes the chunks of q to dst once each is due, every chunk
// already due in one write. It returns when q is closed and drained or a
// write fails.
func (p *delayProxy) release(dst net.Conn, q <-chan chunk) {
	var bufs net.Buffers
	for c := range q {
		if d := time.Until(c.due); d > 0 {
			sleepPrecise(d)
		}
		bufs, first := append(bufs[:0], c.b), c.due
		now := time.Now()
	more:
		for len(bufs) < 64 {
			select {
			case n, ok := <-q:
				if !ok {
					break more
				}
				if n.due.After(now) {
					// Not due yet: write what is, then wait for this one.
					p.wrote(first)
					if _, err := writeBuffers(dst, bufs); err != nil {
						return
					}
					if d := time.Until(n.due); d > 0 {
						sleepPrecise(d)
					}
					bufs, first, now = append(bufs[:0], n.b), n.due, time.Now()
					continue
				}
				bufs = append(bufs, n.b)
			default:
				break more
			}
		}
		p.wrote(first)
		if _, err := writeBuffers(dst, bufs); err != nil {
			return
		}
	}
}

// writeBuffers writes bufs to w (one writev on a TCP connection).
func writeBuffers(w io.Writer, bufs net.Buffers) (int64, error) {
	b := bufs // WriteTo consumes its receiver, not the caller's slice
	return b.WriteTo(w)
}
