package monitor

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	good := Config{Dim: 3}.WithDefaults(100)
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if good.Level != 0.99 || good.Learn != LearnAlways || good.Warmup != 200 || good.Window != 1000 || good.Forget != 1 ||
		good.Trend != TrendEWMA || math.Abs(good.TrendLambda-2.0/101) > 1e-15 {
		t.Fatalf("defaults: got %+v", good)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"level-1", func(c *Config) { c.Level = 1 }, "level"},
		{"level-negative", func(c *Config) { c.Level = -0.5 }, "level"},
		{"level-nan", func(c *Config) { c.Level = math.NaN() }, "level"},
		{"learn", func(c *Config) { c.Learn = "sometimes" }, "learn"},
		{"warmup", func(c *Config) { c.Warmup = 1 }, "warmup"},
		{"window", func(c *Config) { c.Window = 1 }, "window"},
		{"window-huge", func(c *Config) { c.Window = MaxWindow + 1 }, "window"},
		{"accept", func(c *Config) { c.AcceptAfter = -1 }, "accept_after"},
		{"forget", func(c *Config) { c.Forget = 1.5 }, "forget"},
		{"dim", func(c *Config) { c.Standardize, c.Dim = true, 0 }, "dim"},
		{"freeze", func(c *Config) { c.Freeze = true }, "freeze"},
		{"trend", func(c *Config) { c.Trend = "cusum" }, "trend"},
		{"trend-lambda", func(c *Config) { c.TrendLambda = 1.5 }, "trend_lambda"},
		{"trend-lambda-nan", func(c *Config) { c.TrendLambda = math.NaN() }, "trend_lambda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !containsField(err, tc.field) {
				t.Fatalf("got %v, want ErrConfig naming %s", err, tc.field)
			}
			if _, err := New(c); !errors.Is(err, ErrConfig) {
				t.Fatalf("New: got %v, want ErrConfig", err)
			}
		})
	}
}

