package learners_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// oldPolicies are the eviction policies before centroid, kept selectable.
var oldPolicies = []string{"lli", "contribution", "fifo"}

// TestIKPCABudgetSatellite replays satellite.csv (6,435 × 36,
// standardised, rbf γ = 0.05, k = 8) once, shuffled, through ikpca with
// default settings at B = 100 and 200, where the budget binds (the ALD
// rule would admit almost every row), and scores the synced model against
// scikit-learn's batch KPCA of all rows (mean cos² of the principal
// angles). The default must reach 0.99 and 0.995 and beat every older
// policy (run too, except under -short; their figures are the README's).
//
//	go test ./learners -run TestIKPCABudgetSatellite -v
func TestIKPCABudgetSatellite(t *testing.T) {
	s := loadSatellite(t)
	order := shuffled(s.n, 1)
	for _, c := range []struct {
		b    int
		want float64
	}{{100, 0.99}, {200, 0.995}} {
		// The older policies at B = 100 only, and not under -short: at
		// B = 200 fifo and contribution evict on every message and cost
		// most of the test's time (their B = 200 figures are in the README,
		// from go test -run TestIKPCABudgetSatellite with KPCASTREAM_ALL=1).
		policies := []string{""}
		if !testing.Short() && (c.b == 100 || os.Getenv("KPCASTREAM_ALL") == "1") {
			policies = append(policies, oldPolicies...)
		}
		sims := map[string]float64{}
		for _, ev := range policies {
			l, err := learners.NewIKPCA(learners.Config{Dim: s.d, Components: s.k, Budget: c.b, Kernel: s.kern, Eviction: ev})
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range order {
				if err := l.Learn(s.x[i*s.d : (i+1)*s.d]); err != nil {
					t.Fatal(err)
				}
			}
			sum := l.Summary(nil)
			if err := l.Sync(100); err != nil {
				t.Fatal(err)
			}
			m, err := l.Model()
			if err != nil {
				t.Fatal(err)
			}
			sim := s.similarity(t, m)
			sims[l.Config().Eviction] = sim
			t.Logf("B=%d eviction %-12s similarity %.4f | dropped %.3f swaps/1000 %.1f moves/1000 %.1f outside %.3f advice %s",
				c.b, l.Config().Eviction, sim, sum.DroppedMass, sum.SwapsPer1000, sum.MovesPer1000, sum.OutsideSpan, sum.BudgetAdvice)
		}
		def := sims[learners.EvictCentroid]
		if def < c.want {
			t.Errorf("B=%d: default (centroid) similarity %.4f, want ≥ %.3f", c.b, def, c.want)
		}
		for ev, sim := range sims {
			if sim > def {
				t.Errorf("B=%d: %s reaches %.4f, above the default's %.4f", c.b, ev, sim, def)
			}
		}
	}
}

// rotatingStream returns n rows in d = 8 of a noisy ellipse (semi-axes 1.5
// and 0.75, radius noise 5 %, isotropic noise of standard deviation noise
// in every coordinate) whose plane turns by 90° over the stream, from the
// (x0, x1) plane to the (x2, x3) plane: gradual drift.
func rotatingStream(n int, noise float64, seed uint64) []float64 {
	const d = 8
	rng := rand.New(rand.NewPCG(seed, 77))
	x := make([]float64, n*d)
	for i := range n {
		phi := math.Pi / 2 * float64(i) / float64(n)
		th := 2 * math.Pi * rng.Float64()
		r := 1 + 0.05*rng.NormFloat64()
		a, b := 1.5*r*math.Cos(th), 0.75*r*math.Sin(th)
		row := x[i*d : (i+1)*d]
		for j := range row {
			row[j] = noise * rng.NormFloat64()
		}
		row[0] += a * math.Cos(phi)
		row[2] += a * math.Sin(phi)
		row[1] += b * math.Cos(phi)
		row[3] += b * math.Sin(phi)
	}
	return x
}

// driftCase is a drifting stream scored at checkpoints against batch KPCA
// of the last 2,000 rows.
type driftCase struct {
	name   string
	x      []float64
	n, d   int
	budget int
	kern   learners.Kernel
	checks []int // rows consumed at each checkpoint
}

