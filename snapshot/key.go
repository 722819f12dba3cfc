package snapshot

import (
	"fmt"
	"strings"
)

const hexDigits = "0123456789ABCDEF"

// JoinKey returns the conventional logical key of a learner, "<pipeline>.<key>".
// It is injective as long as pipeline names contain no '.'.
func JoinKey(pipeline, key string) string { return pipeline + "." + key }

// EncodeKey maps an arbitrary non-empty logical key to a valid KV key,
// injectively: bytes in [-_/a-zA-Z0-9] are kept, a '.' is kept when it is
// neither first nor last nor next to another '.', and every other byte
// (including '=' and those dots) is written "=XX" in upper-case hex.
func EncodeKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("snapshot: empty key")
	}
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '/':
			b.WriteByte(c)
		case c == '.' && i > 0 && i < len(key)-1 && key[i-1] != '.' && key[i+1] != '.':
			b.WriteByte(c)
		default:
			b.WriteByte('=')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xF])
		}
	}
	return b.String(), nil
}

// DecodeKey inverts EncodeKey.
func DecodeKey(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("snapshot: key %q: truncated escape at byte %d", s, i)
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("snapshot: key %q: bad escape at byte %d", s, i)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
