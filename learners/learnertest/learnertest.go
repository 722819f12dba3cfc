package learnertest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// Options describes the learner under test and its input stream.
type Options struct {
	// Dim is the learner's input dimension d (required).
	Dim int
	// Budget is the learner's budget B (required): the memory check feeds
	// 10·B observations.
	Budget int
	// Warmup is the number of observations after which (and after
	// AfterLearn) the learner must be ready. Default 2·Budget.
	Warmup int
	// Rows, when set, holds the stream row-major (len a multiple of Dim),
	// used cyclically. Otherwise Stream generates it from Seed.
	Rows []float64
	// Seed seeds the default stream.
	Seed uint64
	// AfterLearn, when set, is called after each batch of observations the
	// suite feeds (for example the batch learner's Fit).
	AfterLearn func(learners.Learner) error
	// ModelTol is the relative tolerance of Model().Transform against
	// Transform. Default 1e-8.
	ModelTol float64
	// Optional names the State scalars and matrices that were added to a
	// learner's state after snapshots of it existed: a State without them
	// must restore (they are not required), while a NaN or ±Inf value (or
	// a matrix of the wrong shape) is still rejected.
	Optional []string
	// HeapSlack is the heap growth in bytes tolerated between B and 10·B
	// observations on top of the state's own size. Default 1 MiB.
	HeapSlack uint64
	// Restore builds a learner from a State, as learners.Restore does for
	// the package's own kinds (the default). A learner defined outside the
	// package (a test learner given to the processor through its Deps)
	// passes its own.
	Restore func(*learners.State) (learners.Learner, error)
}

// Stream returns observation i of the default stream: a noisy ellipse in
// the first two coordinates (the first only when d = 1) plus isotropic
// noise of standard deviation 0.05, from a generator seeded by (seed, i).
func Stream(dst []float64, seed uint64, i int) []float64 {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	for j := range dst {
		dst[j] = 0.05 * rng.NormFloat64()
	}
	th := 2 * math.Pi * rng.Float64()
	dst[0] += math.Cos(th)
	if len(dst) > 1 {
		dst[1] += 0.5 * math.Sin(th)
	}
	return dst
}

type suite struct {
	opts Options
	new  func() learners.Learner
}

// obs returns observation i of the stream in a fresh slice.
func (s *suite) obs(i int) []float64 {
	d := s.opts.Dim
	if rows := s.opts.Rows; len(rows) > 0 {
		n := len(rows) / d
		i %= n
		return slices.Clone(rows[i*d : (i+1)*d])
	}
	return Stream(make([]float64, d), s.opts.Seed, i)
}

// feed teaches l observations from..to-1 and calls AfterLearn.
func (s *suite) feed(t *testing.T, l learners.Learner, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := l.Learn(s.obs(i)); err != nil {
			t.Fatalf("Learn(observation %d): %v", i, err)
		}
	}
	if s.opts.AfterLearn != nil {
		if err := s.opts.AfterLearn(l); err != nil {
			t.Fatalf("AfterLearn after observation %d: %v", to-1, err)
		}
	}
}

// warm returns a learner fed observations from..from+Warmup-1 and ready.
func (s *suite) warm(t *testing.T, from int) learners.Learner {
	t.Helper()
	l := s.new()
	s.feed(t, l, from, from+s.opts.Warmup)
	if !l.Summary(nil).Ready {
		t.Fatalf("learner not ready after %d observations", s.opts.Warmup)
	}
	return l
}

// probes are inputs to project: fresh stream rows, the origin and a far point.
func (s *suite) probes() [][]float64 {
	var p [][]float64
	for i := range 4 {
		p = append(p, s.obs(1_000_000+i))
	}
	p = append(p, make([]float64, s.opts.Dim))
	far := s.obs(2_000_000)
	for j := range far {
		far[j] *= 3
	}
	return append(p, far)
}

