package processor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
)

// The local tier's value format (issue 30). The local tier is a cache of
// this worker's own models, written and read by the same process and
// never by another version, so it need not be the snapshot's portable,
// checked, canonical msgpack: with every message of a round-robin over
// more keys than fit in memory reading one model back and writing
// another, msgpack's per-float reflection was two thirds of the cycle
// (BenchmarkLocalCycle). A model with a learner alone (no classifier
// stage, no monitor) is written as its learner's State in a flat binary
// layout — the generic State (counters, scalars and arrays by name), so
// whatever a learner keeps goes with it — its arrays as raw little-endian
// float64s; the learner's configuration is not written (the entry keeps
// it when it differs from the pipeline's: a key that kept its snapshot's
// budget policy). Any other model is written as its snapshot (codec).
// Restore checks what it reads as it checks a snapshot from the store.
const (
	localFlat     = 'F' // the flat learner state below
	localSnapshot = 'S' // a codec snapshot follows
)

// errLocalFormat is a local value that does not decode.
var errLocalFormat = errors.New("malformed local tier value")

// appendLocal appends the local tier's value of a model's state st to
// dst.
func appendLocal(dst []byte, snap *codec.Snapshot) ([]byte, error) {
	st := snap.State
	if snap.Classifier != nil || snap.Monitor != nil || st == nil {
		b, err := codec.EncodeSnapshot(snap)
		if err != nil {
			return dst, err
		}
		return append(append(dst, localSnapshot), b...), nil
	}
	dst = append(dst, localFlat)
	dst = binary.AppendUvarint(dst, uint64(st.Version))
	dst = appendString(dst, st.Kind)
	dst = binary.AppendVarint(dst, st.Seen)
	dst = binary.AppendUvarint(dst, uint64(len(st.Ints)))
	for k, v := range st.Ints {
		dst = binary.AppendVarint(appendString(dst, k), v)
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Scalars)))
	for k, v := range st.Scalars {
		dst = binary.LittleEndian.AppendUint64(appendString(dst, k), math.Float64bits(v))
	}
	dst = binary.AppendUvarint(dst, uint64(len(st.Matrices)))
	for k, m := range st.Matrices {
		if m.Rows < 0 || m.Cols < 0 || len(m.Data) != m.Rows*m.Cols {
			return dst, fmt.Errorf("processor: local tier: matrix %q is %d×%d with %d values", k, m.Rows, m.Cols, len(m.Data))
		}
		dst = appendString(dst, k)
		dst = binary.AppendUvarint(dst, uint64(m.Rows))
		dst = binary.AppendUvarint(dst, uint64(m.Cols))
		for _, v := range m.Data {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
	}
	return dst, nil
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeLocal decodes a local tier value written by appendLocal; a flat
// state gets the learner configuration cfg. It does not keep b.
func decodeLocal(b []byte, cfg learners.Config) (*codec.Snapshot, error) {
	var d localDecoder
	return d.decode(b, cfg)
}

// localDecoder decodes local tier values, a flat one into the same State
// each time (learners.State.Reuse: its maps, its arrays, the names of its
// fields), so that a worker reading keys back allocates little. What
// decode returns is valid until its next call: restore it (a learner's
// Restore copies what it keeps) before decoding the next value.
type localDecoder struct {
	st    *learners.State   // reused; nil: the first flat value allocates it
	names map[string]string // the field names seen (at most maxLocalNames)
	snap  codec.Snapshot    // what decode returns for a flat value
	keep  bool              // reuse st and snap (a tier's decoder); false: each value its own
}

// maxLocalNames bounds localDecoder.names: a learner's state has a few
// dozen names.
const maxLocalNames = 256

// decode decodes b (see decodeLocal).
func (d *localDecoder) decode(b []byte, cfg learners.Config) (*codec.Snapshot, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", errLocalFormat)
	}
	if b[0] == localSnapshot {
		return codec.DecodeSnapshot(b[1:])
	}
	if b[0] != localFlat {
		return nil, fmt.Errorf("%w: format %q", errLocalFormat, b[0])
	}
	r := localReader{b: b[1:], names: d.names, intern: d.keep}
	var st *learners.State
	if d.keep {
		st = d.st
	}
	version := int(r.uvarint(math.MaxInt32))
	kind := r.string()
	st = st.Reuse(kind, cfg, r.varint())
	st.Version = version
	for range r.uvarint(uint64(len(r.b))) {
		k := r.string()
		st.Ints[k] = r.varint()
	}
	for range r.uvarint(uint64(len(r.b))) {
		k := r.string()
		st.Scalars[k] = math.Float64frombits(r.uint64())
	}
	for range r.uvarint(uint64(len(r.b))) {
		k := r.string()
		rows, cols := r.uvarint(math.MaxInt32), r.uvarint(math.MaxInt32)
		if r.err == nil && rows*cols > uint64(len(r.b))/8 {
			r.err = fmt.Errorf("%w: matrix %q of %d×%d in %d bytes", errLocalFormat, k, rows, cols, len(r.b))
		}
		if r.err != nil {
			break
		}
		data := st.SetMatrix(k, int(rows), int(cols))
		for i := range data {
			data[i] = math.Float64frombits(binary.LittleEndian.Uint64(r.b[8*i:]))
		}
		r.b = r.b[8*len(data):]
	}
	st.Trim()
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errLocalFormat, len(r.b))
	}
	if d.keep {
		d.st, d.names = st, r.names
	}
	if r.err != nil {
		return nil, r.err
	}
	if !d.keep {
		return &codec.Snapshot{State: st}, nil
	}
	d.snap = codec.Snapshot{State: st}
	return &d.snap, nil
}

// localReader reads appendLocal's fields; the first error sticks.
type localReader struct {
	b      []byte
	err    error
	names  map[string]string // strings read before
	intern bool              // keep the strings read in names, and take them from there
}

func (r *localReader) uvarint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit {
		r.err = fmt.Errorf("%w: bad length or count", errLocalFormat)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *localReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad integer", errLocalFormat)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *localReader) uint64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.err = fmt.Errorf("%w: truncated", errLocalFormat)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *localReader) string() string {
	n := r.uvarint(math.MaxInt32)
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: truncated", errLocalFormat)
	}
	if r.err != nil {
		return ""
	}
	if s, ok := r.names[string(r.b[:n])]; ok { // no allocation for a name seen before
		r.b = r.b[n:]
		return s
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	if !r.intern {
		return s
	}
	if r.names == nil {
		r.names = map[string]string{}
	}
	if len(r.names) < maxLocalNames {
		r.names[s] = s
	}
	return s
}
