package learnertest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func TestDataDir(t *testing.T) {
	dir := learnertest.DataDir(t)
	if _, err := os.Stat(filepath.Join(dir, "wine.kpca_ref.json")); err != nil {
		t.Fatalf("DataDir %s holds no wine reference: %v", dir, err)
	}
	t.Run("env", func(t *testing.T) {
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "README.md"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv(learnertest.DataEnv, other)
		if got := learnertest.DataDir(t); got != other {
			t.Errorf("DataDir with $%s=%s: got %s", learnertest.DataEnv, other, got)
		}
	})
}

func TestLoadCSV(t *testing.T) {
	dir := learnertest.DataDir(t)
	x, n, d, header, err := learnertest.LoadCSV(filepath.Join(dir, "wine.csv"), []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 178 || d != 13 || len(x) != n*d || header[0] != "alcohol" || slices.Contains(header, "label") {
		t.Fatalf("wine: n=%d d=%d len=%d header %v; want 178×13 without label", n, d, len(x), header)
	}
	if x[0] != 14.23 || x[12] != 1065 || x[13] != 13.2 {
		t.Errorf("wine first values %v, want 14.23 … 1065, 13.2", x[:14])
	}

	write := func(t *testing.T, text string) string {
		p := filepath.Join(t.TempDir(), "f.csv")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, text string
		drop       []string
		want       string
	}{
		{"empty", "", nil, "empty file"},
		{"no_rows", "a,b\n", nil, "no data rows"},
		{"ragged", "a,b\n1,2\n3\n", nil, "1 cells, want 2"},
		{"not_a_number", "a,b\n1,x\n", nil, "column \"b\""},
		{"unknown_drop", "a,b\n1,2\n", []string{"c"}, "no column \"c\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, _, err := learnertest.LoadCSV(write(t, c.text), c.drop)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, _, _, _, err := learnertest.LoadCSV(filepath.Join(dir, "no-such.csv"), nil); err == nil {
		t.Error("missing file: got nil error")
	}
}