// Check runs the conformance suite on learners made by newLearner, each a
// fresh learner with the same configuration.
func Check(t *testing.T, newLearner func() learners.Learner, opts Options) {
	t.Helper()
	if opts.Dim < 1 || opts.Budget < 1 {
		t.Fatalf("learnertest: Options need Dim ≥ 1 and Budget ≥ 1, got %d and %d", opts.Dim, opts.Budget)
	}
	if opts.Warmup == 0 {
		opts.Warmup = 2 * opts.Budget
	}
	if opts.ModelTol == 0 {
		opts.ModelTol = 1e-8
	}
	if opts.HeapSlack == 0 {
		opts.HeapSlack = 1 << 20
	}
	if opts.Restore == nil {
		opts.Restore = learners.Restore
	}
	if len(opts.Rows)%opts.Dim != 0 {
		t.Fatalf("learnertest: len(Rows) = %d is not a multiple of Dim = %d", len(opts.Rows), opts.Dim)
	}
	s := &suite{opts: opts, new: newLearner}
	t.Run("fresh", s.fresh)
	t.Run("deterministic", s.deterministic)
	t.Run("pure", s.pure)
	t.Run("bad_input", s.badInput)
	t.Run("restore", s.restore)
	t.Run("restore_bitexact", s.restoreBitExact)
	t.Run("restore_corrupt", s.restoreCorrupt)
	t.Run("allocs", s.allocs)
	t.Run("memory", s.memory)
	t.Run("model", s.model)
	t.Run("summary", s.summary)
	t.Run("score", s.score)
}

func (s *suite) fresh(t *testing.T) {
	l := s.new()
	if l.Kind() == "" || l.Dim() != s.opts.Dim || l.Components() < 1 || l.Seen() != 0 {
		t.Fatalf("fresh learner: kind %q dim %d components %d seen %d; want a kind, dim %d, ≥ 1 component, seen 0",
			l.Kind(), l.Dim(), l.Components(), l.Seen(), s.opts.Dim)
	}
	before := l.State()
	x := s.obs(0)
	if y, err := l.Transform(nil, x); !errors.Is(err, learners.ErrNotReady) {
		t.Errorf("Transform before learning: got %v, %v; want ErrNotReady", y, err)
	}
	if y, _, err := l.Score(nil, x); !errors.Is(err, learners.ErrNotReady) {
		t.Errorf("Score before learning: got %v, %v; want ErrNotReady", y, err)
	}
	if sum := l.Summary(nil); sum.Ready || sum.Eigenvalues != nil {
		t.Errorf("Summary before learning: got ready %v eigenvalues %v; want not ready, nil", sum.Ready, sum.Eigenvalues)
	}
	if m, err := l.Model(); err == nil {
		t.Errorf("Model before learning: got %v, nil error; want an error", m)
	}
	if after := l.State(); !reflect.DeepEqual(before, after) {
		t.Errorf("calls on a fresh learner changed its state")
	}
	// One observation is counted even if the learner is not ready yet.
	if err := l.Learn(x); err != nil {
		t.Fatalf("first Learn: %v", err)
	}
	if l.Seen() != 1 {
		t.Errorf("Seen after one Learn = %d, want 1", l.Seen())
	}
}

func (s *suite) deterministic(t *testing.T) {
	a, b := s.warm(t, 0), s.warm(t, 0)
	if sa, sb := a.State(), b.State(); !reflect.DeepEqual(sa, sb) {
		t.Fatalf("two learners fed the same stream have different states:\n%s", stateDiff(sa, sb))
	}
	if got := a.Seen(); got != int64(s.opts.Warmup) {
		t.Errorf("Seen = %d, want %d", got, s.opts.Warmup)
	}
	for i, x := range s.probes() {
		ya, err := a.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		yb, _ := b.Transform(nil, x)
		if !slices.Equal(ya, yb) {
			t.Errorf("probe %d: projections %v and %v differ", i, ya, yb)
		}
	}
}

func (s *suite) pure(t *testing.T) {
	l := s.warm(t, 0)
	before := l.State()
	for i, x := range s.probes() {
		orig := slices.Clone(x)
		if _, err := l.Transform(nil, x); err != nil {
			t.Fatalf("probe %d: Transform: %v", i, err)
		}
		if _, _, err := l.Score(nil, x); err != nil {
			t.Fatalf("probe %d: Score: %v", i, err)
		}
		l.Summary(nil)
		if _, err := l.Model(); err != nil {
			t.Fatalf("Model: %v", err)
		}
		if !slices.Equal(x, orig) {
			t.Errorf("probe %d: Transform/Score modified the input: got %v, want %v", i, x, orig)
		}
	}
	if after := l.State(); !reflect.DeepEqual(before, after) {
		t.Fatalf("Transform/Score/Summary/Model changed the state:\n%s", stateDiff(before, after))
	}
	x := s.obs(s.opts.Warmup)
	orig := slices.Clone(x)
	if err := l.Learn(x); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x, orig) {
		t.Errorf("Learn modified its input: got %v, want %v", x, orig)
	}
	// The learner must not keep x: overwriting it must not change the state.
	st := l.State()
	for j := range x {
		x[j] = 1e6
	}
	if after := l.State(); !reflect.DeepEqual(st, after) {
		t.Errorf("the learner kept a reference to Learn's input:\n%s", stateDiff(st, after))
	}
}

