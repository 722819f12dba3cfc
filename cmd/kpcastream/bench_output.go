package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kpcastream/kpcastream/codec"
)

// outputStamp returns the "id" and "ts" fields of an output payload, which
// is all the bench's receiver needs of it. msgpack (codec.EncodeOutput's
// map) is walked in place without allocating: id is a slice of data, the
// other fields are checked for well-formedness and skipped, and trailing
// bytes are an error. JSON goes through codec.DecodeOutput.
func outputStamp(data []byte, enc codec.Encoding) (id []byte, ts float64, err error) {
	if enc != codec.Msgpack {
		out, err := codec.DecodeOutput(data, enc)
		if err != nil {
			return nil, 0, err
		}
		return []byte(out.ID), out.TS, nil
	}
	r := mpReader{b: data}
	n, err := r.mapLen()
	if err != nil {
		return nil, 0, err
	}
	var haveID, haveTS bool
	for range n {
		key, err := r.str()
		if err != nil {
			return nil, 0, fmt.Errorf("output key: %w", err)
		}
		switch string(key) {
		case "id":
			if id, err = r.str(); err != nil {
				return nil, 0, fmt.Errorf("output id: %w", err)
			}
			haveID = true
		case "ts":
			if ts, err = r.float(); err != nil {
				return nil, 0, fmt.Errorf("output ts: %w", err)
			}
			haveTS = true
		default:
			if err := r.skip(0); err != nil {
				return nil, 0, fmt.Errorf("output %q: %w", key, err)
			}
		}
	}
	if r.i != len(r.b) {
		return nil, 0, fmt.Errorf("output: %d trailing bytes", len(r.b)-r.i)
	}
	if !haveID || !haveTS {
		return nil, 0, errors.New("output: no id or ts")
	}
	return id, ts, nil
}

var errTruncated = errors.New("truncated msgpack")

// mpReader walks msgpack in place.
type mpReader struct {
	b []byte
	i int
}

func (r *mpReader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b)-r.i < n {
		return nil, errTruncated
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s, nil
}

func (r *mpReader) byte() (byte, error) {
	s, err := r.take(1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

// uintN reads a big-endian unsigned integer of n bytes (1, 2, 4 or 8).
func (r *mpReader) uintN(n int) (uint64, error) {
	s, err := r.take(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(s[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(s)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(s)), nil
	}
	return binary.BigEndian.Uint64(s), nil
}

func (r *mpReader) mapLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), nil
	case c == 0xde:
		n, err := r.uintN(2)
		return int(n), err
	case c == 0xdf:
		n, err := r.uintN(4)
		return int(n), err
	}
	return 0, fmt.Errorf("want a map, got type byte 0x%02x", c)
}

func (r *mpReader) str() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9:
		n, err = r.uintN(1)
	case c == 0xda:
		n, err = r.uintN(2)
	case c == 0xdb:
		n, err = r.uintN(4)
	default:
		return nil, fmt.Errorf("want a string, got type byte 0x%02x", c)
	}
	if err != nil {
		return nil, err
	}
	return r.take(int(n))
}

func (r *mpReader) float() (float64, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xcb:
		v, err := r.uintN(8)
		return math.Float64frombits(v), err
	case 0xca:
		v, err := r.uintN(4)
		return float64(math.Float32frombits(uint32(v))), err
	}
	return 0, fmt.Errorf("want a float, got type byte 0x%02x", c)
}

// skip passes over one value of any type; depth bounds nesting.
func (r *mpReader) skip(depth int) error {
	if depth > 16 {
		return errors.New("msgpack nested too deep")
	}
	c, err := r.byte()
	if err != nil {
		return err
	}
	var n, items uint64 // bytes to skip, then values to skip
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3: // fixint, nil, bool
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c&0xf0 == 0x90:
		items = uint64(c & 0x0f)
	case c&0xf0 == 0x80:
		items = 2 * uint64(c&0x0f)
	case c == 0xcc || c == 0xd0:
		n = 1
	case c == 0xcd || c == 0xd1:
		n = 2
	case c == 0xce || c == 0xd2 || c == 0xca:
		n = 4
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		n = 8
	case c == 0xd9 || c == 0xc4:
		n, err = r.uintN(1)
	case c == 0xda || c == 0xc5:
		n, err = r.uintN(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.uintN(4)
	case c == 0xdc:
		items, err = r.uintN(2)
	case c == 0xdd:
		items, err = r.uintN(4)
	case c == 0xde:
		items, err = r.uintN(2)
		items *= 2
	case c == 0xdf:
		items, err = r.uintN(4)
		items *= 2
	default:
		return fmt.Errorf("unsupported type byte 0x%02x", c)
	}
	if err != nil {
		return err
	}
	if n > uint64(len(r.b)-r.i) || items > uint64(len(r.b)-r.i) {
		return errTruncated
	}
	if _, err := r.take(int(n)); err != nil {
		return err
	}
	for range items {
		if err := r.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
