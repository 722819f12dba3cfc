package monitor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLinearEWMATrack: the per-variable EWMA's arithmetic on a residual
// set by hand — silent before minTrack normal observations, the
// spreads the means of g² and e² while below the gate, its statistic
// e²/max(λ/(2 − λ)·v, s), and the spreads frozen once above the gate.
func TestLinearEWMATrack(t *testing.T) {
	const lambda, window = 0.1, 1000
	l := newLinear(3, 1, 1)
	l.p = []float64{1, 0, 0}
	l.shares() // c̃ = (0, 1, 1): variable 0 has no residual of its own
	x := []float64{0, 0, 0}
	var wantE, wantV, wantS float64
	for i := range minTrack {
		x[1] = 0.5 * float64(1-2*(i%2)) // ±0.5
		l.index(x)
		if st := l.track(lambda, true, window); st != 0 {
			t.Fatalf("observation %d: statistic %v before %d normal observations, want 0", i, st, minTrack)
		}
		wantE = (1-lambda)*wantE + lambda*x[1]
		n := float64(i + 1)
		wantV += (x[1]*x[1] - wantV) / n
		wantS += (wantE*wantE - wantS) / n
	}
	if !l.judges() || math.Abs(l.e[1]-wantE) > 1e-15 || math.Abs(l.v[1]-wantV) > 1e-15 || math.Abs(l.s[1]-wantS) > 1e-15 || l.e[0] != 0 || l.v[0] != 0 {
		t.Fatalf("after %d: e %v v %v s %v (n %v), want e₁ %v v₁ %v s₁ %v and nothing for variable 0", minTrack, l.e, l.v, l.s, l.n, wantE, wantV, wantS)
	}
	// A step of variable 1: its EWMA climbs, its statistic is e²/σ² and
	// the spreads stop once it is above the gate.
	var st float64
	for range 200 {
		x[1] = 3
		l.index(x)
		st = l.track(lambda, true, window)
		if st > ewmaGate*ewmaGate {
			break
		}
	}
	sd := max(lambda/(2-lambda)*l.v[1], l.s[1])
	if st <= ewmaGate*ewmaGate || math.Abs(st-l.e[1]*l.e[1]/sd) > 1e-12*st || l.ratio(2, lambda) != 0 {
		t.Fatalf("after the step: statistic %v (e₁ %v, σ² %v), variable 2's %v; want above the gate %v, e₁²/σ², 0", st, l.e[1], sd, l.ratio(2, lambda), ewmaGate*ewmaGate)
	}
	n, v, s := l.n, l.v[1], l.s[1]
	for range 20 {
		l.index(x)
		l.track(lambda, true, window)
	}
	if l.n != n || l.v[1] != v || l.s[1] != s {
		t.Errorf("above the gate the spreads moved: n %v → %v, v %v → %v, s %v → %v", n, l.n, v, l.v[1], s, l.s[1])
	}
	l.resetEWMA()
	if l.n != 0 || l.e[1] != 0 || l.v[1] != 0 || l.s[1] != 0 || l.out {
		t.Errorf("after reset: %+v", l)
	}
}