func (s *suite) badInput(t *testing.T) {
	d := s.opts.Dim
	good := s.obs(7)
	with := func(j int, v float64) []float64 { x := slices.Clone(good); x[j] = v; return x }
	cases := []struct {
		name string
		x    []float64
		want error
	}{
		{"nil", nil, learners.ErrDimension},
		{"empty", []float64{}, learners.ErrDimension},
		{"short", good[:d-1], learners.ErrDimension},
		{"long", append(slices.Clone(good), 0), learners.ErrDimension},
		{"nan_first", with(0, math.NaN()), learners.ErrNonFinite},
		{"nan_last", with(d-1, math.NaN()), learners.ErrNonFinite},
		{"+inf", with(d-1, math.Inf(1)), learners.ErrNonFinite},
		{"-inf", with(0, math.Inf(-1)), learners.ErrNonFinite},
	}
	l := s.warm(t, 0)
	before := l.State()
	k := l.Components()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := l.Learn(c.x); !errors.Is(err, c.want) {
				t.Errorf("Learn: got %v, want %v", err, c.want)
			}
			if y, err := l.Transform(make([]float64, k), c.x); !errors.Is(err, c.want) {
				t.Errorf("Transform: got %v, %v; want %v", y, err, c.want)
			}
			if y, _, err := l.Score(make([]float64, k), c.x); !errors.Is(err, c.want) {
				t.Errorf("Score: got %v, %v; want %v", y, err, c.want)
			}
			if after := l.State(); !reflect.DeepEqual(before, after) {
				t.Fatalf("state changed:\n%s", stateDiff(before, after))
			}
		})
	}
	t.Run("dst_wrong_length", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Errorf("Transform with dst of length %d did not panic", k+1)
			}
		}()
		l.Transform(make([]float64, k+1), good)
	})
}

