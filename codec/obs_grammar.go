package codec

// The grammar of an input payload, written once over both encodings:
//
//	payload = vector | object(batch allowed)
//	object  = map of fields: x (vector, required), id (string or null),
//	          ts (number, RFC 3339 string or null; msgpack: timestamp
//	          extension too), y (number, string or null), meta (map of
//	          scalars or null), batch (array of vector | object, top
//	          level only, alone); other fields are skipped
//
// The rules (which fields exist, duplicates, batch placement, limits,
// what is missing) live here; the lexers (obs_json.go, obs_msgpack.go) only
// read values. lexer picks the encoding's lexer with a plain branch rather
// than an interface, so that every call stays direct on the hot path.

// valueClass is what the grammar needs to know of the next value before
// reading it.
type valueClass uint8

const (
	classOther valueClass = iota
	classArray
	classMap
)

// lexer dispatches each read to the JSON or the msgpack lexer.
type lexer struct {
	json bool
	j    jsonParser
	m    mpParser
}

// dec is the decoder state of the lexer in use.
func (l *lexer) dec() *obsDecoder {
	if l.json {
		return &l.j.d
	}
	return &l.m.d
}

// class classifies the next value without consuming it; c is its first
// byte, for describe.
func (l *lexer) class(what string) (valueClass, byte, error) {
	if l.json {
		return l.j.class(what)
	}
	return l.m.class(what)
}

// describe names the value starting with c ("a string", "an array", …).
func (l *lexer) describe(c byte) string {
	if l.json {
		return jsonKind(c)
	}
	return mpKind(c)
}

// mapName is the encoding's name of a map, for error messages.
func (l *lexer) mapName() string {
	if l.json {
		return "an object"
	}
	return "a map"
}

// open consumes the start of an array or map, failing with "what: is …,
// want …" on another value. n is its length when the encoding announces
// it, 0 for an empty one, and −1 for a non-empty one of unknown length.
func (l *lexer) open(isMap bool, what string) (n int, err error) {
	if l.json {
		return l.j.open(isMap, what)
	}
	return l.m.open(isMap, what)
}

// next is called after each element of a container opened with length n:
// it returns the length left in the same convention.
func (l *lexer) next(n int, isMap bool, what string) (int, error) {
	if l.json {
		return l.j.next(n, isMap, what)
	}
	return n - 1, nil
}

// key reads a map key (and, in JSON, the colon after it); inMeta picks the
// wording of its errors.
func (l *lexer) key(inMeta bool) (k []byte, lone bool, err error) {
	if l.json {
		return l.j.key(inMeta)
	}
	k, err = l.m.key(inMeta)
	return k, false, err
}

// vector reads the array of numbers of field x into x[:0] (the hot path: each lexer
// has its own loop).
func (l *lexer) vector(x []float64) ([]float64, error) {
	if l.json {
		return l.j.vector(x)
	}
	return l.m.vector(x)
}

// text reads a string (lone: it held an unpaired surrogate escape) or a
// null; anything else is an error naming what.
func (l *lexer) text(what string) (s []byte, lone, null bool, err error) {
	if l.json {
		return l.j.text(what)
	}
	s, null, err = l.m.text(what)
	return s, false, null, err
}

// ts reads a timestamp in seconds since the Unix epoch (null: 0).
func (l *lexer) ts() (float64, error) {
	if l.json {
		return l.j.ts()
	}
	return l.m.ts()
}

// scalar reads a null, bool, number or string (see jsonParser.scalar).
func (l *lexer) scalar(what string) (s Scalar, raw []byte, lone bool, err error) {
	if l.json {
		return l.j.scalar(what, "null, a bool, a number or a string")
	}
	s, raw, err = l.m.scalar(what, "nil, a bool, a number or a string")
	return s, raw, false, err
}

// label reads the value of y.
func (l *lexer) label() (s Scalar, raw []byte, lone bool, err error) {
	if l.json {
		return l.j.scalar("field y", "a number or a string")
	}
	s, raw, err = l.m.scalar("field y", "a number or a string")
	return s, raw, false, err
}

// null consumes a null if it is next.
func (l *lexer) null(what string) (bool, error) {
	if l.json {
		return l.j.null(what)
	}
	return l.m.null(what)
}

// skip consumes the value of an unknown field.
func (l *lexer) skip() error {
	if l.json {
		return l.j.skip(1)
	}
	if l.m.i >= len(l.m.b) {
		return l.m.truncated("map value")
	}
	return l.m.skip(1)
}

// end checks that nothing but (JSON) whitespace follows the payload.
func (l *lexer) end() error {
	if l.json {
		return l.j.end()
	}
	return l.m.end()
}

// payload reads a whole payload into d.
func (l *lexer) payload() error {
	d := l.dec()
	cls, c, err := l.class("payload")
	if err != nil {
		return d.fail(ErrMalformed, "empty payload")
	}
	switch cls {
	case classArray:
		err = l.bare()
	case classMap:
		err = l.object(true)
	default:
		err = d.fail(ErrMalformed, "payload is %s, want %s or an array", l.describe(c), l.mapName())
	}
	if err != nil {
		return err
	}
	return l.end()
}

// bare reads an observation given as its vector alone.
func (l *lexer) bare() error {
	d := l.dec()
	o, err := d.slot()
	if err != nil {
		return err
	}
	o.X, err = l.vector(o.X)
	return err
}

// Bits of fields.seen.
const (
	seenX = 1 << iota
	seenID
	seenTS
	seenY
	seenMeta
)