// trackDrift replays c through ikpca (k = 5, forget 0.999) with the given
// eviction and returns the similarity at each of the checkpoints checks
// (rows consumed, ascending).
func trackDrift(t *testing.T, c driftCase, eviction string, checks []int) []float64 {
	t.Helper()
	const w = 2000
	l, err := learners.NewIKPCA(learners.Config{Dim: c.d, Components: 5, Budget: c.budget, Kernel: c.kern, Forget: 0.999, Eviction: eviction})
	if err != nil {
		t.Fatal(err)
	}
	var sims []float64
	next := 0
	for i := range c.n {
		if err := l.Learn(c.x[i*c.d : (i+1)*c.d]); err != nil {
			t.Fatal(err)
		}
		if next == len(checks) || i+1 != checks[next] {
			continue
		}
		next++
		m, err := l.Model()
		if err != nil {
			t.Fatal(err)
		}
		rep, err := kpcaeval.Compare(m, c.x[(i+1-w)*c.d:(i+1)*c.d], w, c.d)
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, rep.Similarity)
	}
	sum := l.Summary(nil)
	t.Logf("%s, eviction %-12s similarity %s | stored %d dropped %.3f swaps/1000 %.1f moves/1000 %.1f outside %.3f advice %s",
		c.name, l.Config().Eviction, fmtSims(sims), sum.Stored, sum.DroppedMass, sum.SwapsPer1000, sum.MovesPer1000, sum.OutsideSpan, sum.BudgetAdvice)
	return sims
}

func fmtSims(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.4f", x)
	}
	return strings.Join(s, " ")
}

// TestIKPCABudgetDrift tracks two drifting streams with forget 0.999 and
// a budget that binds (B = 40), scored against batch KPCA of the last
// 2,000 rows: gradual drift (rotatingStream, 30,000 rows, rbf γ = 1, noise
// 0.1) and abrupt drift (drift_stream.csv, change at row 10,000, rbf γ = 2,
// where the ellipses need more than 40 points). The default must stay at
// 0.98 through the rotation, be back at 0.95 within 2,000 rows of the
// abrupt change, and be at least as good as every older policy at the
// last checkpoint of each (the older policies run except under -short).
//
//	go test ./learners -run TestIKPCABudgetDrift -v
func TestIKPCABudgetDrift(t *testing.T) {
	xs, ns, ds, _, err := learnertest.LoadCSV(filepath.Join(learnertest.DataDir(t), "drift_stream.csv"), []string{"phase"})
	if err != nil {
		t.Fatal(err)
	}
	rbf := func(g float64) learners.Kernel { return learners.Kernel{Name: learners.KernelRBF, Gamma: g} }
	for _, tc := range []struct {
		c    driftCase
		want []float64 // minimum similarity of the default at each checkpoint
	}{
		{driftCase{"rotating", rotatingStream(30000, 0.1, 1), 30000, 8, 40, rbf(1), []int{5000, 15000, 30000}},
			[]float64{0.98, 0.98, 0.98}},
		{driftCase{"abrupt", xs, ns, ds, 40, rbf(2), []int{10000, 12000, 13000, 20000}},
			[]float64{0.99, 0.95, 0.95, 0.97}},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			def := trackDrift(t, tc.c, "", tc.c.checks)
			for i, want := range tc.want {
				if def[i] < want {
					t.Errorf("row %d: default similarity %.4f, want ≥ %.2f", tc.c.checks[i], def[i], want)
				}
			}
			if testing.Short() {
				return
			}
			// The older policies at the last checkpoint only (each batch
			// reference costs a 2,000-row fit).
			last := len(def) - 1
			for _, ev := range oldPolicies {
				old := trackDrift(t, tc.c, ev, tc.c.checks[last:])
				if old[0] > def[last] {
					t.Errorf("row %d: %s reaches %.4f, above the default's %.4f", tc.c.checks[last], ev, old[0], def[last])
				}
			}
		})
	}
}

// TestIKPCABudgetAdvice checks the budget-fit figures of Summary: a
// budget that does not bind is "ok" with nothing dropped; fifo at B = 30
// on satellite (every message swaps) is "too_small" with mass dropped;
// every fraction lies in [0, 1].
func TestIKPCABudgetAdvice(t *testing.T) {
	s := loadSatellite(t)
	run := func(b int, ev string, rows int) learners.Summary {
		l, err := learners.NewIKPCA(learners.Config{Dim: s.d, Components: s.k, Budget: b, Kernel: s.kern, Eviction: ev})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range shuffled(s.n, 2)[:rows] {
			if err := l.Learn(s.x[i*s.d : (i+1)*s.d]); err != nil {
				t.Fatal(err)
			}
		}
		sum := l.Summary(nil)
		for name, v := range map[string]float64{"DroppedMass": sum.DroppedMass, "OutsideSpan": sum.OutsideSpan,
			"SwapsPer1000/1000": sum.SwapsPer1000 / 1000, "MovesPer1000/1000": sum.MovesPer1000 / 1000} {
			if !(v >= 0 && v <= 1) {
				t.Errorf("B=%d %s: %s = %v, want in [0, 1]", b, ev, name, v)
			}
		}
		t.Logf("B=%d %s after %d rows: %+v", b, ev, rows, sum)
		return sum
	}
	if sum := run(400, "", 300); sum.BudgetAdvice != learners.AdviceOK || sum.DroppedMass != 0 || sum.SwapsPer1000 != 0 {
		t.Errorf("B=400 after 300 rows (not full): advice %q dropped %v swaps %v, want ok, 0, 0", sum.BudgetAdvice, sum.DroppedMass, sum.SwapsPer1000)
	}
	if sum := run(30, "fifo", 3000); sum.BudgetAdvice != learners.AdviceTooSmall || !(sum.DroppedMass > 0.05) || !(sum.SwapsPer1000 > 900) {
		t.Errorf("fifo B=30: advice %q dropped %v swaps %v, want too_small, > 0.05, > 900", sum.BudgetAdvice, sum.DroppedMass, sum.SwapsPer1000)
	}
}

