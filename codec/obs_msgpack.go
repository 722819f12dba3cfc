package codec

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// mpParser decodes observations from msgpack without reflection. Every
// read checks the remaining length first, so truncated input is an error.
type mpParser struct {
	d obsDecoder
	b []byte
	i int
	// noExt refuses extension values in skip. It is set where skip vets a
	// body before the msgpack library decodes it: the library decodes an
	// extension's payload on its own, past the lengths skip bounded (found
	// by FuzzDecodeOutput: a 35-byte output whose extension held a map32
	// header of 8×10⁸ entries ran the process out of memory).
	noExt bool
}

// mpKind names the msgpack type starting with code c, for error messages.
func mpKind(c byte) string {
	switch {
	case c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3):
		return "an integer"
	case c >= 0x80 && c <= 0x8f, c == 0xde, c == 0xdf:
		return "a map"
	case c >= 0x90 && c <= 0x9f, c == 0xdc, c == 0xdd:
		return "an array"
	case c >= 0xa0 && c <= 0xbf, c >= 0xd9 && c <= 0xdb:
		return "a string"
	case c == 0xc0:
		return "nil"
	case c == 0xc2, c == 0xc3:
		return "a bool"
	case c >= 0xc4 && c <= 0xc6:
		return "binary"
	case c == 0xca, c == 0xcb:
		return "a float"
	case c >= 0xc7 && c <= 0xc9, c >= 0xd4 && c <= 0xd8:
		return "an extension"
	}
	return "an invalid code"
}

func (p *mpParser) truncated(what string) error {
	return p.d.fail(ErrMalformed, "msgpack truncated in %s at byte %d of %d", what, p.i, len(p.b))
}

func (p *mpParser) left() int { return len(p.b) - p.i }

// peek returns the next code without consuming it.
func (p *mpParser) peek(what string) (byte, error) {
	if p.i >= len(p.b) {
		return 0, p.truncated(what)
	}
	return p.b[p.i], nil
}

// uint reads an n-byte big-endian unsigned integer (n = 1, 2, 4 or 8).
func (p *mpParser) uint(n int, what string) (uint64, error) {
	if p.left() < n {
		return 0, p.truncated(what)
	}
	b := p.b[p.i : p.i+n]
	p.i += n
	switch n {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// length reads the element count of an array (isMap false) or map, or
// returns ok false (consuming nothing) if the next value is not one. The
// count is checked against the bytes left, each element taking at least one.
func (p *mpParser) length(isMap bool, what string) (n int, ok bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return 0, false, err
	}
	var size int
	switch {
	case !isMap && c >= 0x90 && c <= 0x9f:
		p.i++
		n = int(c & 0x0f)
	case isMap && c >= 0x80 && c <= 0x8f:
		p.i++
		n = int(c & 0x0f)
	case !isMap && c == 0xdc, isMap && c == 0xde:
		size = 2
	case !isMap && c == 0xdd, isMap && c == 0xdf:
		size = 4
	default:
		return 0, false, nil
	}
	if size > 0 {
		p.i++
		v, err := p.uint(size, what)
		if err != nil {
			return 0, false, err
		}
		n = int(v)
	}
	per := 1
	if isMap {
		per = 2
	}
	if uint64(n)*uint64(per) > uint64(p.left()) {
		return 0, false, p.truncated(what)
	}
	return n, true, nil
}

// str reads a string and returns its bytes (aliasing the input), or ok
// false (consuming nothing) if the next value is not a string.
func (p *mpParser) str(what string) (s []byte, ok bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return nil, false, err
	}
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		p.i++
		n = int(c & 0x1f)
	case c >= 0xd9 && c <= 0xdb:
		p.i++
		v, err := p.uint(1<<(c-0xd9), what)
		if err != nil {
			return nil, false, err
		}
		if v > uint64(p.left()) {
			return nil, false, p.truncated(what)
		}
		n = int(v)
	default:
		return nil, false, nil
	}
	if n > p.left() {
		return nil, false, p.truncated(what)
	}
	s = p.b[p.i : p.i+n]
	p.i += n
	return s, true, nil
}