func (s *suite) restore(t *testing.T) {
	l := s.warm(t, 0)
	st := l.State()
	keep := l.State()
	check := func(t *testing.T, r learners.Learner) {
		t.Helper()
		if got := r.State(); !reflect.DeepEqual(got, keep) {
			t.Fatalf("State after Restore differs:\n%s", stateDiff(got, keep))
		}
		for i, x := range s.probes() {
			want, err := l.Transform(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Transform(nil, x)
			if err != nil {
				t.Fatalf("probe %d: Transform after Restore: %v", i, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("probe %d: projection after Restore %v, want %v", i, got, want)
			}
		}
	}
	t.Run("learners.Restore", func(t *testing.T) {
		r, err := s.opts.Restore(st)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind() != l.Kind() || r.Seen() != l.Seen() {
			t.Errorf("restored kind %q seen %d, want %q %d", r.Kind(), r.Seen(), l.Kind(), l.Seen())
		}
		check(t, r)
	})
	var resumed learners.Learner
	t.Run("method", func(t *testing.T) {
		r := s.new()
		if err := r.Restore(st); err != nil {
			t.Fatal(err)
		}
		check(t, r)
		resumed = r
	})
	t.Run("optional_missing", func(t *testing.T) {
		// A State from before the optional scalars existed still restores.
		if len(s.opts.Optional) == 0 {
			return
		}
		old := CloneState(keep)
		for _, name := range s.opts.Optional {
			_, sc := old.Scalars[name]
			_, mx := old.Matrices[name]
			if !sc && !mx {
				t.Errorf("optional scalar or matrix %q is not in the state", name)
			}
			delete(old.Scalars, name)
			delete(old.Matrices, name)
		}
		r := s.new()
		if err := r.Restore(old); err != nil {
			t.Fatalf("Restore without %v: %v", s.opts.Optional, err)
		}
		if r.Seen() != l.Seen() {
			t.Errorf("restored seen %d, want %d", r.Seen(), l.Seen())
		}
	})
	t.Run("deep_copy", func(t *testing.T) {
		// Scribbling on the State must not reach either learner.
		for name, m := range st.Matrices {
			for i := range m.Data {
				m.Data[i] = -123
			}
			st.Matrices[name] = m
		}
		for name := range st.Scalars {
			st.Scalars[name] = -123
		}
		for name := range st.Ints {
			st.Ints[name] = -123
		}
		if got := l.State(); !reflect.DeepEqual(got, keep) {
			t.Errorf("State shares memory with the learner:\n%s", stateDiff(got, keep))
		}
		if resumed != nil {
			if got := resumed.State(); !reflect.DeepEqual(got, keep) {
				t.Errorf("Restore kept a reference to the State:\n%s", stateDiff(got, keep))
			}
		}
	})
	t.Run("resume", func(t *testing.T) {
		if resumed == nil {
			t.Skip("method restore failed")
		}
		from := s.opts.Warmup
		s.feed(t, l, from, from+s.opts.Budget)
		s.feed(t, resumed, from, from+s.opts.Budget)
		if a, b := l.State(), resumed.State(); !reflect.DeepEqual(a, b) {
			t.Fatalf("original and restored learner diverge on the same stream:\n%s", stateDiff(a, b))
		}
	})
}

// restoreBitExact takes over from a running learner after every one of B
// observations (State → Restore into a fresh learner, as a new owner does)
// and checks that the restored learner's outputs equal the running one's
// bit for bit: Score (projection, SPE, T²) and Summary right after the
// restore, and again after both learn the same next observations. A value
// the learner derives on Restore differently from how it maintains it
// while running (an incremental update against a recomputation) shows up
// here as a last-bit difference.
func (s *suite) restoreBitExact(t *testing.T) {
	l := s.warm(t, 0)
	probes := s.probes()
	k := l.Components()
	same := func(t *testing.T, step int, what string, a, b learners.Learner, x []float64) bool {
		t.Helper()
		ya, na, ea := a.Score(make([]float64, k), x)
		yb, nb, eb := b.Score(make([]float64, k), x)
		if (ea == nil) != (eb == nil) {
			t.Errorf("step %d, %s: Score errors differ: restored %v, running %v", step, what, eb, ea)
			return false
		}
		if ea != nil {
			return true
		}
		for i := range ya {
			if math.Float64bits(ya[i]) != math.Float64bits(yb[i]) {
				t.Errorf("step %d, %s: restored projection %v, running %v", step, what, yb, ya)
				return false
			}
		}
		if math.Float64bits(na.SPE) != math.Float64bits(nb.SPE) || math.Float64bits(na.T2) != math.Float64bits(nb.T2) {
			t.Errorf("step %d, %s: restored novelty %+v, running %+v (SPE bits %x, %x)", step, what, nb, na,
				math.Float64bits(nb.SPE), math.Float64bits(na.SPE))
			return false
		}
		sa, sb := a.Summary(nil), b.Summary(nil)
		if !slices.Equal(sa.Eigenvalues, sb.Eigenvalues) || !reflect.DeepEqual(sa, sb) {
			t.Errorf("step %d, %s: restored summary %+v, running %+v", step, what, sb, sa)
			return false
		}
		return true
	}
	next := s.opts.Warmup // the next observation of the stream
	for step := range s.opts.Budget {
		r := s.new()
		if err := r.Restore(l.State()); err != nil {
			t.Fatalf("step %d: Restore: %v", step, err)
		}
		ok := true
		for i, x := range probes {
			ok = ok && same(t, step, fmt.Sprintf("probe %d after restore", i), l, r, x)
		}
		for j := range 3 {
			x := s.obs(next)
			s.feed(t, l, next, next+1)
			s.feed(t, r, next, next+1)
			next++
			ok = ok && same(t, step, fmt.Sprintf("observation %d learned after restore", j), l, r, x)
			ok = ok && same(t, step, fmt.Sprintf("probe 0 after learning %d more", j+1), l, r, probes[0])
		}
		if !ok {
			return
		}
	}
}

// corruption is a named change that must make a State unrestorable.
type corruption struct {
	name string
	f    func(*learners.State) *learners.State
}

func corruptions(st *learners.State, optional []string) []corruption {
	cs := []corruption{
		{"nil", func(*learners.State) *learners.State { return nil }},
		{"version", func(s *learners.State) *learners.State { s.Version++; return s }},
		{"kind", func(s *learners.State) *learners.State { s.Kind = "no-such-kind"; return s }},
		{"seen_negative", func(s *learners.State) *learners.State { s.Seen = -1; return s }},
		{"config_dim", func(s *learners.State) *learners.State { s.Config.Dim++; return s }},
	}
	for _, name := range slices.Sorted(maps.Keys(st.Matrices)) {
		m := st.Matrices[name]
		set := func(what string, f func(m *learners.Matrix)) {
			cs = append(cs, corruption{"matrix/" + name + "/" + what, func(s *learners.State) *learners.State {
				mm := s.Matrices[name]
				f(&mm)
				s.Matrices[name] = mm
				return s
			}})
		}
		if !slices.Contains(optional, name) {
			cs = append(cs, corruption{"matrix/" + name + "/missing", func(s *learners.State) *learners.State {
				delete(s.Matrices, name)
				return s
			}})
		}
		set("rows+1", func(m *learners.Matrix) { m.Rows++ })
		set("cols+1", func(m *learners.Matrix) { m.Cols++ })
		set("data+1", func(m *learners.Matrix) { m.Data = append(m.Data, 0) })
		if len(m.Data) > 0 {
			mid := len(m.Data) / 2
			set("nan", func(m *learners.Matrix) { m.Data[mid] = math.NaN() })
			set("+inf", func(m *learners.Matrix) { m.Data[mid] = math.Inf(1) })
			set("-inf", func(m *learners.Matrix) { m.Data[0] = math.Inf(-1) })
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.Scalars)) {
		if !slices.Contains(optional, name) {
			cs = append(cs, corruption{"scalar/" + name + "/missing", func(s *learners.State) *learners.State { delete(s.Scalars, name); return s }})
		}
		cs = append(cs,
			corruption{"scalar/" + name + "/nan", func(s *learners.State) *learners.State { s.Scalars[name] = math.NaN(); return s }},
			corruption{"scalar/" + name + "/inf", func(s *learners.State) *learners.State { s.Scalars[name] = math.Inf(1); return s }},
		)
	}
	for _, name := range slices.Sorted(maps.Keys(st.Ints)) {
		cs = append(cs, corruption{"int/" + name + "/missing", func(s *learners.State) *learners.State { delete(s.Ints, name); return s }})
	}
	return cs
}

func (s *suite) restoreCorrupt(t *testing.T) {
	src := s.warm(t, 0).State()
	// The target learner has learned other observations, so a partial
	// restore would show.
	target := s.warm(t, 3*s.opts.Warmup)
	before := target.State()
	for _, c := range corruptions(src, s.opts.Optional) {
		t.Run(c.name, func(t *testing.T) {
			bad := c.f(CloneState(src))
			if err := target.Restore(bad); !errors.Is(err, learners.ErrState) {
				t.Errorf("Restore: got %v, want ErrState", err)
			}
			if after := target.State(); !reflect.DeepEqual(before, after) {
				t.Fatalf("failed Restore changed the learner:\n%s", stateDiff(before, after))
			}
			bad = c.f(CloneState(src))
			if r, err := s.opts.Restore(bad); !errors.Is(err, learners.ErrState) || r != nil {
				t.Errorf("Options.Restore: got %v, %v; want nil, ErrState", r, err)
			}
		})
	}
}

func (s *suite) allocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts under -short are skipped")
	}
	l := s.warm(t, 0)
	const runs = 64
	rows := make([][]float64, runs+1)
	for i := range rows {
		rows[i] = s.obs(s.opts.Warmup + i)
	}
	i := 0
	if a := testing.AllocsPerRun(runs, func() {
		if err := l.Learn(rows[i%len(rows)]); err != nil {
			panic(err)
		}
		i++
	}); a != 0 {
		t.Errorf("Learn: %v allocations per call, want 0", a)
	}
	x := rows[0]
	dst := make([]float64, l.Components())
	if a := testing.AllocsPerRun(runs, func() {
		if _, err := l.Transform(dst, x); err != nil {
			panic(err)
		}
	}); a != 0 {
		t.Errorf("Transform: %v allocations per call, want 0", a)
	}
	if a := testing.AllocsPerRun(runs, func() {
		if _, _, err := l.Score(dst, x); err != nil {
			panic(err)
		}
	}); a != 0 {
		t.Errorf("Score: %v allocations per call, want 0", a)
	}
}

