package classify_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   classify.Config
		field string
	}{
		{"one class", classify.Config{Classes: 1, Dim: 4}, "classes"},
		{"no dim", classify.Config{Classes: 2}, "dim"},
		{"negative ridge", classify.Config{Classes: 2, Dim: 4, Ridge: -1}, "ridge"},
		{"forget above 1", classify.Config{Classes: 2, Dim: 4, Forget: 1.5}, "forget"},
		{"unknown loss", classify.Config{Classes: 2, Dim: 4, Loss: "logistic"}, "loss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, classify.ErrConfig) || !contains(err.Error(), tc.field+":") {
				t.Fatalf("config %+v: error %v, want ErrConfig naming %s", tc.cfg, err, tc.field)
			}
			if _, err := classify.New(tc.cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	if err := (classify.Config{Classes: 2, Dim: 1}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestBadInput(t *testing.T) {
	cl, _ := classify.New(classify.Config{Classes: 3, Dim: 2})
	before := cl.State()
	for _, tc := range []struct {
		name string
		z    []float64
		y    int
		want error
	}{
		{"class too large", []float64{1, 2}, 3, classify.ErrClass},
		{"negative class", []float64{1, 2}, -1, classify.ErrClass},
		{"too many features", []float64{1, 2, 3}, 0, classify.ErrInput},
		{"nan", []float64{math.NaN()}, 0, classify.ErrInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := cl.Learn(tc.z, tc.y); !errors.Is(err, tc.want) {
				t.Fatalf("Learn(%v, %d): got %v, want %v", tc.z, tc.y, err, tc.want)
			}
		})
	}
	if _, _, err := cl.Predict(nil, []float64{math.Inf(1)}); !errors.Is(err, classify.ErrInput) {
		t.Fatalf("Predict(+Inf): got %v, want ErrInput", err)
	}
	if after := cl.State(); !slices.Equal(before.W, after.W) || !slices.Equal(before.P, after.P) {
		t.Fatal("bad input changed the state")
	}
}

// Linearly separable classes are learned; the scores sum to about 1.
func TestLearnsSeparable(t *testing.T) {
	cl, _ := classify.New(classify.Config{Classes: 3, Dim: 2})
	rng := rand.New(rand.NewPCG(1, 2))
	centres := [][]float64{{2, 0}, {-2, 0}, {0, 3}}
	hits := 0
	for i := range 600 {
		y := rng.IntN(3)
		z := []float64{centres[y][0] + 0.3*rng.NormFloat64(), centres[y][1] + 0.3*rng.NormFloat64()}
		pred, s, err := cl.Predict(nil, z)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 300 {
			if pred == y {
				hits++
			}
			if sum := s[0] + s[1] + s[2]; math.Abs(sum-1) > 0.05 {
				t.Fatalf("scores %v sum to %v, want about 1", s, sum)
			}
		}
		if err := cl.Learn(z, y); err != nil {
			t.Fatal(err)
		}
	}
	if acc := float64(hits) / 300; acc < 0.99 {
		t.Fatalf("accuracy %.3f on separable classes, want ≥ 0.99", acc)
	}
}

// newLearner returns an ikpca learner on d = 3 with a small budget and the
// given eviction, fed n seeded points.
func feed(t *testing.T, ob *classify.OnBasis, rng *rand.Rand, n int, teach bool) {
	t.Helper()
	for range n {
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		y := 0
		if x[0]*x[1] > 0 {
			y = 1
		}
		if x[2] > 1 {
			y = 2
		}
		if err := ob.Learn(x); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ob.Predict(nil, x); err != nil {
			t.Fatal(err)
		}
		if teach {
			if err := ob.Teach(y); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Every change of coordinates leaves the classifier's function unchanged
// on the span that survives it: the scores of the retained dictionary
// members are the same before and after each Learn (rotations, dropped
// and new coordinates, centroid moves), to 1e-9, while the learner keeps
// evicting. Between those steps the classifier learns, so the weights are
// far from zero.
func TestBasisChangeKeepsPredictions(t *testing.T) {
	for _, ev := range []string{"fifo", "lli", "centroid", "contribution", "centroid/hinge"} {
		t.Run(ev, func(t *testing.T) {
			ev, loss, _ := strings.Cut(ev, "/")
			l, err := learners.NewIKPCA(learners.Config{Dim: 3, Components: 2, Budget: 12, Eviction: ev, SwapRatio: 1,
				Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Jitter: 1e-13, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			ob, err := classify.NewOnBasis(l, classify.Config{Classes: 3, Loss: loss})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			feed(t, ob, rng, 200, true)
			changes, checked := 0, 0
			for step := range 400 {
				pts := points(l)
				before := make([][]float64, len(pts))
				for i, p := range pts {
					_, s, err := ob.Predict(nil, p)
					if err != nil {
						t.Fatal(err)
					}
					before[i] = s
				}
				x := []float64{2 * rng.NormFloat64(), 2 * rng.NormFloat64(), 2 * rng.NormFloat64()}
				if err := ob.Learn(x); err != nil {
					t.Fatal(err)
				}
				after := points(l)
				if !samePoints(pts, after) {
					changes++
				}
				for i, p := range pts {
					if !hasPoint(after, p) {
						continue
					}
					_, s, err := ob.Predict(nil, p)
					if err != nil {
						t.Fatal(err)
					}
					for c := range s {
						if d := math.Abs(s[c] - before[i][c]); d > 1e-9*max(1, math.Abs(before[i][c])) {
							t.Fatalf("step %d: member %d class %d: score %v after the basis change, %v before (|Δ| %.3g)", step, i, c, s[c], before[i][c], d)
						}
					}
					checked++
				}
				// keep training so the weights keep moving
				if _, _, err := ob.Predict(nil, x); err != nil {
					t.Fatal(err)
				}
				if err := ob.Teach(step % 3); err != nil {
					t.Fatal(err)
				}
			}
			if changes < 10 {
				t.Fatalf("only %d dictionary changes in 400 steps: the test does not exercise evictions", changes)
			}
			t.Logf("%s: %d dictionary changes, %d member scores checked", ev, changes, checked)
		})
	}
}

func points(l *learners.IKPCA) [][]float64 {
	st := l.State()
	m := st.Matrices["points"]
	var out [][]float64
	for i := range m.Rows {
		out = append(out, slices.Clone(m.Data[i*m.Cols:(i+1)*m.Cols]))
	}
	return out
}

func hasPoint(set [][]float64, p []float64) bool {
	for _, q := range set {
		if slices.Equal(q, p) {
			return true
		}
	}
	return false
}

func samePoints(a, b [][]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// State → Restore gives a classifier that continues bit-identically.
func TestStateRoundTrip(t *testing.T) {
	l, _ := learners.NewIKPCA(learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}})
	ob, _ := classify.NewOnBasis(l, classify.Config{Classes: 3})
	feed(t, ob, rand.New(rand.NewPCG(1, 1)), 300, true)
	st := ob.Classifier().State()
	l2, err := learners.Restore(l.State())
	if err != nil {
		t.Fatal(err)
	}
	ob2, _ := classify.NewOnBasis(l2.(*learners.IKPCA), classify.Config{Classes: 3})
	if err := ob2.Classifier().Restore(st); err != nil {
		t.Fatal(err)
	}
	feed(t, ob, rand.New(rand.NewPCG(2, 2)), 200, true)
	feed(t, ob2, rand.New(rand.NewPCG(2, 2)), 200, true)
	a, b := ob.Classifier().State(), ob2.Classifier().State()
	if !bitsEqual(a.W, b.W) || !bitsEqual(a.P, b.P) || a.Seen != b.Seen {
		t.Fatal("restored classifier diverged from the original")
	}
	// A bad state is refused and leaves the classifier as it was.
	bad := ob.Classifier().State()
	bad.W[3] = math.NaN()
	if err := ob2.Classifier().Restore(bad); !errors.Is(err, classify.ErrState) {
		t.Fatalf("NaN weight: got %v, want ErrState", err)
	}
	bad = ob.Classifier().State()
	bad.P = bad.P[:5]
	if err := ob2.Classifier().Restore(bad); !errors.Is(err, classify.ErrState) {
		t.Fatalf("short P: got %v, want ErrState", err)
	}
	bad = ob.Classifier().State()
	bad.Config.Classes = 4
	if _, err := classify.FromState(bad); !errors.Is(err, classify.ErrState) {
		t.Fatalf("inconsistent config: got %v, want ErrState", err)
	}
	if c := ob2.Classifier().State(); !bitsEqual(c.W, b.W) {
		t.Fatal("a refused state changed the classifier")
	}
}

func bitsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// The export's dual form gives Predict's scores through the model's
// points and kernel alone, as another language would apply it.
func TestExportMatchesPredict(t *testing.T) {
	l, _ := learners.NewIKPCA(learners.Config{Dim: 3, Components: 2, Budget: 16, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}})
	ob, _ := classify.NewOnBasis(l, classify.Config{Classes: 3})
	rng := rand.New(rand.NewPCG(4, 4))
	feed(t, ob, rng, 400, true)
	m, err := l.Model()
	if err != nil {
		t.Fatal(err)
	}
	if m.Classifier, err = ob.Export([]string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		pred, s, err := ob.Predict(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		es, epred := m.Predict(x)
		for c := range s {
			if math.Abs(es[c]-s[c]) > 1e-8*max(1, math.Abs(s[c])) {
				t.Fatalf("x %v class %d: export score %v, classifier %v", x, c, es[c], s[c])
			}
		}
		if epred != pred {
			t.Fatalf("x %v: export predicts %d, classifier %d (scores %v)", x, epred, pred, s)
		}
	}
}

// kha's memorised set never changes once complete: before that there are
// no coordinates (bias-only predictions), at completion the B coordinates
// appear, and afterwards every Learn leaves the classifier's function
// exactly as it was; the classifier learns a separable problem on them.
func TestKHABasis(t *testing.T) {
	l, err := learners.NewKHA(learners.Config{Learner: learners.KindKHA, Dim: 3, Components: 2, Budget: 30,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := classify.NewOnBasis(l, classify.Config{Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	if z, err := l.Coords(nil, []float64{1, 2, 3}); err != nil || len(z) != 0 {
		t.Fatalf("coordinates before the set is complete: %v, %v", z, err)
	}
	feed(t, ob, rng, 600, true)
	probes := [][]float64{{0.5, 0.5, 0}, {-1, 1, 2}, {2, -1, 0.3}}
	before := make([][]float64, len(probes))
	for i, p := range probes {
		_, before[i], _ = ob.Predict(nil, p)
	}
	for range 50 {
		if err := ob.Learn([]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range probes {
		_, s, _ := ob.Predict(nil, p)
		if !bitsEqual(s, before[i]) {
			t.Fatalf("probe %d: scores %v after learning, %v before", i, s, before[i])
		}
	}
	if ob.Classifier().Seen() != 600 {
		t.Fatalf("classifier learned %d labels, want 600", ob.Classifier().Seen())
	}
}

// The hinge loss learns separable classes, and an observation whose scores
// are all beyond their margins (the true class's above 1, every other's
// below 0) leaves W bit-identical while P still takes it in (the RLS
// covariance update); one inside a margin moves W as the squared loss
// would for that class only.
func TestHingeLoss(t *testing.T) {
	cl, _ := classify.New(classify.Config{Classes: 3, Dim: 2, Loss: classify.LossHinge})
	rng := rand.New(rand.NewPCG(1, 2))
	centres := [][]float64{{2, 0}, {-2, 0}, {0, 3}}
	hits := 0
	for i := range 600 {
		y := rng.IntN(3)
		z := []float64{centres[y][0] + 0.3*rng.NormFloat64(), centres[y][1] + 0.3*rng.NormFloat64()}
		pred, _, err := cl.Predict(nil, z)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 300 && pred == y {
			hits++
		}
		if err := cl.Learn(z, y); err != nil {
			t.Fatal(err)
		}
	}
	if acc := float64(hits) / 300; acc < 0.99 {
		t.Fatalf("hinge: accuracy %.3f on separable classes, want ≥ 0.99", acc)
	}
	// Find a point beyond every margin and one inside the true class's.
	var beyond, inside []float64
	var yb, yi int
	for range 1000 {
		y := rng.IntN(3)
		z := []float64{centres[y][0] + 0.6*rng.NormFloat64(), centres[y][1] + 0.6*rng.NormFloat64()}
		_, s, _ := cl.Predict(nil, z)
		out := s[y] > 1
		for r := range s {
			if r != y && s[r] >= 0 {
				out = false
			}
		}
		switch {
		case out && beyond == nil:
			beyond, yb = z, y
		case !out && s[y] < 0.9 && inside == nil:
			inside, yi = z, y
		}
	}
	if beyond == nil || inside == nil {
		t.Fatal("no point beyond every margin, or none inside the true class's: the test does not exercise the hinge")
	}
	before := cl.State()
	if err := cl.Learn(beyond, yb); err != nil {
		t.Fatal(err)
	}
	after := cl.State()
	if !bitsEqual(before.W, after.W) {
		t.Fatal("hinge: a point beyond every margin changed W")
	}
	if bitsEqual(before.P, after.P) || after.Seen != before.Seen+1 {
		t.Fatal("hinge: a point beyond every margin was not taken into P, or not counted")
	}
	if err := cl.Learn(inside, yi); err != nil {
		t.Fatal(err)
	}
	moved := cl.State()
	d := 3 // n + 1 with n = 2
	if slices.Equal(moved.W[yi*d:(yi+1)*d], after.W[yi*d:(yi+1)*d]) {
		t.Fatal("hinge: a point inside the true class's margin did not move that class's weights")
	}
}

// A saved state restores into a classifier of the other loss (W and P
// mean the same under both) and continues as a classifier of that loss
// fed the same observations; an unknown loss in a state is refused.
func TestRestoreAcrossLoss(t *testing.T) {
	sq, _ := classify.New(classify.Config{Classes: 3, Dim: 2})
	hi, _ := classify.New(classify.Config{Classes: 3, Dim: 2, Loss: classify.LossHinge})
	rng := rand.New(rand.NewPCG(3, 4))
	obs := make([][]float64, 200)
	for i := range obs {
		obs[i] = []float64{rng.NormFloat64(), rng.NormFloat64()}
	}
	label := func(z []float64) int {
		switch {
		case z[0] > 0.5:
			return 0
		case z[1] > 0:
			return 1
		}
		return 2
	}
	for _, z := range obs[:100] {
		if err := sq.Learn(z, label(z)); err != nil {
			t.Fatal(err)
		}
	}
	if err := hi.Restore(sq.State()); err != nil {
		t.Fatalf("a squared-loss state into a hinge classifier: %v", err)
	}
	ref, _ := classify.FromState(sq.State())
	for _, z := range obs[100:] {
		if err := hi.Learn(z, label(z)); err != nil {
			t.Fatal(err)
		}
		if err := ref.Learn(z, label(z)); err != nil {
			t.Fatal(err)
		}
	}
	if hi.Config().Loss != classify.LossHinge || bitsEqual(hi.State().W, ref.State().W) {
		t.Fatal("the restored hinge classifier learned as the squared one")
	}
	bad := sq.State()
	bad.Config.Loss = "logistic"
	if err := hi.Restore(bad); !errors.Is(err, classify.ErrState) {
		t.Fatalf("unknown loss in a state: got %v, want ErrState", err)
	}
}

// kha's kmeans rebase replaces the whole memorised set by the centroids;
// the classifier follows it by Map (the RKHS projection of its function
// on the new span), which is exact at the new members: each scores the
// same before the rebase (old coordinates, old weights) and after it (new
// coordinates, mapped weights). Checked at the first three rebases (2B,
// 4B, 8B observations), training in between.
func TestKHAKMeansRebase(t *testing.T) {
	const b = 20
	cfg := learners.Config{Learner: learners.KindKHA, Dim: 3, Components: 2, Budget: b, Dictionary: learners.DictKMeans,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1}
	l, err := learners.NewKHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := classify.NewOnBasis(l, classify.Config{Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	seen := 0
	for _, at := range []int{2 * b, 4 * b, 8 * b} {
		feed(t, ob, rng, at-1-seen, true)
		seen = at - 1
		// A copy of learner and classifier takes the observation that
		// rebases; the original keeps the old coordinates.
		l2, err := learners.Restore(l.State())
		if err != nil {
			t.Fatal(err)
		}
		ob2, _ := classify.NewOnBasis(l2.(*learners.KHA), classify.Config{Classes: 3})
		if err := ob2.Classifier().Restore(ob.Classifier().State()); err != nil {
			t.Fatal(err)
		}
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		if err := ob2.Learn(x); err != nil {
			t.Fatal(err)
		}
		old, members := khaPoints(l), khaPoints(l2.(*learners.KHA))
		if samePoints(old, members) {
			t.Fatalf("observation %d: the memorised set did not change (no rebase)", at)
		}
		var worst float64
		for _, p := range members {
			_, before, err := ob.Predict(nil, p)
			if err != nil {
				t.Fatal(err)
			}
			_, after, err := ob2.Predict(nil, p)
			if err != nil {
				t.Fatal(err)
			}
			for c := range before {
				worst = max(worst, math.Abs(after[c]-before[c])/max(1, math.Abs(before[c])))
			}
		}
		if worst > 1e-6 {
			t.Fatalf("rebase at %d: a new member's score moved by %.3g (relative), want ≤ 1e-6", at, worst)
		}
		t.Logf("rebase at %d observations: largest change of a new member's score %.3g", at, worst)
		// Go on from the rebased copy.
		l, ob = l2.(*learners.KHA), ob2
		if _, _, err := ob.Predict(nil, x); err != nil {
			t.Fatal(err)
		}
		if err := ob.Teach(0); err != nil {
			t.Fatal(err)
		}
		seen++
	}
}

func khaPoints(l *learners.KHA) [][]float64 {
	m := l.State().Matrices["points"]
	var out [][]float64
	for i := range m.Rows {
		out = append(out, slices.Clone(m.Data[i*m.Cols:(i+1)*m.Cols]))
	}
	return out
}

// Map with the matrix of a plane rotation is Rotate (T Tᵀ = I: P is only
// carried along), and with T = I/2 it halves the weights and gives P's
// block T P Tᵀ plus 3/(4λ) on the diagonal (a direction three quarters
// new); the bias's row and column follow T.
func TestMap(t *testing.T) {
	const n = 5
	train := func() *classify.Classifier {
		cl, _ := classify.New(classify.Config{Classes: 3, Dim: n})
		rng := rand.New(rand.NewPCG(4, 4))
		for i := range 40 {
			z := make([]float64, n)
			for j := range z {
				z[j] = rng.NormFloat64()
			}
			if err := cl.Learn(z, i%3); err != nil {
				t.Fatal(err)
			}
		}
		return cl
	}
	a, b := train(), train()
	c, s := math.Cos(0.7), math.Sin(0.7)
	tm := make([]float64, n*n)
	for i := range n {
		tm[i*n+i] = 1
	}
	tm[1*n+1], tm[1*n+2], tm[2*n+1], tm[2*n+2] = c, s, -s, c
	a.Rotate(1, c, s)
	b.Map(tm, n)
	sa, sb := a.State(), b.State()
	for name, v := range map[string][2][]float64{"W": {sa.W, sb.W}, "P": {sa.P, sb.P}} {
		for i := range v[0] {
			if d := math.Abs(v[0][i] - v[1][i]); d > 1e-12*max(1, math.Abs(v[0][i])) {
				t.Fatalf("rotation: %s[%d] %v by Map, %v by Rotate", name, i, v[1][i], v[0][i])
			}
		}
	}
	h := train()
	before := h.State()
	half := make([]float64, n*n)
	for i := range n {
		half[i*n+i] = 0.5
	}
	h.Map(half, n)
	after := h.State()
	w, lam := n+1, h.Config().Ridge
	for r := range 3 {
		for j := range w {
			want := before.W[r*w+j]
			if j < n {
				want *= 0.5
			}
			if math.Abs(after.W[r*w+j]-want) > 1e-12 {
				t.Fatalf("T = I/2: W[%d][%d] %v, want %v", r, j, after.W[r*w+j], want)
			}
		}
	}
	for i := range w {
		for j := range w {
			f := 1.0
			if i < n {
				f *= 0.5
			}
			if j < n {
				f *= 0.5
			}
			want := f * before.P[i*w+j]
			if i == j && i < n {
				want += 0.75 / lam
			}
			if d := math.Abs(after.P[i*w+j] - want); d > 1e-12*max(1, math.Abs(want)) {
				t.Fatalf("T = I/2: P[%d][%d] %v, want %v", i, j, after.P[i*w+j], want)
			}
		}
	}
}
