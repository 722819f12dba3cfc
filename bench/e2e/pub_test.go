package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/internal/natstest"
)

// TestAckPublisher publishes into a JetStream stream with one reused
// message, header and payload buffer, waits for every PubAck, and checks
// that the stream holds each payload as it was when it was published; a
// subject no stream captures is reported as an error.
func TestAckPublisher(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, url := natstest.RunServer(t)
	nc, js := natstest.Connect(t, url)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ACKPUB", Subjects: []string{"ackpub.>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	p, err := newAckPublisher(nc, 8) // fewer slots than messages: publish must wait for acks
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if len(p.inbox) != len("_INBOX.abcdef.ghijkl") || !strings.HasPrefix(p.inbox, "_INBOX.") {
		t.Errorf("reply subject %q: want the shape of PublishMsgAsync's, _INBOX.<6>.<6>", p.inbox)
	}
	const n = 500
	m := &nats.Msg{Header: nats.Header{"Content-Type": {"text/plain"}}}
	for i := range n {
		m.Subject = "ackpub." + strconv.Itoa(i%3)
		m.Data = fmt.Appendf(m.Data[:0], "payload %d", i)
		if err := p.publish(ctx, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := p.wait(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if len(p.slots) != 0 {
		t.Errorf("%d slots taken after wait", len(p.slots))
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	for _, seq := range []uint64{1, 2, 250, n} {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		i := int(seq - 1)
		if want := fmt.Sprintf("payload %d", i); string(raw.Data) != want || raw.Subject != "ackpub."+strconv.Itoa(i%3) ||
			raw.Header.Get("Content-Type") != "text/plain" {
			t.Errorf("seq %d: %q on %s (%v), want %q on ackpub.%d", seq, raw.Data, raw.Subject, raw.Header, want, i%3)
		}
	}

	m.Subject = "nostream.here"
	err = p.publish(ctx, m)
	if err == nil {
		err = p.wait(ctx, 10*time.Second)
	}
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("publish to a subject without a stream: err %v, want a 503 status", err)
	}
}

// TestPacer checks that the pacer never lets a message go before it is
// due, keeps the rate, and wakes up at most once per quantum.
func TestPacer(t *testing.T) {
	if _, err := newPacer(0, 0); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := newPacer(1000, -time.Millisecond); err == nil {
		t.Error("negative quantum accepted")
	}
	const rate, n = 20000.0, 400 // 20 ms
	quantum := time.Millisecond
	p, err := newPacer(rate, quantum)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p.wait(i)
		if now := time.Now(); now.Before(p.due(i)) {
			t.Fatalf("message %d sent %v early", i, p.due(i).Sub(now))
		}
	}
	elapsed := time.Since(p.start)
	if min := p.due(n - 1).Sub(p.start); elapsed < min {
		t.Errorf("400 messages in %v, want ≥ %v", elapsed, min)
	}
	if limit := int(elapsed/quantum) + 1; p.wakeups > limit {
		t.Errorf("%d wake-ups in %v, want ≤ %d (one per quantum)", p.wakeups, elapsed, limit)
	}
	if p.wakeups == 0 || p.maxBurst < 2 {
		t.Errorf("wake-ups %d, max burst %d: want bursts of ≈ 20", p.wakeups, p.maxBurst)
	}
	if s := p.summary(n); !strings.Contains(s, "messages per wake-up") {
		t.Errorf("summary %q", s)
	}
}