// TestIKPCAOldDefaultSnapshot: a snapshot taken under the old default
// records eviction "lli" explicitly and has no budget-fit scalars; it
// restores as an lli learner (a restored learner keeps its policy), and a
// new learner's state records "centroid" explicitly in turn.
func TestIKPCAOldDefaultSnapshot(t *testing.T) {
	cfg := learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1}}
	old := cfg
	old.Eviction = "lli"
	l, err := learners.New(old)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 3)
	for i := range 100 {
		if err := l.Learn(learnertest.Stream(x, 4, i)); err != nil {
			t.Fatal(err)
		}
	}
	st := l.State()
	for _, name := range ikpcaOptional {
		delete(st.Scalars, name)
	}
	r, err := learners.Restore(st)
	if err != nil {
		t.Fatalf("restore of a pre-centroid lli snapshot: %v", err)
	}
	if got := r.(*learners.IKPCA).Config().Eviction; got != "lli" {
		t.Errorf("restored eviction %q, want lli", got)
	}
	n, err := learners.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.State().Config.Eviction; got != learners.EvictCentroid {
		t.Errorf("a new default learner's state records eviction %q, want %q", got, learners.EvictCentroid)
	}
}

// TestIKPCACentroidMoveGap compares centroid's move schedule, whose gap
// grows with m² above m = 256 (8 at m = 512, 32 at 1,024), with the gap of
// 2 at every size (the schedule before), at B = 512 (and 1,024, not under
// -short: 12 s more) on one shuffled pass of satellite (rbf γ = 0.05,
// k = 8; the dictionary fills after about B rows, then every later row is
// absorbed or replaces a member). The synced models' similarity to
// scikit-learn's batch KPCA of all rows must not drop by more than 0.002,
// and the larger gap must make fewer dictionary changes.
//
//	go test ./learners -run TestIKPCACentroidMoveGap -v
func TestIKPCACentroidMoveGap(t *testing.T) {
	s := loadSatellite(t)
	order := shuffled(s.n, 1)
	budgets := []int{512}
	if !testing.Short() && !raceEnabled { // B = 1024 takes minutes under the race detector
		budgets = append(budgets, 1024)
	}
	for _, b := range budgets {
		run := func(area int64) (sim float64, changes int64) {
			l, err := learners.NewIKPCA(learners.Config{Dim: s.d, Components: s.k, Budget: b, Kernel: s.kern})
			if err != nil {
				t.Fatal(err)
			}
			if area > 0 {
				learners.SetMoveGapArea(l, area)
			}
			for _, i := range order {
				if err := l.Learn(s.x[i*s.d : (i+1)*s.d]); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Sync(100); err != nil {
				t.Fatal(err)
			}
			m, err := l.Model()
			if err != nil {
				t.Fatal(err)
			}
			return s.similarity(t, m), l.State().Ints["clock"]
		}
		simNow, clockNow := run(0)
		simBefore, clockBefore := run(math.MaxInt64 / 4)
		t.Logf("B = %d: similarity %.5f with the m² gap (%d admissions and moves), %.5f with gap 2 (%d)", b, simNow, clockNow, simBefore, clockBefore)
		if simNow < simBefore-0.002 {
			t.Errorf("B = %d: similarity %.5f with the m² gap, %.5f with gap 2: dropped by more than 0.002", b, simNow, simBefore)
		}
		if clockNow >= clockBefore {
			t.Errorf("B = %d: %d dictionary changes with the m² gap, %d with gap 2: want fewer", b, clockNow, clockBefore)
		}
	}
}