// StateSize is the number of values a State holds: matrix elements plus
// scalars and counters.
func StateSize(s *learners.State) int {
	n := len(s.Ints) + len(s.Scalars)
	for _, m := range s.Matrices {
		n += len(m.Data)
	}
	return n
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func (s *suite) memory(t *testing.T) {
	b := s.opts.Budget
	l := s.new()
	s.feed(t, l, 0, b)
	size1 := StateSize(l.State())
	stored := l.Summary(nil).Stored
	heap1 := heapAlloc()
	s.feed(t, l, b, 10*b)
	size2 := StateSize(l.State())
	heap2 := heapAlloc()
	t.Logf("state values after %d observations: %d (stored %d), after %d: %d; heap %d → %d bytes", b, size1, stored, 10*b, size2, heap1, heap2)
	// A learner that is full after B observations must not grow at all;
	// one that has stored fewer than B points may grow up to its budget.
	limit := size1
	if stored > 0 && stored < b {
		limit = size1*b/stored + 1024
	}
	if size2 > limit {
		t.Errorf("state grew from %d values after %d observations to %d after %d (limit %d)", size1, b, size2, 10*b, limit)
	}
	if heap2 > heap1+s.opts.HeapSlack+uint64(8*size2) {
		t.Errorf("heap grew from %d to %d bytes between %d and %d observations", heap1, heap2, b, 10*b)
	}
	runtime.KeepAlive(l)
}

func (s *suite) model(t *testing.T) {
	l := s.warm(t, 0)
	m, err := l.Model()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Model does not validate: %v", err)
	}
	_, d, k := m.Dims()
	if d != l.Dim() || k != l.Components() || m.Learner != l.Kind() || m.Seen != l.Seen() {
		t.Errorf("model dims d=%d k=%d learner %q seen %d, want %d %d %q %d", d, k, m.Learner, m.Seen, l.Dim(), l.Components(), l.Kind(), l.Seen())
	}
	sum := l.Summary(nil)
	for i, v := range m.Eigenvalues {
		if i < len(sum.Eigenvalues) && math.Abs(v-sum.Eigenvalues[i]) > 1e-12*(math.Abs(v)+1e-300) {
			t.Errorf("model eigenvalue %d = %v, Summary says %v", i, v, sum.Eigenvalues[i])
		}
	}
	for i, x := range s.probes() {
		want, err := l.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		got := m.Transform(nil, x)
		scale := 1.0
		for _, v := range want {
			scale = math.Max(scale, math.Abs(v))
		}
		for j := range want {
			if math.Abs(got[j]-want[j]) > s.opts.ModelTol*scale {
				t.Errorf("probe %d component %d: model gives %.15g, learner %.15g", i, j, got[j], want[j])
			}
		}
	}
}

