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
// what is missing) and of each field's value (id's text rule, y's label
// rule, meta's limits in obsDecoder.addMeta) live here. A lexer
// (jsonParser, mpParser) only reads its encoding: it walks an object, asks
// object.field which field each key names (the rules are applied there),
// reads the value with its own methods and hands text and labels back to
// object.id and object.label.
//
// The lexers call the grammar, not the other way round, so that every call
// on the hot path is direct: a grammar calling the lexers through an
// interface moves the parser to the heap (one allocation per decode:
// escape analysis cannot see through the interface), and a generic grammar
// calls them through its dictionary with the same result (go 1.26).

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

// field applies the grammar to key k of ob before its value is read: it
// returns the field k names, having claimed the observation (ob.o) for a
// field of one, or an error for a duplicate or a misplaced batch.
func (ob *object) field(k []byte) (field, error) {
	f := fieldOf(k)
	d := ob.d
	switch {
	case f == fieldOther:
		return f, nil
	case f == fieldBatch && !ob.batch:
		return f, d.fail(ErrMalformed, "batch inside a batch")
	case f == fieldBatch && ob.o != nil, f != fieldBatch && ob.saw(fieldBatch):
		return f, d.fail(ErrMalformed, "fields x, id, ts, y or meta next to batch")
	case f != fieldBatch && ob.o == nil:
		o, err := d.slot()
		if err != nil {
			return f, err
		}
		ob.o = o
	}
	if ob.saw(f) {
		return f, d.fail(ErrMalformed, "field %s: duplicate", fieldNames[f])
	}
	ob.seen |= 1 << f
	return f, nil
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
