package jsack

import "strings"

// Delivery is what a consumer needs from a JetStream delivery's metadata.
type Delivery struct {
	Stream, Consumer, Pending uint64 // stream and consumer sequences, messages left
	Time                      int64  // the message's stream timestamp, ns since the epoch
}

// Parse reads the stream and consumer sequences, the stream timestamp and
// the pending count from the reply subject of a JetStream delivery without allocating
// (jetstream.Msg.Metadata allocates a struct per message). Both forms are
// accepted:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>…]
//
// ok is false for anything else (the caller then falls back to Metadata).
func Parse(reply string) (d Delivery, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return d, false
	}
	rest := reply[len(prefix):]
	// Tokens after the prefix: 7 in the old form, at least 9 in the new one.
	n := strings.Count(rest, ".") + 1
	var skip int // tokens before <delivered>
	switch {
	case n == 7:
		skip = 2
	case n >= 9:
		skip = 4
	default:
		return d, false
	}
	for range skip + 1 { // through <delivered>
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return d, false
		}
		rest = rest[i+1:]
	}
	var fields [4]uint64 // sseq, cseq, tm, pending
	for i := range fields {
		tok := rest
		if j := strings.IndexByte(rest, '.'); j >= 0 {
			tok, rest = rest[:j], rest[j+1:]
		} else {
			rest = ""
		}
		v, ok := parseUint(tok)
		if !ok {
			return d, false
		}
		fields[i] = v
	}
	return Delivery{Stream: fields[0], Consumer: fields[1], Pending: fields[3], Time: int64(fields[2])}, true
}

// parseUint parses a non-empty decimal token that fits in a uint64.
func parseUint(s string) (uint64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		nv := v*10 + uint64(c-'0')
		if nv < v {
			return 0, false
		}
		v = nv
	}
	return v, true
}