// number reads an integer or float as a float64, or returns ok false
// (consuming nothing) if the next value is not a number.
func (p *mpParser) number(what string) (f float64, ok bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return 0, false, err
	}
	switch {
	case c <= 0x7f:
		p.i++
		return float64(c), true, nil
	case c >= 0xe0:
		p.i++
		return float64(int8(c)), true, nil
	}
	var v uint64
	switch c {
	case 0xca:
		p.i++
		v, err = p.uint(4, what)
		return float64(math.Float32frombits(uint32(v))), err == nil, err
	case 0xcb:
		p.i++
		v, err = p.uint(8, what)
		return math.Float64frombits(v), err == nil, err
	case 0xcc, 0xcd, 0xce, 0xcf:
		p.i++
		v, err = p.uint(1<<(c-0xcc), what)
		return float64(v), err == nil, err
	case 0xd0:
		p.i++
		v, err = p.uint(1, what)
		return float64(int8(v)), err == nil, err
	case 0xd1:
		p.i++
		v, err = p.uint(2, what)
		return float64(int16(v)), err == nil, err
	case 0xd2:
		p.i++
		v, err = p.uint(4, what)
		return float64(int32(v)), err == nil, err
	case 0xd3:
		p.i++
		v, err = p.uint(8, what)
		return float64(int64(v)), err == nil, err
	}
	return 0, false, nil
}