func containsField(err error, f string) bool {
	return err != nil && len(err.Error()) > 0 && contains(err.Error(), f+":")
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestAlarmString(t *testing.T) {
	for a, s := range map[Alarm]string{AlarmNone: "", AlarmSPE: "spe", AlarmT2: "t2", AlarmBoth: "both"} {
		if a.String() != s {
			t.Errorf("%d: got %q, want %q", a, a.String(), s)
		}
		if b, err := ParseAlarm(s); err != nil || b != a {
			t.Errorf("ParseAlarm(%q): got %v, %v, want %d", s, b, err, a)
		}
	}
	if _, err := ParseAlarm("loud"); err == nil {
		t.Error("ParseAlarm(loud): no error")
	}
}

func TestWindowQuantile(t *testing.T) {
	w := newWindow(5)
	for _, v := range []float64{5, 1, 4, 2, 3} {
		w.add(v)
	}
	// n = 5: rank (n+1)·0.5 − 1 = 2 → the median 3.
	if got := w.quantile(0.5); got != 3 {
		t.Errorf("median: got %v, want 3", got)
	}
	w.add(10) // drops the oldest (5)
	if got, want := w.values(), []float64{1, 4, 2, 3, 10}; !reflect.DeepEqual(got, want) {
		t.Errorf("values: got %v, want %v", got, want)
	}
	if got, want := w.sorted, []float64{1, 2, 3, 4, 10}; !reflect.DeepEqual(got, want) {
		t.Errorf("sorted: got %v, want %v", got, want)
	}
	if got := w.quantile(0.99); got != 10 {
		t.Errorf("q99 of 5: got %v, want the largest, 10", got)
	}
	// rank 6·0.25 − 1 = 0.5: halfway between 1 and 2.
	if got := w.quantile(0.25); got != 1.5 {
		t.Errorf("q25: got %v, want 1.5", got)
	}
	// The newest ⌈5/2⌉ = 3 values are 2, 3, 10.
	if got, want := w.recent, []float64{2, 3, 10}; !reflect.DeepEqual(got, want) {
		t.Errorf("recent: got %v, want %v", got, want)
	}
}

// TestWindowLimit checks the limit rule: the larger of the whole window's
// quantile and its newest half's, so that a statistic that moved up
// within half a window raises the limit at once and one that moved down
// keeps the whole window's; the recent half is rebuilt by load.
func TestWindowLimit(t *testing.T) {
	w := newWindow(8)
	for _, v := range []float64{1, 2, 3, 4} {
		w.add(v)
	}
	// Four values: the newest half is all of them, one quantile.
	if got, q := w.limit(0.5), w.quantile(0.5); got != q || q != 2.5 {
		t.Errorf("four values: limit %v, quantile %v, want both 2.5", got, q)
	}
	for _, v := range []float64{10, 11, 12, 13} { // moved up
		w.add(v)
	}
	// Whole: 1 2 3 4 10 11 12 13, median rank 3.5 → 7; newest half 10–13 → 11.5.
	if got := w.limit(0.5); got != 11.5 || w.quantile(0.5) != 7 {
		t.Errorf("moved up: limit %v (quantile %v), want the newest half's 11.5 (whole 7)", got, w.quantile(0.5))
	}
	for _, v := range []float64{0, 0, 0, 0} { // moved down
		w.add(v)
	}
	// Whole: 10–13 and four 0s → 5; newest half the 0s → 0.
	if got := w.limit(0.5); got != 5 {
		t.Errorf("moved down: limit %v, want the whole window's 5", got)
	}
	r := newWindow(8)
	r.load(w.values())
	if !reflect.DeepEqual(r.recent, w.recent) || r.limit(0.5) != w.limit(0.5) {
		t.Errorf("load: recent %v, want %v", r.recent, w.recent)
	}
}

// TestWindowRank checks the rank of a value among a window's: the share
// below it, ties counted half.
func TestWindowRank(t *testing.T) {
	w := newWindow(4)
	if got := w.rank(1); got != 0.5 {
		t.Errorf("empty window: got %v, want 0.5", got)
	}
	for _, v := range []float64{3, 1, 2, 2} {
		w.add(v)
	}
	for v, want := range map[float64]float64{0: 0, 1: 0.125, 1.5: 0.25, 2: 0.5, 2.5: 0.75, 3: 0.875, 9: 1} {
		if got := w.rank(v); got != want {
			t.Errorf("rank(%v): got %v, want %v", v, got, want)
		}
	}
}

// TestTrendLimit checks the trend gate's limit against its closed form
// for independent ranks: at level 0.99 the default λ is 2/101, so
// λ/(2 − λ) = 0.01 and the limit is 2.3263·0.1/√12 = 0.0671559; a measured
// spread larger than the independent one raises it.
func TestTrendLimit(t *testing.T) {
	m := newMonitor(t, Config{Learn: LearnNormal, Dim: 1}, 50)
	lim, on := m.TrendLimit()
	if want := 2.3263478740408408 * 0.1 / math.Sqrt(12); !on || math.Abs(lim-want) > 1e-12 || math.Abs(lim-0.0671559) > 1e-6 {
		t.Errorf("limit %v (on %v), want %v", lim, on, want)
	}
	if got := DefaultTrendLambda(0.99, 50); math.Abs(got-2.0/51) > 1e-15 {
		t.Errorf("λ at level 0.99 with a window of 50: got %v, want 2/51 (span capped at the window)", got)
	}
	m.st.TrendSD = 0.2
	if lim, _ := m.TrendLimit(); math.Abs(lim-2.3263478740408408*0.2) > 1e-12 {
		t.Errorf("with a measured spread of 0.2: limit %v, want %v", lim, 2.3263478740408408*0.2)
	}
	for _, c := range []Config{{Learn: LearnNormal, Dim: 1, Trend: TrendOff}, {Learn: LearnAlways, Dim: 1}} {
		if _, on := newMonitor(t, c, 50).TrendLimit(); on {
			t.Errorf("%+v: trend gate on", c)
		}
	}
}

// TestStandardize checks the running standardisation against the batch
// mean and population standard deviation, with and without forgetting,
// and that a constant variable is only centred.
func TestStandardize(t *testing.T) {
	for _, f := range []float64{1, 0.9} {
		m := newMonitor(t, Config{Standardize: true, Dim: 3, Forget: f, Warmup: 1000}, 0)
		rng := rand.New(rand.NewPCG(3, 3))
		var xs [][]float64
		for range 50 {
			x := []float64{1e4 * rng.NormFloat64(), 5 + 1e-3*rng.NormFloat64(), 7}
			xs = append(xs, x)
			m.Observe(x)
		}
		// Batch weighted moments with weight f^age.
		var w float64
		mean := make([]float64, 3)
		for i, x := range xs {
			wi := math.Pow(f, float64(len(xs)-1-i))
			w += wi
			for j := range 3 {
				mean[j] += wi * x[j]
			}
		}
		for j := range mean {
			mean[j] /= w
		}
		sd := make([]float64, 3)
		for i, x := range xs {
			wi := math.Pow(f, float64(len(xs)-1-i))
			for j := range 3 {
				sd[j] += wi * (x[j] - mean[j]) * (x[j] - mean[j])
			}
		}
		for j := range sd {
			sd[j] = math.Sqrt(sd[j] / w)
		}
		x := []float64{100, 5.5, 8}
		got := m.Input(nil, x)
		want := []float64{(100 - mean[0]) / sd[0], (5.5 - mean[1]) / sd[1], 1}
		for j := range got {
			if math.Abs(got[j]-want[j]) > 1e-9*math.Max(1, math.Abs(want[j])) {
				t.Errorf("f=%v: variable %d: got %v, want %v", f, j, got[j], want[j])
			}
		}
		gm, gs := m.Standardization()
		if math.Abs(gm[0]-mean[0]) > 1e-9*math.Abs(mean[0])+1e-9 || gs[2] != 1 || math.Abs(gs[1]-sd[1]) > 1e-12 {
			t.Errorf("f=%v: Standardization: got %v %v, want means %v, scales %v with 1 for the constant", f, gm, gs, mean, sd)
		}
		if in := []float64{1, 2, 3}; &m.Input(nil, in)[0] == &in[0] {
			t.Error("Input returned its argument with Standardize")
		}
	}
	m := newMonitor(t, Config{Dim: 3}, 0)
	if in := []float64{1, 2, 3}; &m.Input(nil, in)[0] != &in[0] {
		t.Error("Input copied without Standardize")
	}
}

// TestFreeze checks that frozen statistics stop moving after the warm-up.
func TestFreeze(t *testing.T) {
	const warm = 20
	l := newLearner(t, 3, 2, 50, 1)
	m := newMonitor(t, Config{Standardize: true, Freeze: true, Dim: 3, Warmup: warm}, 50)
	rng := rand.New(rand.NewPCG(5, 5))
	x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
	var at []float64
	for i := range 60 {
		process(rng, x)
		if _, err := m.Step(l, nil, in, z, x); err != nil {
			t.Fatal(err)
		}
		if i == warm-1 {
			at, _ = m.Standardization()
		}
	}
	now, _ := m.Standardization()
	if !reflect.DeepEqual(at, now) {
		t.Errorf("frozen means moved: %v after the warm-up, %v later", at, now)
	}
}

// run feeds n samples of the process (a fault from sample onset on, adding
// shift to x₂) and returns the monitor, the learner's seen count and the
// number of SPE alarms after the onset.
func runFault(t *testing.T, learn string, accept int, n, onset int, shift float64) (m *Monitor, learned int, alarms int) {
	l := newLearner(t, 3, 2, 100, 1)
	m = newMonitor(t, Config{Learn: learn, AcceptAfter: accept, Dim: 3, Standardize: true}, 100)
	rng := rand.New(rand.NewPCG(9, 9))
	x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
	for i := range n {
		process(rng, x)
		if i >= onset {
			x[1] += shift
		}
		r, err := m.Step(l, nil, in, z, x)
		if err != nil {
			t.Fatal(err)
		}
		if i >= onset {
			if r.Learned {
				learned++
			}
			if r.Verdict.Alarm&AlarmSPE != 0 {
				alarms++
			}
		}
	}
	return m, learned, alarms
}

// TestGatedLearning checks that LearnNormal does not learn a step fault
// and keeps alarming, that LearnAlways absorbs it, and that AcceptAfter
// accepts it as a new regime.
func TestGatedLearning(t *testing.T) {
	const n, onset, shift = 1500, 500, -2.0
	_, learnedAlways, alarmsAlways := runFault(t, LearnAlways, 0, n, onset, shift)
	_, learnedNormal, alarmsNormal := runFault(t, LearnNormal, 0, n, onset, shift)
	_, learnedAccept, alarmsAccept := runFault(t, LearnNormal, 50, n, onset, shift)
	faulty := n - onset
	t.Logf("step x₂ %v over %d samples: always: %d learned, %d SPE alarms; normal: %d learned, %d alarms; normal, accept after 50: %d learned, %d alarms",
		shift, faulty, learnedAlways, alarmsAlways, learnedNormal, alarmsNormal, learnedAccept, alarmsAccept)
	if learnedAlways != faulty {
		t.Errorf("always learned %d of %d faulty samples", learnedAlways, faulty)
	}
	if learnedNormal > faulty/10 {
		t.Errorf("normal learned %d of %d faulty samples, want ≤ 10 %%", learnedNormal, faulty)
	}
	if alarmsNormal <= alarmsAlways || alarmsNormal < faulty/2 {
		t.Errorf("normal raised %d SPE alarms, always %d: want more than always and ≥ half of %d", alarmsNormal, alarmsAlways, faulty)
	}
	if learnedAccept < faulty/2 || alarmsAccept >= alarmsNormal {
		t.Errorf("accept after 50: %d learned, %d alarms; want ≥ half learned and fewer alarms than %d", learnedAccept, alarmsAccept, alarmsNormal)
	}
}

// TestStateRoundTrip checks that a restored monitor continues bit-exactly.
func TestStateRoundTrip(t *testing.T) {
	t.Run("kernel", func(t *testing.T) {
		stateRoundTrip(t, Config{Learn: LearnNormal, Standardize: true, Dim: 3, AcceptAfter: 30})
	})
	t.Run("linear", func(t *testing.T) {
		stateRoundTrip(t, Config{Learn: LearnNormal, Standardize: true, Dim: 3, AcceptAfter: 30, Linear: true, LinearComponents: 1})
	})
}

// stateRoundTrip feeds a monitor with c, restores its state into a new
// one and checks that both go on identically (results, alarms,
// contributions and state).
func stateRoundTrip(t *testing.T, c Config) {
	cfg := c.WithDefaults(50)
	l := newLearner(t, 3, 2, 50, 1)
	m, _ := New(cfg)
	src := rand.NewPCG(11, 11)
	rng := rand.New(src)
	x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
	feed := func(m *Monitor, l interface {
		Scorer
	}, rng *rand.Rand, n int) []Result {
		var rs []Result
		for i := range n {
			process(rng, x)
			if i%50 == 0 { // a rare spike: alarms to compare
				x[0] += 2
			}
			r, err := m.Step(l, nil, in, z, x)
			if err != nil {
				t.Fatal(err)
			}
			r.Z = append([]float64(nil), r.Z...)
			rs = append(rs, r)
		}
		return rs
	}
	feed(m, l, rng, 1500)
	st := m.State()
	if st.Trend == 0 || st.TrendSD == 0 {
		t.Fatalf("trend statistic %v, spread %v: want both measured (the trend gate is on by default)", st.Trend, st.TrendSD)
	}
	if c.Linear && (st.Linear == nil || len(st.Linear.P) == 0 || len(st.LSPE) == 0) {
		t.Fatalf("linear residual's state %+v, window of %d: want a model and limit values", st.Linear, len(st.LSPE))
	}
	m2, _ := New(cfg)
	if err := m2.Restore(st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m2.State(), st) {
		t.Fatal("State after Restore differs")
	}
	l2 := newLearner(t, 3, 2, 50, 1)
	if err := l2.Restore(l.State()); err != nil {
		t.Fatal(err)
	}
	src2 := *src
	a := feed(m, l, rng, 300)
	b := feed(m2, l2, rand.New(&src2), 300)
	alarms := 0
	for i := range a {
		if len(a[i].Contrib) > 0 {
			alarms++
		}
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("restored monitor diverged at step %d: got %+v, want %+v", i, b[i], a[i])
		}
	}
	if !reflect.DeepEqual(m.State(), m2.State()) {
		t.Fatal("restored monitor's state diverged")
	}
	if alarms == 0 {
		t.Error("no alarm with contributions in 300 observations: the comparison did not cover them")
	}
}

