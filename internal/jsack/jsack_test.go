package jsack

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestParse compares Parse with nats.go's own parser of
// the delivery metadata, on both forms of the reply subject.
func TestParse(t *testing.T) {
	good := []string{
		"$JS.ACK.IN.dur.1.42.7.1700000000000000000.3",
		"$JS.ACK.hub.ACCHASH.IN.dur.2.18446744073709551615.9.1700000000000000000.0.XYZ",
		"$JS.ACK._.ACCHASH.IN.dur.1.5.6.1.12345",
		"$JS.ACK.hub.ACCHASH.IN.dur.1.5.6.1.12345.tok.more",
	}
	for _, reply := range good {
		want, err := jsMeta(reply)
		if err != nil {
			t.Fatalf("%s: jetstream Metadata: %v", reply, err)
		}
		got, ok := Parse(reply)
		if !ok {
			t.Errorf("Parse(%q) failed; jetstream reads %+v", reply, want.Sequence)
			continue
		}
		if got.Stream != want.Sequence.Stream || got.Consumer != want.Sequence.Consumer || got.Pending != want.NumPending ||
			got.Time != want.Timestamp.UnixNano() {
			t.Errorf("Parse(%q) = %+v, want stream %d consumer %d pending %d", reply, got,
				want.Sequence.Stream, want.Sequence.Consumer, want.NumPending)
		}
	}
	bad := []string{
		"", "_INBOX.x", "$JS.ACK.", "$JS.ACK.IN.dur.1.42.7.1700.3.4", // 8 tokens after the prefix
		"$JS.ACK.IN.dur.1.x.7.1.3", "$JS.ACK.IN.dur.1.-1.7.1.3", "$JS.ACK.IN.dur.1.42..1.3",
		"$JS.ACK.IN.dur.1.18446744073709551616.7.1.3", // overflows
		"$JS.ACK.IN.dur.1.42.7.1.",
	}
	for _, reply := range bad {
		if got, ok := Parse(reply); ok {
			t.Errorf("Parse(%q) = %+v, want failure", reply, got)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	reply := "$JS.ACK.hub.ACCHASH.IN.dur.2.123456.99.1700000000000000000.17.XYZ"
	if n := testing.AllocsPerRun(100, func() { _, _ = Parse(reply) }); n != 0 {
		t.Errorf("Parse allocates %v times, want 0", n)
	}
}

// jsMeta parses reply with nats.go's own parser (nats.Msg.Metadata wants
// the message bound to a subscription, not necessarily a live one).
func jsMeta(reply string) (*jetstream.MsgMetadata, error) {
	m := &nats.Msg{Subject: "x", Reply: reply, Sub: &nats.Subscription{}}
	md, err := m.Metadata()
	if err != nil {
		return nil, err
	}
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: md.Sequence.Stream, Consumer: md.Sequence.Consumer},
		NumPending: md.NumPending, Timestamp: md.Timestamp}, nil
}