// TestLinearEWMADrift: a slow drift of one variable of a linear
// five-variable process (0.005 noise standard deviations per row, far
// below the per-row limit for hundreds of rows) is alarmed by the linear
// residual's EWMA, which names it first, and the linear model does not
// learn it; on the normal rows before, its alarms are rare.
func TestLinearEWMADrift(t *testing.T) {
	const d, normal, drift, faulty = 5, 1500, 3, 600
	m, err := New(Config{Learn: LearnNormal, Standardize: true, Freeze: true, Dim: d, Linear: true, LinearComponents: 2}.WithDefaults(100))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	a := [d][2]float64{{1, 0}, {0.5, 1}, {-1, 0.5}, {0.3, -0.7}, {0.8, 0.8}}
	row := func(shift float64) []float64 {
		u, v := rng.NormFloat64(), rng.NormFloat64()
		x := make([]float64, d)
		for j := range x {
			x[j] = a[j][0]*u + a[j][1]*v + 0.1*rng.NormFloat64()
		}
		x[drift] += shift
		return x
	}
	s := fixed{rand.New(rand.NewPCG(5, 5))}
	in, z := make([]float64, d), make([]float64, 2)
	ewmaAlarms, judged := 0, 0
	for i := range normal {
		r, err := m.Step(s, nil, in, z, row(0))
		if err != nil {
			t.Fatal(err)
		}
		if i >= 400 && r.Verdict.InForce {
			judged++
			if r.Verdict.LEWMA > r.Verdict.LEWMALimit {
				ewmaAlarms++
			}
		}
	}
	if judged == 0 || float64(ewmaAlarms) > 0.01*float64(judged) {
		t.Errorf("normal rows: %d of %d with the EWMA above its limit, want ≤ 1 %%", ewmaAlarms, judged)
	}
	w0 := m.lin.w
	alarmed, first := 0, 0
	var wAtAlarm float64
	for i := range faulty {
		r, err := m.Step(s, nil, in, z, row(0.0005*float64(i+1))) // 0.005 noise sd per row
		if err != nil {
			t.Fatal(err)
		}
		if v := r.Verdict; v.LEWMALimit > 0 && v.LEWMA > v.LEWMALimit {
			if alarmed == 0 {
				wAtAlarm = m.lin.w
			}
			alarmed++
			if len(r.Contrib) > 0 && r.Contrib[0].Var == drift {
				first++
			}
		}
	}
	t.Logf("drift: EWMA alarms on %d of %d rows, variable %d first in %d; linear model weight %v at the onset, %v at the first alarm, %v at the end; normal rows: %d of %d",
		alarmed, faulty, drift, first, w0, wAtAlarm, m.lin.w, ewmaAlarms, judged)
	if alarmed < faulty/2 || first < alarmed*9/10 {
		t.Errorf("drift: EWMA alarms on %d of %d rows, variable %d first in %d: want ≥ half the rows and ≥ 90 %% first", alarmed, faulty, drift, first)
	}
	if m.lin.w > wAtAlarm+float64(faulty)/10 {
		t.Errorf("the linear model learned the drift: weight %v at the first alarm, %v at the end", wAtAlarm, m.lin.w)
	}
}

// TestRestoreSwitchesLinear: a key's state moves between configurations
// with and without the linear residual (on by default since issue 31's
// third round; linear: false switches it off): without it the state's
// linear residual is dropped, with it a state without one starts the
// linear model empty; both restore and go on stepping.
func TestRestoreSwitchesLinear(t *testing.T) {
	on := Config{Learn: LearnNormal, Standardize: true, Freeze: true, Dim: 3, Linear: true, LinearComponents: 1}.WithDefaults(50)
	off := on
	off.Linear, off.LinearComponents = false, 0
	rng := rand.New(rand.NewPCG(6, 6))
	s := fixed{rand.New(rand.NewPCG(7, 7))}
	in, z := make([]float64, 3), make([]float64, 2)
	run := func(m *Monitor, n int) {
		for range n {
			if _, err := m.Step(s, nil, in, z, []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name     string
		from, to Config
	}{{"linear off after on", on, off}, {"linear on after off", off, on}} {
		a, err := New(c.from)
		if err != nil {
			t.Fatal(err)
		}
		run(a, 400)
		b, err := New(c.to)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Restore(a.State()); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		st := b.State()
		if (st.Linear != nil) != c.to.Linear || len(st.SPE) != len(a.State().SPE) || st.Learned != a.State().Learned {
			t.Errorf("%s: restored linear %v, %d SPE window values (had %d), learned %d (had %d)", c.name, st.Linear != nil, len(st.SPE), len(a.State().SPE), st.Learned, a.State().Learned)
		}
		run(b, 200)
	}
}