func (s *suite) summary(t *testing.T) {
	l := s.warm(t, 0)
	k := l.Components()
	buf := make([]float64, k)
	sum := l.Summary(buf)
	if !sum.Ready {
		t.Fatal("Summary.Ready is false on a ready learner")
	}
	if len(sum.Eigenvalues) != k || &sum.Eigenvalues[0] != &buf[0] {
		t.Errorf("Summary did not write its %d eigenvalues into dst (got %d values)", k, len(sum.Eigenvalues))
	}
	for i, v := range sum.Eigenvalues {
		if !(v >= 0) || math.IsInf(v, 0) {
			t.Errorf("eigenvalue %d = %v, want finite and ≥ 0", i, v)
		}
		if i > 0 && v > sum.Eigenvalues[i-1] {
			t.Errorf("eigenvalues not descending: %v", sum.Eigenvalues)
		}
	}
	if ev := sum.ExplainedVariance; !(ev >= 0 && ev <= 1) {
		t.Errorf("explained variance %v, want in [0, 1]", ev)
	}
	if sum.Stored < 1 || sum.Stored > s.opts.Budget {
		t.Errorf("stored %d, want in [1, %d]", sum.Stored, s.opts.Budget)
	}
	if got := l.Summary(nil); !slices.Equal(got.Eigenvalues, sum.Eigenvalues) || got.BasisVersion != sum.BasisVersion {
		t.Errorf("Summary(nil) = %+v differs from Summary(dst) = %+v", got, sum)
	}
}