// fields tracks one object's fields: the observation they fill (made on
// the first of them) and whether it is a batch instead.
type fields struct {
	d     *obsDecoder
	o     *Observation
	seen  uint8
	batch bool
}

// claim admits a field of an observation: not next to a batch, not twice.
func (f *fields) claim(bit uint8, name string) error {
	if f.batch {
		return f.d.fail(ErrMalformed, "fields x, id, ts, y or meta next to batch")
	}
	if f.seen&bit != 0 {
		return f.d.fail(ErrMalformed, "field %s: duplicate", name)
	}
	f.seen |= bit
	if f.o == nil {
		o, err := f.d.slot()
		if err != nil {
			return err
		}
		f.o = o
	}
	return nil
}

// claimBatch admits the batch field: at top level, alone, once.
func (f *fields) claimBatch(allowed bool) error {
	switch {
	case !allowed:
		return f.d.fail(ErrMalformed, "batch inside a batch")
	case f.o != nil:
		return f.d.fail(ErrMalformed, "fields x, id, ts, y or meta next to batch")
	case f.batch:
		return f.d.fail(ErrMalformed, "field batch: duplicate")
	}
	f.batch = true
	return nil
}

// finish checks what an object must hold.
func (f *fields) finish() error {
	switch {
	case f.o != nil && f.seen&seenX == 0:
		return f.d.fail(ErrMalformed, "field x: missing")
	case f.o == nil && !f.batch:
		return f.d.fail(ErrMalformed, "missing field x or batch")
	}
	return nil
}

// object reads a map: one observation, or a batch when allowBatch.
func (l *lexer) object(allowBatch bool) error {
	d := l.dec()
	n, err := l.open(true, "object")
	if err != nil {
		return err
	}
	f := fields{d: d}
	for n != 0 {
		k, _, err := l.key(false)
		if err != nil {
			return err
		}
		if err := l.field(&f, k, allowBatch); err != nil {
			return err
		}
		if n, err = l.next(n, true, "object"); err != nil {
			return err
		}
	}
	return f.finish()
}

// field reads the value of field k of an object.
func (l *lexer) field(f *fields, k []byte, allowBatch bool) (err error) {
	d := f.d
	switch string(k) {
	case "x":
		if err = f.claim(seenX, "x"); err == nil {
			f.o.X, err = l.vector(f.o.X)
		}
	case "id":
		if err = f.claim(seenID, "id"); err != nil {
			return err
		}
		s, lone, null, err := l.text("field id")
		if err != nil || null {
			return err
		}
		if err := d.checkText("id", s, lone); err != nil {
			return err
		}
		f.o.ID = string(s)
	case "ts":
		if err = f.claim(seenTS, "ts"); err == nil {
			f.o.TS, err = l.ts()
		}
	case "y":
		if err = f.claim(seenY, "y"); err != nil {
			return err
		}
		v, raw, lone, err := l.label()
		if err != nil {
			return err
		}
		f.o.Y, err = d.label(v, raw, lone)
		return err
	case "meta":
		if err = f.claim(seenMeta, "meta"); err == nil {
			err = l.meta(f.o)
		}
	case "batch":
		if err = f.claimBatch(allowBatch); err == nil {
			err = l.batch()
		}
	default:
		err = l.skip()
	}
	return err
}

// batch reads the array of a batch: vectors or objects, at most MaxBatch.
func (l *lexer) batch() error {
	d := l.dec()
	n, err := l.open(false, "field batch")
	switch {
	case err != nil:
		return err
	case n == 0:
		return d.fail(ErrMalformed, "field batch: empty")
	case n > d.lim.MaxBatch:
		return d.fail(ErrTooLarge, "field batch: %d observations, limit %d", n, d.lim.MaxBatch)
	}
	for j := 0; n != 0; j++ {
		if j >= d.lim.MaxBatch {
			return d.fail(ErrTooLarge, "field batch: more than %d observations", d.lim.MaxBatch)
		}
		d.elem = j
		cls, c, err := l.class("batch element")
		if err != nil {
			return err
		}
		switch cls {
		case classArray:
			err = l.bare()
		case classMap:
			err = l.object(false)
		default:
			err = d.fail(ErrMalformed, "is %s, want %s or an array", l.describe(c), l.mapName())
		}
		if err != nil {
			return err
		}
		d.elem = -1
		if n, err = l.next(n, false, "field batch"); err != nil {
			return err
		}
	}
	return nil
}

// meta reads the meta map (or null) into o.Meta.
func (l *lexer) meta(o *Observation) error {
	d := l.dec()
	if null, err := l.null("field meta"); err != nil || null {
		return err
	}
	n, err := l.open(true, "field meta")
	if err != nil {
		return err
	}
	if n > d.lim.MaxMeta {
		return d.fail(ErrTooLarge, "field meta: %d entries, limit %d", n, d.lim.MaxMeta)
	}
	used := 0
	for n != 0 {
		k, klone, err := l.key(true)
		if err != nil {
			return err
		}
		v, raw, lone, err := l.scalar("field meta")
		if err != nil {
			return err
		}
		if v.Kind == ScalarString {
			if err := d.checkText("meta value", raw, lone); err != nil {
				return err
			}
			v.Str = string(raw)
		}
		if err := d.addMeta(o, k, klone, v, &used); err != nil {
			return err
		}
		if n, err = l.next(n, true, "field meta"); err != nil {
			return err
		}
	}
	return nil
}