func TestRestoreBad(t *testing.T) {
	cfg := Config{Standardize: true, Dim: 2}.WithDefaults(10)
	m, _ := New(cfg)
	good := m.State()
	for _, tc := range []struct {
		name string
		edit func(*State)
	}{
		{"negative-learned", func(s *State) { s.Learned = -1 }},
		{"window-mismatch", func(s *State) { s.SPE = []float64{1} }},
		{"window-nan", func(s *State) { s.SPE, s.T2 = []float64{math.NaN()}, []float64{1} }},
		{"window-long", func(s *State) { s.SPE, s.T2 = make([]float64, cfg.Window+1), make([]float64, cfg.Window+1) }},
		{"tokens", func(s *State) { s.Tokens = 1e9 }},
		{"trend", func(s *State) { s.Trend = 0.7 }},
		{"trend-nan", func(s *State) { s.Trend = math.NaN() }},
		{"trend-sd", func(s *State) { s.TrendSD = -1 }},
		{"dims", func(s *State) { s.InMean = []float64{1} }},
		{"inf-mean", func(s *State) { s.InMean = []float64{math.Inf(1), 0} }},
		{"negative-m2", func(s *State) { s.InM2 = []float64{-1, 0} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *good
			s.InMean = append([]float64(nil), good.InMean...)
			s.InM2 = append([]float64(nil), good.InM2...)
			tc.edit(&s)
			if err := m.Restore(&s); !errors.Is(err, ErrState) {
				t.Fatalf("got %v, want ErrState", err)
			}
			if !reflect.DeepEqual(m.State(), good) {
				t.Fatal("failed Restore changed the monitor")
			}
		})
	}
	if err := m.Restore(nil); !errors.Is(err, ErrState) {
		t.Fatalf("nil: got %v", err)
	}
}

