package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// config is the command's defaults for a replay of the file at in.
func config(dir string) *Config {
	return &Config{Learner: learners.KindIKPCA, Kernel: learners.KernelRBF, Degree: 3, Components: 2, Budget: learners.DefaultBudget,
		Forget: 1, Passes: 1, Solver: "auto", Precision: learners.DefaultPrecision, ModelOut: filepath.Join(dir, "model.json"),
		Monitor: MonitorConfig{Learn: monitor.LearnAlways, Level: monitor.DefaultLevel, Trend: monitor.DefaultTrend},
		Label:   LabelConfig{On: "coords"}}
}

func run(t *testing.T, c *Config, file string, hooks ...Hook) (string, error) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "data", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stdout, stderr bytes.Buffer
	err = Run(context.Background(), c, f, file, &stdout, &stderr, hooks...)
	return stdout.String() + stderr.String(), err
}

// TestStandardizeShortFile (issue 33 #2): --standardize on a file shorter
// than the rows it holds back (half the warm-up) learned nothing and
// failed with "learners: not ready" and no hint; the error now names the
// warm-up and a --warmup that works, and that one does. (The default
// warm-up is at most 200 rows since issue 31, holding back 100: the test
// asks for 400.)
func TestStandardizeShortFile(t *testing.T) {
	dir := t.TempDir()
	c := config(dir)
	c.Drop, c.Budget, c.Label.Standardize, c.Monitor.Warmup = []string{"label"}, 200, true, 400
	_, err := run(t, c, "wine.csv")
	if err == nil || !strings.Contains(err.Error(), "holds back the first 200 rows") || !strings.Contains(err.Error(), "--warmup 356 or less") {
		t.Fatalf("wine.csv (178 rows), budget 200, --standardize: %v; want the held-back rows and a --warmup that fits named", err)
	}
	c = config(dir)
	c.Drop, c.Budget, c.Label.Standardize, c.Monitor.Warmup = []string{"label"}, 200, true, 356
	if out, err := run(t, c, "wine.csv"); err != nil {
		t.Fatalf("with --warmup 356: %v\n%s", err, out)
	}
	if _, err := os.Stat(c.ModelOut); err != nil {
		t.Errorf("with --warmup 356: no model: %v", err)
	}
}

// TestHookSeesEveryRowOnce: a caller's hook is told of every row of every
// pass once, in the order fed, after the key model took it.
func TestHookSeesEveryRowOnce(t *testing.T) {
	c := config(t.TempDir())
	c.Drop, c.Passes, c.Shuffle, c.ShuffleSeed, c.Budget = []string{"cluster"}, 2, true, 7, 30
	seen := map[[2]int]int{}
	var fed []int64
	ready := 0
	_, err := run(t, c, "three_clusters.csv", HookFunc(func(l learners.Learner, r *Row) error {
		seen[[2]int{r.Pass, r.Index}]++
		fed = append(fed, r.Fed)
		if r.Err == nil {
			ready++
			if len(r.Z) != 2 || r.Monitor.Z == nil {
				t.Errorf("row %d: z %v, monitor's %v", r.Index, r.Z, r.Monitor.Z)
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 180 || len(fed) != 180 || fed[179] != 180 || ready < 150 {
		t.Errorf("%d distinct (pass, row) of 180, %d calls, last fed %d, %d scored", len(seen), len(fed), fed[len(fed)-1], ready)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("pass %d row %d told %d times", k[0], k[1], n)
		}
	}
}
