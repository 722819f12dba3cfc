package csvin

import (
	"reflect"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		o      Options
		header []string
		rows   []row
	}{
		{"header", "a,b,label\n1,2,x\n3,4,y\n", Options{Drop: []string{"label"}}, []string{"a", "b"},
			[]row{{[]float64{1, 2}, ""}, {[]float64{3, 4}, ""}}},
		{"bom comment spaces", "\uFEFFid, a ,b\n# comment\ne1, 1.5,-2e3\n\"e,2\",0.25,  7\n", Options{ID: "id"}, []string{"a", "b"},
			[]row{{[]float64{1.5, -2000}, "e1"}, {[]float64{0.25, 7}, "e,2"}}},
		{"no header, indices", "1,2,3\n4,5,6\n", Options{Drop: []string{"1"}, ID: "0", HeaderOptional: true}, nil,
			[]row{{[]float64{3}, "1"}, {[]float64{6}, "4"}}},
		{"optional header present", "a,b\n1,2\n", Options{HeaderOptional: true}, []string{"a", "b"},
			[]row{{[]float64{1, 2}, ""}}},
		{"name before index", "1,0\n5,6\n", Options{Drop: []string{"0"}}, []string{"1"},
			[]row{{[]float64{5}, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Name = "in.csv"
			r, err := NewReader(strings.NewReader(tt.in), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Header(); !reflect.DeepEqual(got, tt.header) {
				t.Errorf("header %q, want %q", got, tt.header)
			}
			_, rows, err := readRows([]byte(tt.in), tt.o)
			if err != nil || !sameRows(rows, tt.rows) {
				t.Errorf("rows %v, %v; want %v", rows, err, tt.rows)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		o    Options
		want string
	}{
		{"empty", "", Options{}, "in.csv: empty file: want a header line"},
		{"bad cell", "a,b,label\n1,2,0\n3,oops,1\n", Options{Drop: []string{"label"}}, `in.csv: line 3, column 2 ("b"): "oops" is not a finite number`},
		// The column is the field's position in the file (not a byte offset),
		// dropped columns counted.
		{"third field", "a,b,c\n1,2,3\n10.5,20.25,x\n", Options{}, `in.csv: line 3, column 3 ("c"): "x" is not a finite number`},
		{"third field, first dropped", "a,b,c\n1,2,3\n10.5,20.25,x\n", Options{Drop: []string{"a"}}, `in.csv: line 3, column 3 ("c"): "x" is not a finite number`},
		{"third field without header", "1,2,3\n10.5,20.25,x\n", Options{HeaderOptional: true, Drop: []string{"0"}}, `in.csv: line 2, column 3 (index 2): "x" is not a finite number`},
		{"nan", "a\nNaN\n", Options{}, `in.csv: line 2, column 1 ("a"): "NaN" is not a finite number`},
		{"inf without header", "1,+Inf\n", Options{HeaderOptional: true}, `in.csv: line 1, column 2 (index 1): "+Inf" is not a finite number`},
		{"short row", "a,b\n1,2\n3\n", Options{}, "in.csv: line 3: 1 columns, want 2 as in the first row"},
		{"long row", "1,2\n3,4,5\n", Options{HeaderOptional: true}, "in.csv: line 2: 3 columns, want 2 as in the first row"},
		{"unknown drop", "a,b\n1,2\n", Options{Drop: []string{"label"}}, `in.csv: --drop names column "label", which the header (a,b) does not have`},
		{"index out of range", "1,2\n", Options{ID: "2", HeaderOptional: true}, `in.csv: --id-column names column "2", but the file has no header and 2 columns (0-based indices)`},
		{"all dropped", "a\n1\n", Options{Drop: []string{"a"}}, "in.csv: no columns left after --drop"},
		{"id invalid utf-8", "id,x\nok\xff,1\n", Options{ID: "id"}, `in.csv: line 2, column 1 ("id"): id "ok\xff" is not valid UTF-8`},
		{"bare quote", "a\n1\"\n", Options{}, `in.csv: row: line 2, byte 2: bare " in non-quoted-field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Name = "in.csv"
			_, _, err := readRows([]byte(tt.in), tt.o)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %s", err, tt.want)
			}
		})
	}
}
