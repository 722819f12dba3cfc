package codec

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonParser decodes observations from JSON without reflection. It accepts
// exactly the JSON grammar (RFC 8259) for the values it reads and skips.
type jsonParser struct {
	d obsDecoder
	b []byte
	i int
	// lone reports that the last string read held a \u escape of an
	// unpaired UTF-16 surrogate (decoded as U+FFFD).
	lone bool
}

// jsonKind names the JSON value starting with c, for error messages.
func jsonKind(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a bool"
	case 'n':
		return "null"
	}
	if c == '-' || (c >= '0' && c <= '9') {
		return "a number"
	}
	return "invalid JSON"
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte without consuming it.
func (p *jsonParser) peek(what string) (byte, error) {
	p.ws()
	if p.i >= len(p.b) {
		return 0, p.d.fail(ErrMalformed, "json truncated in %s", what)
	}
	return p.b[p.i], nil
}

func (p *jsonParser) unexpected(what string) error {
	if p.i >= len(p.b) {
		return p.d.fail(ErrMalformed, "json truncated in %s", what)
	}
	return p.d.fail(ErrMalformed, "json: unexpected %q at byte %d in %s", p.b[p.i], p.i, what)
}

// expect consumes c after optional whitespace.
func (p *jsonParser) expect(c byte, what string) error {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return nil
	}
	return p.unexpected(what)
}

// more is called after an element of an array or object: it consumes ','
// and reports true, or consumes end and reports false.
func (p *jsonParser) more(end byte, what string) (bool, error) {
	p.ws()
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case ',':
			p.i++
			return true, nil
		case end:
			p.i++
			return false, nil
		}
	}
	return false, p.unexpected(what)
}

// empty consumes end if it is the next byte (an empty array or object).
func (p *jsonParser) empty(end byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == end {
		p.i++
		return true
	}
	return false
}

// number reads a JSON number, or returns ok false (consuming nothing) if
// the next value does not start like one.
func (p *jsonParser) number(what string) (f float64, ok bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return 0, false, err
	}
	if c != '-' && (c < '0' || c > '9') {
		return 0, false, nil
	}
	start := p.i
	b := p.b
	i := p.i
	if b[i] == '-' {
		i++
	}
	// Each part must hold a digit: ok is false from the first that does not.
	j := skipDigits(b, i)
	if i < len(b) && b[i] == '0' {
		j = i + 1
	}
	ok = j > i
	i = j
	if ok && i < len(b) && b[i] == '.' {
		j = skipDigits(b, i+1)
		ok = j > i+1
		i = j
	}
	if ok && i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j = skipDigits(b, i)
		ok = j > i
		i = j
	}
	if !ok {
		p.i = i
		return 0, false, p.unexpected(what)
	}
	p.i = i
	// The conversion does not allocate for tokens up to 32 bytes: ParseFloat
	// does not retain its argument.
	tok := b[start:i]
	f, err = strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return 0, false, p.d.fail(ErrMalformed, "%s: number %s out of range", what, tok)
	}
	return f, true, nil
}

// skipDigits returns the index of the first byte at or after i in b that
// is not an ASCII digit.
func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// str reads a JSON string and returns its decoded bytes (aliasing the input
// when it has no escapes), or ok false (consuming nothing) if the next value
// is not a string.
func (p *jsonParser) str(what string) (s []byte, ok bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return nil, false, err
	}
	if c != '"' {
		return nil, false, nil
	}
	start := p.i
	escaped := false
	p.lone = false
	for i := start + 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			p.i = i + 1
			if !escaped {
				return p.b[start+1 : i], true, nil
			}
			u, lone, err := unescape(p.b[start+1 : i])
			if err != nil {
				return nil, false, p.d.fail(ErrMalformed, "%s: bad string: %v", what, err)
			}
			p.lone = lone
			return u, true, nil
		case c == '\\':
			escaped = true
			i++ // the escaped byte cannot end the string
		case c < 0x20:
			p.i = i
			return nil, false, p.d.fail(ErrMalformed, "%s: control character 0x%02x in string", what, c)
		}
	}
	p.i = len(p.b)
	return nil, false, p.d.fail(ErrMalformed, "json truncated in %s", what)
}

// literal consumes one of true, false, null.
func (p *jsonParser) literal(what string) error {
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
			p.i += len(lit)
			return nil
		}
	}
	return p.unexpected(what)
}

