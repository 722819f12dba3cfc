package csvin

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Options configures a Reader.
type Options struct {
	// Name is the file's name in error messages, e.g. "data.csv" or "stdin".
	Name string
	// Drop lists the columns to leave out, by header name or 0-based index.
	Drop []string
	// ID is the column holding each row's id (left out of the vector), by
	// header name or 0-based index; "" means none.
	ID string
	// HeaderOptional makes the header optional: a first row with no numeric
	// field is the header, any other is the first data row.
	HeaderOptional bool
}

// Reader streams the rows of one CSV file.
type Reader struct {
	r       *csv.Reader
	name    string
	cols    []string // every column of the header (trimmed), or nil without one
	ncols   int      // fields per row
	keep    []int    // indices of the kept columns
	id      int      // index of the id column, or -1
	pending []string // a first row that turned out to be data
}

// NewReader reads the header (or the first row) of r.
func NewReader(r io.Reader, o Options) (*Reader, error) {
	br := bufio.NewReader(r)
	if b, err := br.Peek(3); err == nil && string(b) == "\uFEFF" {
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	c := &Reader{r: cr, name: o.Name, id: -1}
	first, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file: want a header line", c.name)
	}
	if err != nil {
		return nil, c.csvError("header", err, nil)
	}
	c.ncols = len(first)
	if o.HeaderOptional && numericRow(first) {
		c.pending = slices.Clone(first)
	} else {
		c.cols = make([]string, len(first))
		for i, col := range first {
			c.cols[i] = strings.TrimSpace(col)
		}
	}
	find := func(flag, col string) (int, error) {
		if i := slices.Index(c.cols, col); i >= 0 {
			return i, nil
		}
		if i, err := strconv.Atoi(col); err == nil && i >= 0 && i < c.ncols && strconv.Itoa(i) == col {
			return i, nil
		}
		if c.cols == nil {
			return 0, fmt.Errorf("%s: %s names column %q, but the file has no header and %d columns (0-based indices)", c.name, flag, col, c.ncols)
		}
		return 0, fmt.Errorf("%s: %s names column %q, which the header (%s) does not have", c.name, flag, col, strings.Join(c.cols, ","))
	}
	dropped := make([]bool, c.ncols)
	for _, d := range o.Drop {
		i, err := find("--drop", d)
		if err != nil {
			return nil, err
		}
		dropped[i] = true
	}
	if o.ID != "" {
		i, err := find("--id-column", o.ID)
		if err != nil {
			return nil, err
		}
		c.id = i
		dropped[i] = true
	}
	for i := range c.ncols {
		if !dropped[i] {
			c.keep = append(c.keep, i)
		}
	}
	if len(c.keep) == 0 {
		return nil, fmt.Errorf("%s: no columns left after --drop", c.name)
	}
	return c, nil
}

// numericRow reports whether some field of rec parses as a number.
func numericRow(rec []string) bool {
	for _, f := range rec {
		if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err == nil {
			return true
		}
	}
	return false
}

// csvError words an error of encoding/csv.
func (c *Reader) csvError(what string, err error, rec []string) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
		return fmt.Errorf("%s: line %d: %d columns, want %d as in the first row", c.name, pe.StartLine, len(rec), c.ncols)
	}
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: line %d, byte %d: %w", c.name, what, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: %s: %w", c.name, what, err)
}

// Dim is the number of kept columns, the length of each vector.
func (c *Reader) Dim() int { return len(c.keep) }

// Header returns the names of the kept columns, or nil when the file has no
// header.
func (c *Reader) Header() []string {
	if c.cols == nil {
		return nil
	}
	h := make([]string, len(c.keep))
	for j, i := range c.keep {
		h[j] = c.cols[i]
	}
	return h
}

// Next reads the next row: its vector into dst (length Dim) and its id ("" without
// Options.ID). It returns io.EOF at the end and an error naming the line and
// column for a malformed row. The id does not alias the Reader's buffers.
func (c *Reader) Next(dst []float64) (x []float64, id string, err error) {
	rec := c.pending
	if rec != nil {
		c.pending = nil // the last record read, so FieldPos still refers to it
	} else {
		var err error
		if rec, err = c.r.Read(); err == io.EOF {
			return nil, "", io.EOF
		} else if err != nil {
			return nil, "", c.csvError("row", err, rec)
		}
	}
	line, _ := c.r.FieldPos(0)
	for j, i := range c.keep {
		s := strings.TrimSpace(rec[i])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, "", fmt.Errorf("%s: line %d, column %d (%s): %q is not a finite number", c.name, line, i+1, c.colName(i), s)
		}
		dst[j] = v
	}
	if c.id >= 0 {
		id = rec[c.id]
		if !utf8.ValidString(id) {
			return nil, "", fmt.Errorf("%s: line %d, column %d (%s): id %q is not valid UTF-8", c.name, line, c.id+1, c.colName(c.id), id)
		}
		id = strings.Clone(id)
	}
	return dst, id, nil
}

// colName names column i (0-based) for error messages: its quoted header
// name, or its 0-based index as --drop takes it.
func (c *Reader) colName(i int) string {
	if c.cols != nil {
		return strconv.Quote(c.cols[i])
	}
	return "index " + strconv.Itoa(i)
}

// ReadAll reads every remaining row into one row-major n×Dim slice. A file
// without data rows is an error.
func (c *Reader) ReadAll() (x []float64, n int, err error) {
	row := make([]float64, c.Dim())
	for {
		if _, _, err := c.Next(row); err == io.EOF {
			break
		} else if err != nil {
			return nil, 0, err
		}
		x = append(x, row...)
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("%s: no data rows", c.name)
	}
	return x, n, nil
}
