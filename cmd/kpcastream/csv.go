package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// csvReader streams numeric rows from a CSV file with a header line,
// keeping the columns not named in drop. It holds one row at a time.
type csvReader struct {
	r      *csv.Reader
	name   string
	cols   []string // every column of the header
	keep   []int    // indices of the kept columns
	header []string // names of the kept columns
}

// newCSVReader reads the header of r. name is used in error messages.
func newCSVReader(r io.Reader, name string, drop []string) (*csvReader, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	head, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file: want a header line", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	c := &csvReader{r: cr, name: name, cols: slices.Clone(head)}
	for i, col := range c.cols {
		c.cols[i] = strings.TrimSpace(col)
	}
	for _, d := range drop {
		if !slices.Contains(c.cols, d) {
			return nil, fmt.Errorf("%s: --drop names column %q, which the header (%s) does not have", name, d, strings.Join(c.cols, ","))
		}
	}
	for i, col := range c.cols {
		if !slices.Contains(drop, col) {
			c.keep = append(c.keep, i)
			c.header = append(c.header, col)
		}
	}
	if len(c.keep) == 0 {
		return nil, fmt.Errorf("%s: no columns left after --drop", name)
	}
	return c, nil
}

// Dim is the number of kept columns.
func (c *csvReader) Dim() int { return len(c.keep) }

// Next reads the next row into dst (length Dim) and returns it, or io.EOF
// at the end. A malformed row gives an error naming the line and column.
func (c *csvReader) Next(dst []float64) ([]float64, error) {
	rec, err := c.r.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	line, _ := c.r.FieldPos(0)
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
			return nil, fmt.Errorf("%s: line %d: %d columns, want %d as in the header", c.name, pe.Line, len(rec), len(c.cols))
		}
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	for j, i := range c.keep {
		s := strings.TrimSpace(rec[i])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			_, col := c.r.FieldPos(i)
			return nil, fmt.Errorf("%s: line %d, column %d (%q): %q is not a finite number", c.name, line, col, c.cols[i], s)
		}
		dst[j] = v
	}
	return dst, nil
}

// readAllCSV reads every row of c into one row-major slice.
func readAllCSV(c *csvReader) ([]float64, int, error) {
	d := c.Dim()
	var x []float64
	row := make([]float64, d)
	n := 0
	for {
		if _, err := c.Next(row); err == io.EOF {
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