// skip consumes one value of any type, nesting at most maxDepth deep.
func (p *jsonParser) skip(depth int) error {
	if depth > maxDepth {
		return p.d.fail(ErrMalformed, "json nested deeper than %d", maxDepth)
	}
	c, err := p.peek("skipped value")
	if err != nil {
		return err
	}
	switch c {
	case '"':
		_, _, err := p.str("skipped value")
		return err
	case '[', '{':
		end := byte(']')
		if c == '{' {
			end = '}'
		}
		p.i++
		if p.empty(end) {
			return nil
		}
		for {
			if c == '{' {
				if _, ok, err := p.str("object key"); err != nil {
					return err
				} else if !ok {
					return p.unexpected("object key")
				}
				if err := p.expect(':', "object"); err != nil {
					return err
				}
			}
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			more, err := p.more(end, "skipped value")
			if err != nil || !more {
				return err
			}
		}
	case 't', 'f', 'n':
		return p.literal("skipped value")
	}
	if _, ok, err := p.number("skipped value"); err != nil || ok {
		return err
	}
	return p.unexpected("skipped value")
}

func (p *jsonParser) top() error {
	c, err := p.peek("payload")
	if err != nil {
		return p.d.fail(ErrMalformed, "empty payload")
	}
	l := lexer{p.vector, p.text, p.ts, p.scalar, p.meta, p.skipField}
	if err := p.element(&l, c, true, "payload "); err != nil {
		return err
	}
	p.ws()
	if p.i != len(p.b) {
		return p.d.fail(ErrMalformed, "%d trailing bytes after the payload", len(p.b)-p.i)
	}
	return nil
}

// element reads one observation, an array (its x) or an object, whose
// first byte c has been peeked: the payload (allowBatch) or an element of
// a batch. is prefixes the error on another value.
func (p *jsonParser) element(l *lexer, c byte, allowBatch bool, is string) error {
	switch c {
	case '[':
		o, err := p.d.slot()
		if err != nil {
			return err
		}
		o.X, err = p.vector(o.X, "x")
		return err
	case '{':
		return p.object(l, allowBatch)
	}
	return p.d.fail(ErrMalformed, "%sis %s, want an object or an array", is, jsonKind(c))
}

// vector reads an array of numbers into x[:0].
func (p *jsonParser) vector(x []float64, field string) ([]float64, error) {
	c, err := p.peek("field x")
	if err != nil {
		return x, err
	}
	if c != '[' {
		return x, p.d.fail(ErrMalformed, "field %s: is %s, want an array", field, jsonKind(c))
	}
	p.i++
	x = x[:0]
	if p.empty(']') {
		return x, p.d.fail(ErrMalformed, "field %s: empty", field)
	}
	for j := 0; ; j++ {
		if j >= p.d.lim.MaxDim { // checkLen in line: this runs per element
			return x, p.d.checkLen(field, j+1)
		}
		f, ok, err := p.number("field x")
		if err != nil {
			return x, err
		}
		if !ok {
			return x, p.d.fail(ErrMalformed, "field %s: element %d is %s", field, j, jsonKind(p.b[p.i]))
		}
		x = append(x, f)
		more, err := p.more(']', "field x")
		if err != nil {
			return x, err
		}
		if !more {
			return x, nil
		}
	}
}

// object reads an object: one observation, or a batch when allowBatch.
func (p *jsonParser) object(l *lexer, allowBatch bool) error {
	if err := p.expect('{', "object"); err != nil {
		return err
	}
	ob := object{d: &p.d, batch: allowBatch}
	if p.empty('}') {
		return ob.end()
	}
	for {
		k, ok, err := p.str("object key")
		if err != nil {
			return err
		}
		if !ok {
			return p.unexpected("object key")
		}
		if err := p.expect(':', "object"); err != nil {
			return err
		}
		batch, err := ob.read(l, k)
		if batch {
			err = p.batch(l)
		}
		if err != nil {
			return err
		}
		more, err := p.more('}', "object")
		if err != nil {
			return err
		}
		if !more {
			return ob.end()
		}
	}
}

// text reads a string or null (see lexer).
func (p *jsonParser) text(what string) (s []byte, lone, null bool, err error) {
	s, ok, err := p.str(what)
	switch {
	case err != nil:
		return nil, false, false, err
	case ok:
		return s, p.lone, false, nil
	case p.b[p.i] == 'n':
		return nil, false, true, p.literal(what)
	}
	return nil, false, false, p.d.fail(ErrMalformed, "%s: is %s, want a string", what, jsonKind(p.b[p.i]))
}

func (p *jsonParser) skipField() error { return p.skip(1) }

