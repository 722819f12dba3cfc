package csvin

import (
	"bytes"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kpcastream/kpcastream/codec"
)

type row struct {
	x  []float64
	id string
}

// readRows reads every row of data, stopping at the first error.
func readRows(data []byte, o Options) (dim int, rows []row, err error) {
	r, err := NewReader(bytes.NewReader(data), o)
	if err != nil {
		return 0, nil, err
	}
	buf := make([]float64, r.Dim())
	for {
		x, id, err := r.Next(buf)
		if err == io.EOF {
			return r.Dim(), rows, nil
		}
		if err != nil {
			return r.Dim(), rows, err
		}
		rows = append(rows, row{append([]float64(nil), x...), id})
	}
}

func sameRows(a, b []row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].id != b[i].id || len(a[i].x) != len(b[i].x) {
			return false
		}
		for j := range a[i].x {
			if math.Float64bits(a[i].x[j]) != math.Float64bits(b[i].x[j]) {
				return false
			}
		}
	}
	return true
}

// quote writes s as a quoted CSV field.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// FuzzReader: the CSV reader of publish and replay never panics; its errors
// name the file; every row it returns has Dim finite values and a valid
// UTF-8 id, so codec encodes it in both encodings and decodes it back
// exactly; the rows survive being written out again as canonical CSV; and
// a non-numeric first row reads the same whether the header is required
// (replay) or optional (publish).
func FuzzReader(f *testing.F) {
	f.Add([]byte("a,b,label\n1,2,x\n3,4,y\n"), "label", "", false)
	f.Add([]byte("\uFEFFid, a ,b\n# comment\ne1, 1.5,-2e3\n\"e,2\",0x1p-2,  7\n"), "", "id", true)
	f.Add([]byte("1,2,3\n4,5,6\n"), "1", "0", true)
	f.Add([]byte("a,b\n1,NaN\n"), "", "", false)
	f.Add([]byte("a,b\n1,2\n3\n"), "", "", false)
	f.Add([]byte("id,x\n\xff,1\n"), "", "id", false)
	f.Add([]byte("x\n\"1\r\n\"\n"), "", "", false)
	f.Fuzz(func(t *testing.T, data []byte, drop, id string, optional bool) {
		o := Options{Name: "in.csv", ID: id, HeaderOptional: optional}
		if drop != "" {
			o.Drop = strings.Split(drop, ",")
		}
		dim, rows, err := readRows(data, o)
		if err != nil && !strings.HasPrefix(err.Error(), "in.csv: ") {
			t.Fatalf("input %q: error %q does not name the file", data, err)
		}
		if len(rows) > bytes.Count(data, []byte{'\n'})+1 {
			t.Fatalf("input %q: %d rows from %d lines", data, len(rows), bytes.Count(data, []byte{'\n'})+1)
		}
		obs := make([]codec.Observation, len(rows))
		for i, r := range rows {
			if len(r.x) != dim || dim == 0 {
				t.Fatalf("input %q: row %d has %d values, Dim is %d", data, i, len(r.x), dim)
			}
			for _, v := range r.x {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("input %q: row %d holds %v", data, i, v)
				}
			}
			if !utf8.ValidString(r.id) || (id == "" && r.id != "") {
				t.Fatalf("input %q: row %d has id %q (id column %q)", data, i, r.id, id)
			}
			obs[i] = codec.Observation{ID: r.id, X: r.x}
		}
		if len(obs) > 0 {
			for _, enc := range []codec.Encoding{codec.JSON, codec.Msgpack} {
				b, err := codec.EncodeObservations(nil, enc, obs)
				if err != nil {
					t.Fatalf("input %q: rows do not encode as %v: %v", data, enc, err)
				}
				got, _, err := codec.DecodeObservations(nil, b, enc.ContentType(), codec.Limits{MaxBatch: len(obs), MaxDim: dim})
				if err != nil {
					t.Fatalf("input %q: rows encoded as %v do not decode: %v", data, enc, err)
				}
				back := make([]row, len(got))
				for i, o := range got {
					back[i] = row{o.X, o.ID}
				}
				if !sameRows(rows, back) {
					t.Fatalf("input %q: rows %v came back from %v as %v", data, rows, enc, back)
				}
			}
		}

		// Canonical CSV: a header c0…, id; every field quoted; values in
		// the shortest form that reads back exactly. encoding/csv turns
		// "\r\n" inside a quoted field into "\n", so ids with '\r' are left
		// out of this check.
		if err == nil && len(rows) > 0 {
			var b strings.Builder
			for j := range dim {
				b.WriteString(quote("c" + strconv.Itoa(j)))
				b.WriteByte(',')
			}
			b.WriteString("id\n")
			canon := true
			for _, r := range rows {
				for _, v := range r.x {
					b.WriteString(quote(strconv.FormatFloat(v, 'g', -1, 64)))
					b.WriteByte(',')
				}
				b.WriteString(quote(r.id) + "\n")
				canon = canon && !strings.Contains(r.id, "\r")
			}
			if canon {
				dim2, rows2, err := readRows([]byte(b.String()), Options{Name: "in.csv", ID: "id"})
				if err != nil || dim2 != dim || !sameRows(rows, rows2) {
					t.Fatalf("input %q: canonical form %q reads as %d, %v, %v; want %d, %v", data, b.String(), dim2, rows2, err, dim, rows)
				}
			}
		}

		// Header required or optional: the same rows when the first row is
		// a header either way.
		if first, ferr := NewReader(bytes.NewReader(data), Options{Name: "in.csv", HeaderOptional: true}); ferr == nil && first.Header() != nil {
			o.HeaderOptional = !optional
			dim2, rows2, err2 := readRows(data, o)
			if (err == nil) != (err2 == nil) || dim2 != dim || !sameRows(rows, rows2) {
				t.Fatalf("input %q: header optional=%v reads %d, %v, %v; optional=%v reads %d, %v, %v", data, optional, dim, rows, err, !optional, dim2, rows2, err2)
			}
		}
	})
}