// failing is a learner whose Learn fails, to check that Step undoes the
// standardisation update.
type failing struct{ Scorer }

func (failing) Learn([]float64) error { return errors.New("boom") }

func TestStepLearnErrorUndoes(t *testing.T) {
	l := newLearner(t, 3, 2, 50, 1)
	m := newMonitor(t, Config{Standardize: true, Dim: 3, Warmup: 2}, 50)
	x, in, z := []float64{1, 2, 3}, make([]float64, 3), make([]float64, 2)
	if _, err := m.Step(l, nil, in, z, x); err != nil {
		t.Fatal(err)
	}
	before := m.State()
	if _, err := m.Step(failing{l}, nil, in, z, []float64{4, 5, 6}); err == nil {
		t.Fatal("no error")
	}
	if !reflect.DeepEqual(m.State(), before) {
		t.Fatalf("state changed by a failed learn: %+v, want %+v", m.State(), before)
	}
}

// TestLinearIndex checks the linear residual's statistic against its
// closed form: with P the first axis of three, r = (0, x₂, x₃) − μ's and
// c̃ = (0, 1, 1), the index is max(r₂², r₃²) and the SPE r₂² + r₃²; with
// two residual dimensions of equal share it is the larger one, and a
// fault along one variable moves only that variable's term.
func TestLinearIndex(t *testing.T) {
	l := newLinear(3, 1, 1)
	l.p = []float64{1, 0, 0}
	l.shares()
	if want := []float64{0, 1, 1}; !reflect.DeepEqual(l.c, want) {
		t.Fatalf("shares %v, want %v", l.c, want)
	}
	x := []float64{5, 0.3, -0.4}
	if got := l.index(x); math.Abs(got-0.16) > 1e-15 {
		t.Errorf("index %v, want max(0.09, 0.16) = 0.16", got)
	}
	if got := l.spe(x); math.Abs(got-0.25) > 1e-15 {
		t.Errorf("spe %v, want 0.25", got)
	}
	// A tilted subspace: P = (1, 1, 0)/√2, so c̃ = (½, ½, 1); the residual
	// of x = (1, 0, 0) is (½, −½, 0), each variable's term (¼)/(½) = ½ —
	// the fault along ξ₁ explains all of the SPE (½) once reconstructed.
	l.p = []float64{math.Sqrt(0.5), math.Sqrt(0.5), 0}
	l.shares()
	if got := l.index([]float64{1, 0, 0}); math.Abs(got-0.5) > 1e-15 {
		t.Errorf("tilted index %v, want 0.5", got)
	}
	if got := l.spe([]float64{1, 0, 0}); math.Abs(got-0.5) > 1e-15 {
		t.Errorf("tilted spe %v, want 0.5", got)
	}
}