func (s *suite) score(t *testing.T) {
	l := s.warm(t, 0)
	for i, x := range s.probes() {
		y, err := l.Transform(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		ys, nov, err := l.Score(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		for j := range y {
			if math.Abs(ys[j]-y[j]) > 1e-12*(1+math.Abs(y[j])) {
				t.Errorf("probe %d: Score projection %v, Transform %v", i, ys, y)
				break
			}
		}
		if math.IsNaN(nov.SPE) || math.IsInf(nov.SPE, 0) || nov.SPE < -1e-9 {
			t.Errorf("probe %d: SPE %v, want finite and ≥ 0", i, nov.SPE)
		}
		if math.IsNaN(nov.T2) || math.IsInf(nov.T2, 0) || nov.T2 < 0 {
			t.Errorf("probe %d: T² %v, want finite and ≥ 0", i, nov.T2)
		}
	}
}

// CloneState returns a deep copy of s (nil for nil).
func CloneState(s *learners.State) *learners.State {
	if s == nil {
		return nil
	}
	c := *s
	c.Ints = maps.Clone(s.Ints)
	c.Scalars = maps.Clone(s.Scalars)
	c.Matrices = make(map[string]learners.Matrix, len(s.Matrices))
	for k, m := range s.Matrices {
		m.Data = slices.Clone(m.Data)
		c.Matrices[k] = m
	}
	return &c
}

// stateDiff describes how two States differ, for failure messages.
func stateDiff(a, b *learners.State) string {
	if a == nil || b == nil {
		return fmt.Sprintf("got %v, want %v", a, b)
	}
	var out string
	add := func(format string, args ...any) {
		if len(out) < 2000 {
			out += fmt.Sprintf(format, args...) + "\n"
		}
	}
	if a.Version != b.Version || a.Kind != b.Kind || a.Seen != b.Seen || a.Config != b.Config {
		add("header: %d %q seen %d %+v vs %d %q seen %d %+v", a.Version, a.Kind, a.Seen, a.Config, b.Version, b.Kind, b.Seen, b.Config)
	}
	ints := maps.Clone(a.Ints)
	maps.Copy(ints, b.Ints)
	for _, k := range slices.Sorted(maps.Keys(ints)) {
		va, oka := a.Ints[k]
		vb, okb := b.Ints[k]
		if va != vb || oka != okb {
			add("int %q: %d vs %d (present %v, %v)", k, va, vb, oka, okb)
		}
	}
	for k, va := range a.Scalars {
		if vb, ok := b.Scalars[k]; !ok || !(va == vb || math.IsNaN(va) && math.IsNaN(vb)) {
			add("scalar %q: %v vs %v (present %v)", k, va, vb, ok)
		}
	}
	for k := range b.Scalars {
		if _, ok := a.Scalars[k]; !ok {
			add("scalar %q only in the second", k)
		}
	}
	for k, ma := range a.Matrices {
		mb, ok := b.Matrices[k]
		switch {
		case !ok:
			add("matrix %q only in the first", k)
		case ma.Rows != mb.Rows || ma.Cols != mb.Cols || len(ma.Data) != len(mb.Data):
			add("matrix %q: %d×%d (%d values) vs %d×%d (%d values)", k, ma.Rows, ma.Cols, len(ma.Data), mb.Rows, mb.Cols, len(mb.Data))
		case (ma.Data == nil) != (mb.Data == nil):
			add("matrix %q: nil vs empty data", k)
		default:
			for i := range ma.Data {
				if ma.Data[i] != mb.Data[i] {
					add("matrix %q element %d: %v vs %v", k, i, ma.Data[i], mb.Data[i])
					break
				}
			}
		}
	}
	for k := range b.Matrices {
		if _, ok := a.Matrices[k]; !ok {
			add("matrix %q only in the second", k)
		}
	}
	if out == "" {
		out = "(no field-level difference found; maps may differ in nil versus empty)"
	}
	return out
}
