package jsack

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseDelivery compares Parse with nats.go's own parser of
// $JS.ACK reply subjects (see jsMeta) on arbitrary strings:
//
//   - sound: whatever Parse accepts, nats.go accepts too, and the
//     stream sequence, consumer sequence and pending count agree;
//   - complete: whatever nats.go accepts whose sequence, timestamp and
//     pending tokens are uint64s in canonical decimal (as the server writes
//     them: no sign, no leading zeros), Parse accepts.
//
// Where they differ by design, Parse is stricter: nats.go reads a
// non-numeric or empty token as 0 and lets a number past 2⁶⁴−1 wrap, and
// Parse reports ok false instead (the caller then falls back to
// Metadata); it also gives up on a token longer than 20 bytes, which only
// leading zeros can make (found by this fuzzer; kept in testdata/fuzz).
//
// The oracle is nats.Msg.Metadata: jetstream.Msg values are only made by a
// consumer on a live connection (the constructor is unexported), and both
// Metadata methods are the same code over nats.go's internal/parser
// (GetMetadataFields and ParseNum).
func FuzzParseDelivery(f *testing.F) {
	for _, s := range []string{
		"$JS.ACK.IN.dur.1.42.7.1700000000000000000.3",
		"$JS.ACK.hub.ACCHASH.IN.dur.2.18446744073709551615.9.1700000000000000000.0.XYZ",
		"$JS.ACK._.ACCHASH.IN.dur.1.5.6.1.12345",
		"$JS.ACK.hub.ACCHASH.IN.dur.1.5.6.1.12345.tok.more",
		"$JS.ACK.IN.dur.1.18446744073709551616.7.1.3",
		"$JS.ACK.IN.dur.1.42..1.3",
		"$JS.ACK.IN.dur.1.42.7.1700.3.4",
		"$JS.ACK.a.b.c.d.e.f.g.h.i",
		"_INBOX.abc.def",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		got, ok := Parse(reply)
		want, err := jsMeta(reply)
		if ok {
			if err != nil {
				t.Fatalf("Parse(%q) = %+v, but nats.go rejects it: %v", reply, got, err)
			}
			if got.Stream != want.Sequence.Stream || got.Consumer != want.Sequence.Consumer || got.Pending != want.NumPending ||
				got.Time != want.Timestamp.UnixNano() {
				t.Fatalf("Parse(%q) = %+v, nats.go reads stream %d consumer %d pending %d", reply, got,
					want.Sequence.Stream, want.Sequence.Consumer, want.NumPending)
			}
			return
		}
		if err != nil {
			return
		}
		// nats.go accepted it: Parse must too, unless a token it
		// reads is not a canonical decimal uint64.
		tokens := strings.Split(reply, ".")
		first := 5 // index of <sseq> in the old form: $JS ACK stream consumer delivered sseq
		if len(tokens) > 9 {
			first = 7 // new form: after <domain> and <account hash>
		}
		for _, tok := range tokens[first : first+4] { // sseq, cseq, tm, pending
			if v, err := strconv.ParseUint(tok, 10, 64); err != nil || strconv.FormatUint(v, 10) != tok {
				return
			}
		}
		t.Fatalf("Parse(%q) failed; nats.go reads stream %d consumer %d pending %d", reply,
			want.Sequence.Stream, want.Sequence.Consumer, want.NumPending)
	})
}
