package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "similarity:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("similarity", flag.ContinueOnError)
	in := fs.String("in", "", "CSV file with a header line: the evaluation rows (required)")
	drop := fs.String("drop", "", "comma-separated columns to ignore")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() == 0 {
		return errors.New("usage: similarity --in rows.csv [--drop cols] model.json…")
	}
	var dropped []string
	if *drop != "" {
		dropped = strings.Split(*drop, ",")
	}
	x, n, d, err := loadCSV(*in, dropped)
	if err != nil {
		return err
	}
	var ref *learners.BatchFit
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m, err := codec.DecodeModel(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		_, md, k := m.Dims()
		if md != d {
			return fmt.Errorf("%s: model dimension %d, %s has %d columns", path, md, *in, d)
		}
		if ref == nil {
			if ref, err = learners.FitBatch(m.Kernel, x, n, d, k); err != nil {
				return fmt.Errorf("batch fit of %s: %w", *in, err)
			}
		}
		rep, err := kpcaeval.CompareFit(ref, m)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out, err := json.Marshal(map[string]any{"model": path, "n": rep.N, "k": rep.K, "similarity": rep.Similarity,
			"cosines": rep.Cosines, "gap": rep.Gap})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(out))
	}
	return nil
}

// loadCSV reads the numeric columns of path not named in drop, row-major.
func loadCSV(path string, drop []string) (x []float64, n, d int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: header: %w", path, err)
	}
	var keep []int
	for i, c := range head {
		if !slices.Contains(drop, strings.TrimSpace(c)) {
			keep = append(keep, i)
		}
	}
	d = len(keep)
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		for _, i := range keep {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("%s:%d: column %q: %w", path, line, head[i], err)
			}
			x = append(x, v)
		}
		n++
	}
	if n == 0 {
		return nil, 0, 0, fmt.Errorf("%s: no rows", path)
	}
	return x, n, d, nil
}