// skip consumes one value of any type, nesting at most maxDepth deep.
func (p *mpParser) skip(depth int) error {
	if depth > maxDepth {
		return p.d.fail(ErrMalformed, "msgpack nested deeper than %d", maxDepth)
	}
	c, err := p.peek("skipped value")
	if err != nil {
		return err
	}
	if p.noExt && (c >= 0xc7 && c <= 0xc9 || c >= 0xd4 && c <= 0xd8) {
		return p.d.fail(ErrMalformed, "msgpack extension (code 0x%02x) at byte %d, not allowed here", c, p.i)
	}
	if n, ok, err := p.length(false, "skipped array"); err != nil {
		return err
	} else if ok {
		for range n {
			if err := p.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	if n, ok, err := p.length(true, "skipped map"); err != nil {
		return err
	} else if ok {
		for range 2 * n {
			if err := p.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	p.i++
	var size uint64 // bytes of payload after the code (and its length field)
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
	case c >= 0xa0 && c <= 0xbf:
		size = uint64(c & 0x1f)
	case c == 0xc4, c == 0xd9:
		size, err = p.uint(1, "skipped value")
	case c == 0xc5, c == 0xda:
		size, err = p.uint(2, "skipped value")
	case c == 0xc6, c == 0xdb:
		size, err = p.uint(4, "skipped value")
	case c == 0xc7:
		size, err = p.uint(1, "skipped value")
		size++ // type byte
	case c == 0xc8:
		size, err = p.uint(2, "skipped value")
		size++
	case c == 0xc9:
		size, err = p.uint(4, "skipped value")
		size++
	case c == 0xca, c == 0xce, c == 0xd2:
		size = 4
	case c == 0xcb, c == 0xcf, c == 0xd3:
		size = 8
	case c == 0xcc, c == 0xd0:
		size = 1
	case c == 0xcd, c == 0xd1:
		size = 2
	case c >= 0xd4 && c <= 0xd8:
		size = 1 + 1<<(c-0xd4)
	default:
		return p.d.fail(ErrMalformed, "invalid msgpack code 0x%02x at byte %d", c, p.i-1)
	}
	if err != nil {
		return err
	}
	if size > uint64(p.left()) {
		return p.truncated("skipped value")
	}
	p.i += int(size)
	return nil
}

func (p *mpParser) top() error {
	if len(p.b) == 0 {
		return p.d.fail(ErrMalformed, "empty payload")
	}
	if p.b[0] < 0x80 && looksText(p.b) {
		// A positive fixint cannot start an observation: this is text
		// (nats pub subj hello), not msgpack read as the integer 104.
		return p.d.fail(ErrMalformed, "payload is text (%s), not JSON or msgpack: send a JSON object {\"x\":[…]} or array [x1,…], or msgpack", quoteClip(p.b))
	}
	l := lexer{p.vector, p.text, p.ts, p.scalar, p.meta, p.skipField}
	if err := p.element(&l, true, "payload", "payload "); err != nil {
		return err
	}
	if p.i != len(p.b) {
		return p.d.fail(ErrMalformed, "%d trailing bytes after the payload", len(p.b)-p.i)
	}
	return nil
}

// element reads one observation, an array (its x) or a map: the payload
// (allowBatch) or an element of a batch. what names it in an error on
// truncation, is prefixes the error on another value.
func (p *mpParser) element(l *lexer, allowBatch bool, what, is string) error {
	if n, ok, err := p.length(false, what); err != nil || ok {
		if err != nil {
			return err
		}
		o, err := p.d.slot()
		if err != nil {
			return err
		}
		o.X, err = p.vectorN(o.X, "x", n)
		return err
	}
	n, ok, err := p.length(true, what)
	if err != nil {
		return err
	}
	if !ok {
		return p.d.fail(ErrMalformed, "%sis %s, want a map or an array", is, mpKind(p.b[p.i]))
	}
	return p.object(l, n, allowBatch)
}

// vector reads an array of numbers into x[:0].
func (p *mpParser) vector(x []float64, field string) ([]float64, error) {
	n, ok, err := p.length(false, "field x")
	if err != nil {
		return x, err
	}
	if !ok {
		return x, p.d.fail(ErrMalformed, "field %s: is %s, want an array", field, mpKind(p.b[p.i]))
	}
	return p.vectorN(x, field, n)
}

// vectorN reads n numbers (the array header is consumed) into x[:0].
func (p *mpParser) vectorN(x []float64, field string, n int) ([]float64, error) {
	if n == 0 {
		return x, p.d.fail(ErrMalformed, "field %s: empty", field)
	}
	if err := p.d.checkLen(field, n); err != nil {
		return x, err
	}
	x = grow(x, n)[:n]
	b, i := p.b, p.i
	for j := range x {
		// float64, the encoding producers write, is read in line: the
		// general reader below costs several times as many instructions
		// per value.
		if i+9 <= len(b) && b[i] == 0xcb {
			x[j] = math.Float64frombits(binary.BigEndian.Uint64(b[i+1 : i+9]))
			i += 9
			continue
		}
		p.i = i
		f, ok, err := p.number("field x")
		if err != nil {
			return x[:j], err
		}
		if !ok {
			return x[:j], p.d.fail(ErrMalformed, "field %s: element %d is %s", field, j, mpKind(p.b[p.i]))
		}
		x[j] = f
		i = p.i
	}
	p.i = i
	return x, nil
}

// object reads a map of n entries (the header is consumed): one
// observation, or a batch when allowBatch.
func (p *mpParser) object(l *lexer, n int, allowBatch bool) error {
	ob := object{d: &p.d, batch: allowBatch}
	for range n {
		k, ok, err := p.str("map key")
		if err != nil {
			return err
		}
		if !ok {
			return p.d.fail(ErrMalformed, "map key is %s, want a string", mpKind(p.b[p.i]))
		}
		batch, err := ob.read(l, k)
		if batch {
			err = p.batch(l)
		}
		if err != nil {
			return err
		}
	}
	return ob.end()
}

// text reads a string or nil (see lexer).
func (p *mpParser) text(what string) (s []byte, lone, null bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return nil, false, false, err
	}
	if c == 0xc0 {
		p.i++
		return nil, false, true, nil
	}
	s, ok, err := p.str(what)
	if err != nil {
		return nil, false, false, err
	}
	if !ok {
		return nil, false, false, p.d.fail(ErrMalformed, "%s: is %s, want a string", what, mpKind(c))
	}
	return s, false, false, nil
}

func (p *mpParser) skipField() error {
	if p.i >= len(p.b) {
		return p.truncated("map value")
	}
	return p.skip(1)
}

func (p *mpParser) batch(l *lexer) error {
	n, ok, err := p.length(false, "field batch")
	if err != nil {
		return err
	}
	if !ok {
		return p.d.fail(ErrMalformed, "field batch: is %s, want an array", mpKind(p.b[p.i]))
	}
	if n == 0 {
		return p.d.fail(ErrMalformed, "field batch: empty")
	}
	if n > p.d.lim.MaxBatch {
		return p.d.fail(ErrTooLarge, "field batch: %d observations, limit %d", n, p.d.lim.MaxBatch)
	}
	for j := range n {
		p.d.elem = j
		if err := p.element(l, false, "batch element", ""); err != nil {
			return err
		}
	}
	p.d.elem = -1
	return nil
}

// ts reads a timestamp: a number of seconds, an RFC 3339 string, a msgpack
// timestamp extension (type −1), or nil (0).
func (p *mpParser) ts() (float64, error) {
	c, err := p.peek("field ts")
	if err != nil {
		return 0, err
	}
	if c == 0xc0 {
		p.i++
		return 0, nil
	}
	if f, ok, err := p.number("field ts"); err != nil || ok {
		return f, err
	}
	if s, ok, err := p.str("field ts"); err != nil {
		return 0, err
	} else if ok {
		return parseTime(&p.d, s)
	}
	// Timestamp extension: fixext4 (uint32 seconds), fixext8 (30-bit
	// nanoseconds, 34-bit seconds) or ext8 of 12 bytes (uint32 ns, int64 s).
	var size int
	switch {
	case c == 0xd6:
		size = 4
	case c == 0xd7:
		size = 8
	case c == 0xc7 && p.left() >= 2 && p.b[p.i+1] == 12:
		size = 12
		p.i++
	default:
		return 0, p.d.fail(ErrMalformed, "field ts: is %s, want a number, a string or a timestamp", mpKind(c))
	}
	if p.left() < 2+size {
		return 0, p.truncated("field ts")
	}
	if int8(p.b[p.i+1]) != -1 {
		return 0, p.d.fail(ErrMalformed, "field ts: extension type %d, want -1 (timestamp)", int8(p.b[p.i+1]))
	}
	b := p.b[p.i+2 : p.i+2+size]
	p.i += 2 + size
	var sec int64
	var nsec uint32
	switch size {
	case 4:
		sec = int64(binary.BigEndian.Uint32(b))
	case 8:
		v := binary.BigEndian.Uint64(b)
		nsec, sec = uint32(v>>34), int64(v&(1<<34-1))
	default:
		nsec, sec = binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:]))
	}
	if nsec >= 1e9 {
		return 0, p.d.fail(ErrMalformed, "field ts: timestamp nanoseconds %d ≥ 1e9", nsec)
	}
	return float64(sec) + float64(nsec)/1e9, nil
}

