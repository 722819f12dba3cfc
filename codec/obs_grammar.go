package codec

import "unicode/utf8"

// The grammar of an input payload, written once for both encodings:
//
//	payload = vector | object (batch allowed)
//	object  = map of fields: x (vector, required), id (string or null),
//	          ts (number, RFC 3339 string or null; msgpack: a timestamp
//	          extension too), y (number, string or null), meta (map of
//	          scalars or null), batch (array of vector | object; top level
//	          only, and alone); other fields are skipped
//
// The rules of an object (which fields exist, duplicates, batch placement,
// what is missing), which reader reads each field's value, and the rules
// of the values (id's text rule, y's label rule, meta's limits in
// obsDecoder.addMeta) live here, in object.read and object.end. A lexer
// (jsonParser, mpParser) only reads its encoding: it walks the payload's
// objects, hands each key to object.read and reads batches (a batch
// recurses into the lexer's walk).
//
// The lexer's readers reach the grammar as a lexer value: method values of
// its parser, built once per decode. They keep the parser on the stack as
// long as nothing passed to them is a pointer. Behind an interface the
// parser moves to the heap (one allocation per decode: escape analysis
// cannot see through the call), and a generic grammar calls its type's
// methods through a dictionary with the same result (go 1.26).

// lexer is one encoding's readers of the values of an observation's fields.
type lexer struct {
	// vector reads the array of numbers of field x into x[:0].
	vector func(x []float64, field string) ([]float64, error)
	// text reads a string (lone: it held an unpaired surrogate escape) or
	// a null; another value is an error naming what.
	text func(what string) (s []byte, lone, null bool, err error)
	// ts reads a timestamp in seconds since the Unix epoch (null: 0).
	ts func() (float64, error)
	// scalar reads a null, bool, number or string; a string comes back as
	// raw bytes with Kind ScalarString; want names the types allowed, for
	// the error on another value.
	scalar func(what, want string) (s Scalar, raw []byte, lone bool, err error)
	// meta reads the meta map (or null), appending its entries to m (one
	// by one through obsDecoder.addMeta). It takes and returns the slice,
	// not the observation: a pointer would leak through the call, and the
	// parser with it.
	meta func(m Meta) (Meta, error)
	// skip consumes the value of a field the grammar does not know.
	skip func() error
}

// field is a field of an observation object.
type field uint8

const (
	fieldOther field = iota // unknown: skipped
	fieldX
	fieldID
	fieldTS
	fieldY
	fieldMeta
	fieldBatch
)

// fieldNames are the fields' names in error messages.
var fieldNames = [...]string{fieldX: "x", fieldID: "id", fieldTS: "ts", fieldY: "y", fieldMeta: "meta", fieldBatch: "batch"}

// fieldOf names the field of key k.
func fieldOf(k []byte) field {
	switch string(k) {
	case "x":
		return fieldX
	case "id":
		return fieldID
	case "ts":
		return fieldTS
	case "y":
		return fieldY
	case "meta":
		return fieldMeta
	case "batch":
		return fieldBatch
	}
	return fieldOther
}

// object is the grammar's state while one object is read.
type object struct {
	d     *obsDecoder
	o     *Observation // the observation its fields fill, claimed by the first
	seen  uint8        // a bit per field read
	batch bool         // field batch is allowed (the top level)
}

func (ob *object) saw(f field) bool { return ob.seen&(1<<f) != 0 }

// read applies the grammar to key k of ob and reads its value with l: it
// claims the observation (ob.o) for a field of one, refuses a duplicate or
// a misplaced batch, and returns batch true, having read nothing, for the
// field batch, which the lexer reads.
func (ob *object) read(l *lexer, k []byte) (batch bool, err error) {
	f := fieldOf(k)
	d := ob.d
	switch {
	case f == fieldOther:
		return false, l.skip()
	case f == fieldBatch && !ob.batch:
		return false, d.fail(ErrMalformed, "batch inside a batch")
	case f == fieldBatch && ob.o != nil, f != fieldBatch && ob.saw(fieldBatch):
		return false, d.fail(ErrMalformed, "fields x, id, ts, y or meta next to batch")
	case f != fieldBatch && ob.o == nil:
		if ob.o, err = d.slot(); err != nil {
			return false, err
		}
	}
	if ob.saw(f) {
		return false, d.fail(ErrMalformed, "field %s: duplicate", fieldNames[f])
	}
	ob.seen |= 1 << f
	switch o := ob.o; f {
	case fieldX:
		o.X, err = l.vector(o.X, "x")
	case fieldID:
		err = ob.id(l.text("field id"))
	case fieldTS:
		o.TS, err = l.ts()
	case fieldY:
		err = ob.label(l.scalar("field y", "a number or a string"))
	case fieldMeta:
		o.Meta, err = l.meta(o.Meta)
	case fieldBatch:
		return true, nil
	}
	return false, err
}

// id sets the observation's id from a lexer's text read: s unless null;
// lone: s held an unpaired surrogate escape.
func (ob *object) id(s []byte, lone, null bool, err error) error {
	if err != nil || null {
		return err
	}
	if lone || !utf8.Valid(s) {
		return ob.d.checkText("id", s, lone)
	}
	ob.o.ID = string(s)
	return nil
}

// label sets the observation's label y from a lexer's scalar read.
func (ob *object) label(v Scalar, raw []byte, lone bool, err error) error {
	if err != nil {
		return err
	}
	ob.o.Y, err = ob.d.label(v, raw, lone)
	return err
}

// end checks an object once all its fields are read.
func (ob *object) end() error {
	switch {
	case ob.o != nil && !ob.saw(fieldX):
		return ob.d.fail(ErrMalformed, "field x: missing")
	case ob.o == nil && !ob.saw(fieldBatch):
		return ob.d.fail(ErrMalformed, "missing field x or batch")
	}
	return nil
}
