package learnertest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// DataEnv names the environment variable that overrides DataDir.
const DataEnv = "KPCASTREAM_DATA"

// DataDir returns the directory of the evaluation data (wine.csv,
// *.kpca_ref.json, …): $KPCASTREAM_DATA when set, else testdata/data at the
// module root (byte-identical copies of the shared evaluation data, kept in
// the repository so that a fresh clone runs every data test). The module
// root is found by walking up from the working directory to go.mod. A
// missing directory fails the test: the data is part of the repository.
func DataDir(t testing.TB) string {
	t.Helper()
	dir, tried := findDataDir()
	if dir == "" {
		t.Fatalf("learnertest: evaluation data not found (tried %s); it lives in testdata/data", strings.Join(tried, ", "))
	}
	return dir
}

func findDataDir() (string, []string) {
	var cands []string
	if env := os.Getenv(DataEnv); env != "" {
		cands = append(cands, env)
	} else if root := moduleRoot(); root != "" {
		cands = append(cands, filepath.Join(root, "testdata", "data"))
	}
	for _, c := range cands {
		if st, err := os.Stat(filepath.Join(c, "README.md")); err == nil && !st.IsDir() {
			return filepath.Clean(c), cands
		}
	}
	return "", cands
}

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// LoadCSV reads a comma-separated file with one header line and numeric
// cells, dropping the columns named in drop. It returns the kept values
// row-major (n×d) and the kept column names.
func LoadCSV(path string, drop []string) (x []float64, n, d int, header []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, nil, fmt.Errorf("learnertest: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, 0, 0, nil, fmt.Errorf("learnertest: %s: %w", path, err)
		}
		return nil, 0, 0, nil, fmt.Errorf("learnertest: %s: empty file", path)
	}
	cols := strings.Split(strings.TrimSpace(sc.Text()), ",")
	var keep []int
	for i, c := range cols {
		if !slices.Contains(drop, c) {
			keep = append(keep, i)
			header = append(header, c)
		}
	}
	for _, name := range drop {
		if !slices.Contains(cols, name) {
			return nil, 0, 0, nil, fmt.Errorf("learnertest: %s: no column %q to drop", path, name)
		}
	}
	d = len(keep)
	line := 1
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		cells := strings.Split(text, ",")
		if len(cells) != len(cols) {
			return nil, 0, 0, nil, fmt.Errorf("learnertest: %s:%d: %d cells, want %d", path, line, len(cells), len(cols))
		}
		for _, i := range keep {
			v, err := strconv.ParseFloat(cells[i], 64)
			if err != nil {
				return nil, 0, 0, nil, fmt.Errorf("learnertest: %s:%d: column %q: %w", path, line, cols[i], err)
			}
			x = append(x, v)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, 0, 0, nil, fmt.Errorf("learnertest: %s: %w", path, err)
	}
	if n == 0 {
		return nil, 0, 0, nil, errors.New("learnertest: " + path + ": no data rows")
	}
	return x, n, d, header, nil
}