// parseTime parses an RFC 3339 timestamp into seconds since the Unix epoch.
func parseTime(d *obsDecoder, s []byte) (float64, error) {
	t, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil {
		return 0, d.fail(ErrMalformed, "field ts: %q is not an RFC 3339 time", s)
	}
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9, nil
}

// scalar reads nil, a bool, a number or a string; a string comes back as
// raw bytes (aliasing the input) with Kind ScalarString, for the caller to
// check and convert (lone is always false: msgpack has no escapes). Any
// other type is malformed.
func (p *mpParser) scalar(what, want string) (s Scalar, raw []byte, lone bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return Scalar{}, nil, false, err
	}
	switch c {
	case 0xc0:
		p.i++
		return Scalar{Kind: ScalarNull}, nil, false, nil
	case 0xc2, 0xc3:
		p.i++
		return Bool(c == 0xc3), nil, false, nil
	}
	if raw, ok, err := p.str(what); err != nil {
		return Scalar{}, nil, false, err
	} else if ok {
		return Scalar{Kind: ScalarString}, raw, false, nil
	}
	f, ok, err := p.number(what)
	if err != nil {
		return Scalar{}, nil, false, err
	}
	if !ok {
		return Scalar{}, nil, false, p.d.fail(ErrMalformed, "%s: is %s, want %s", what, mpKind(c), want)
	}
	return Number(f), nil, false, nil
}

// meta reads the meta map (or nil), appending its entries to m.
func (p *mpParser) meta(m Meta) (Meta, error) {
	c, err := p.peek("field meta")
	if err != nil {
		return m, err
	}
	if c == 0xc0 {
		p.i++
		return m, nil
	}
	n, ok, err := p.length(true, "field meta")
	if err != nil {
		return m, err
	}
	if !ok {
		return m, p.d.fail(ErrMalformed, "field meta: is %s, want a map", mpKind(c))
	}
	if n > p.d.lim.MaxMeta {
		return m, p.d.fail(ErrTooLarge, "field meta: %d entries, limit %d", n, p.d.lim.MaxMeta)
	}
	used := 0
	for range n {
		k, ok, err := p.str("field meta")
		if err != nil {
			return m, err
		}
		if !ok {
			return m, p.d.fail(ErrMalformed, "field meta: key is %s, want a string", mpKind(p.b[p.i]))
		}
		v, raw, _, err := p.scalar("field meta", "nil, a bool, a number or a string")
		if err != nil {
			return m, err
		}
		if err := p.d.addMeta(&m, k, false, v, raw, false, &used); err != nil {
			return m, err
		}
	}
	return m, nil
}

// looksText reports whether b is printable UTF-8 text (tabs and line
// breaks allowed).
func looksText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// quoteClip quotes text for a message, at most 40 bytes of it.
func quoteClip(b []byte) string {
	if len(b) > 40 {
		return strconv.Quote(strings.ToValidUTF8(string(b[:40]), "")) + "…"
	}
	return strconv.Quote(string(b))
}