func (p *jsonParser) batch(l *lexer) error {
	c, err := p.peek("field batch")
	if err != nil {
		return err
	}
	if c != '[' {
		return p.d.fail(ErrMalformed, "field batch: is %s, want an array", jsonKind(c))
	}
	p.i++
	if p.empty(']') {
		return p.d.fail(ErrMalformed, "field batch: empty")
	}
	for j := 0; ; j++ {
		if j >= p.d.lim.MaxBatch {
			return p.d.fail(ErrTooLarge, "field batch: more than %d observations", p.d.lim.MaxBatch)
		}
		p.d.elem = j
		c, err := p.peek("batch element")
		if err != nil {
			return err
		}
		if err := p.element(l, c, false, ""); err != nil {
			return err
		}
		p.d.elem = -1
		more, err := p.more(']', "field batch")
		if err != nil || !more {
			return err
		}
	}
}

// ts reads a timestamp: a number of seconds, an RFC 3339 string, or null (0).
func (p *jsonParser) ts() (float64, error) {
	c, err := p.peek("field ts")
	if err != nil {
		return 0, err
	}
	switch c {
	case 'n':
		return 0, p.literal("field ts")
	case '"':
		s, _, err := p.str("field ts")
		if err != nil {
			return 0, err
		}
		return parseTime(&p.d, s)
	}
	f, ok, err := p.number("field ts")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, p.d.fail(ErrMalformed, "field ts: is %s, want a number or a string", jsonKind(c))
	}
	return f, nil
}

// unescape decodes the body of a JSON string (the bytes between the quotes,
// holding at least one backslash) into a new slice. Bytes outside escapes
// are copied as they are, valid UTF-8 or not. A \u escape of an unpaired
// UTF-16 surrogate is written as U+FFFD, as encoding/json does, and
// reported with lone true. A malformed escape is an error.
func unescape(raw []byte) (out []byte, lone bool, err error) {
	out = make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return nil, false, errors.New("backslash at the end")
		}
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return nil, false, errors.New("bad \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by an escaped low one is one rune.
				if len(raw)-i >= 6 && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2, ok := hex4(raw[i+2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
				}
				out = utf8.AppendRune(out, utf8.RuneError)
				lone = true
				continue
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, false, fmt.Errorf("bad escape %q", raw[i:i+2])
		}
		i += 2
	}
	return out, lone, nil
}

// hex4 reads four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// scalar reads null, a bool, a number or a string. A string comes back
// as raw bytes (aliasing the input when unescaped) with Kind ScalarString
// and lone set for an unpaired surrogate escape; the caller converts it.
// An array or object is malformed.
func (p *jsonParser) scalar(what, want string) (s Scalar, raw []byte, lone bool, err error) {
	c, err := p.peek(what)
	if err != nil {
		return Scalar{}, nil, false, err
	}
	switch c {
	case '"':
		raw, _, err = p.str(what)
		return Scalar{Kind: ScalarString}, raw, p.lone, err
	case 't', 'f', 'n':
		if err := p.literal(what); err != nil {
			return Scalar{}, nil, false, err
		}
		switch c {
		case 't':
			return Bool(true), nil, false, nil
		case 'f':
			return Bool(false), nil, false, nil
		}
		return Scalar{Kind: ScalarNull}, nil, false, nil
	case '[', '{':
		return Scalar{}, nil, false, p.d.fail(ErrMalformed, "%s: is %s, want %s", what, jsonKind(c), want)
	}
	f, ok, err := p.number(what)
	if err != nil {
		return Scalar{}, nil, false, err
	}
	if !ok {
		return Scalar{}, nil, false, p.unexpected(what)
	}
	return Number(f), nil, false, nil
}

// meta reads the meta object (or null), appending its entries to m.
func (p *jsonParser) meta(m Meta) (Meta, error) {
	c, err := p.peek("field meta")
	if err != nil {
		return m, err
	}
	if c == 'n' {
		return m, p.literal("field meta")
	}
	if c != '{' {
		return m, p.d.fail(ErrMalformed, "field meta: is %s, want an object", jsonKind(c))
	}
	p.i++
	if p.empty('}') {
		return m, nil
	}
	used := 0
	for {
		k, ok, err := p.str("field meta")
		if err != nil {
			return m, err
		}
		if !ok {
			return m, p.unexpected("field meta")
		}
		klone := p.lone
		if err := p.expect(':', "field meta"); err != nil {
			return m, err
		}
		v, raw, lone, err := p.scalar("field meta", "null, a bool, a number or a string")
		if err != nil {
			return m, err
		}
		if err := p.d.addMeta(&m, k, klone, v, raw, lone, &used); err != nil {
			return m, err
		}
		more, err := p.more('}', "field meta")
		if err != nil || !more {
			return m, err
		}
	}
}
