package kpcaview

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, math.NaN(), math.Inf(1)}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {0.5, 3}, {1, 5}, {0.25, 2}, {0.9, 4.6}} {
		if got := Quantile(xs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Quantile modified its input")
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is not 0")
	}
	l := ControlLimits([]float64{1, 2, 3, 4, 100}, []float64{1, 1, 1, 1, 1}, 0.75)
	if l.SPE != 4 || l.SPEOver != 1 || l.T2 != 1 || l.T2Over != 0 {
		t.Errorf("ControlLimits = %+v", l)
	}
}

func obs(x int64, spe float64, basis uint64) *Observation {
	return &Observation{X: x, Seq: uint64(x), Z: []float64{float64(x), -float64(x), 1, 2}, SPE: spe, T2: 2 * spe,
		Explained: 0.5, Eigenvalues: []float64{3, 2, 1}, Stored: int(x % 7), Basis: basis, Learn: 0.001, Age: -1}
}

// TestRing checks that a live Series keeps the latest samples and buckets,
// aggregates per bucket and records basis changes.
func TestRing(t *testing.T) {
	s := NewSeries(Options{Samples: 10, ZDims: 2, Buckets: 5, Width: 100})
	for x := range int64(1000) {
		s.Add(obs(x, 1, uint64(x/300)))
	}
	v := s.View(0.99, DefaultDrift)
	if len(v.Samples.X) != 10 || v.Samples.X[0] != 990 || v.Samples.X[9] != 999 {
		t.Fatalf("samples %v, want 990..999", v.Samples.X)
	}
	if len(v.Samples.Z) != 2 || v.Samples.Z[0][9] != 999 || v.Samples.Z[1][9] != -999 {
		t.Errorf("z columns %v", v.Samples.Z)
	}
	if v.Samples.Label != nil {
		t.Error("labels without any labelled sample")
	}
	b := v.Buckets
	if len(b.X) != 5 || b.X[0] != 500 || b.X[4] != 900 || b.N[4] != 100 || b.Width[0] != 100 {
		t.Fatalf("buckets x %v n %v, want 500..900 of 100", b.X, b.N)
	}
	if len(b.Eig) != 3 || b.Eig[0][0] != 3 || b.SPE[0] != 1 || b.T2[0] != 2 || b.Age[0] != 0 || math.Abs(b.Learn[0]-0.001) > 1e-12 {
		t.Errorf("bucket aggregates %+v", b)
	}
	basis := 0
	for _, e := range v.Events {
		if e.Kind == "basis" {
			basis++
			if e.To != e.From+1 || e.X%300 != 0 {
				t.Errorf("basis event %+v", e)
			}
		}
	}
	if basis != 3 {
		t.Errorf("%d basis events, want 3: %+v", basis, v.Events)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}
}

// TestThin checks that a thinned Series covers the whole stream in bounded
// memory, with exact bucket sums.
func TestThin(t *testing.T) {
	s := NewSeries(Options{Samples: 16, Buckets: 8, Width: 10, Thin: true})
	const n = 1000
	for x := range int64(n) {
		s.Add(obs(x, float64(x), 0))
	}
	v := s.View(0.5, DefaultDrift)
	if k := len(v.Samples.X); k > 16 || k < 8 || v.Samples.X[0] != 0 || v.Samples.X[k-1] < n-2*v.Stride {
		t.Fatalf("thinned samples %v (stride %d)", v.Samples.X, v.Stride)
	}
	for i := 1; i < len(v.Samples.X); i++ {
		if v.Samples.X[i]-v.Samples.X[i-1] != v.Stride {
			t.Fatalf("samples not evenly spaced by %d: %v", v.Stride, v.Samples.X)
		}
	}
	b := v.Buckets
	if len(b.X) > 8 || b.X[0] != 0 {
		t.Fatalf("buckets %v", b.X)
	}
	total := 0
	for i := range b.X {
		total += b.N[i]
		// mean SPE of [x, x+w) is x + (w-1)/2 (except the last, partial one)
		if i < len(b.X)-1 {
			if want := float64(b.X[i]) + float64(b.Width[i]-1)/2; math.Abs(b.SPE[i]-want) > 1e-9 || b.N[i] != int(b.Width[i]) {
				t.Errorf("bucket %d: x %d width %d n %d mean %v, want %v", i, b.X[i], b.Width[i], b.N[i], b.SPE[i], want)
			}
		}
	}
	if total != n {
		t.Errorf("buckets hold %d observations, want %d", total, n)
	}
}

func TestDriftMarkers(t *testing.T) {
	spe := make([]float64, 100)
	for i := range spe {
		spe[i] = 1 + 0.1*float64(i%3)
	}
	spe[60], spe[61], spe[62] = 10, 8, 5 // one episode
	spe[80] = 2                          // within 8 robust deviations of the level
	got := DefaultDrift.Markers(spe)
	if len(got) != 1 || got[0] != 60 {
		t.Errorf("markers %v, want [60]", got)
	}
	spe[3] = 10
	if m := DefaultDrift.Markers(spe[:10]); len(m) != 0 {
		t.Errorf("markers %v before Min buckets", m)
	}
}

// TestDriftMarkersDemo: the mean SPE per second of a watched demo key
// (kpcastream demo, the default 15 s between abrupt changes; the API's
// buckets.spe of sensor-0 after 61 s) has 4 changes, at seconds 9, 24, 39
// and 54: two into the noisier structure (SPE 0.04 → 0.104, spikes of
// 6.9×) and two back (spikes of 2.5× over 0.104). The rule of factor 3
// over the median of 30 buckets found none (issue 23: "4 abrupt changes,
// 0 drift events"): the first came before its 15 buckets of history, the
// others were 2.5–2.6× a median of both levels.
func TestDriftMarkersDemo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "demo_spe.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spe []float64
	if err := json.Unmarshal(b, &spe); err != nil {
		t.Fatal(err)
	}
	if got := DefaultDrift.Markers(spe); !slices.Equal(got, []int{9, 24, 39, 54}) {
		t.Errorf("markers at buckets %v, want [9 24 39 54]", got)
	}
	if old := (DriftRule{Window: 30, Min: 15, Factor: 3}).Markers(spe); len(old) != 0 {
		t.Errorf("the old rule finds %v: the fixture no longer shows the issue", old)
	}
}

func TestLabels(t *testing.T) {
	s := NewSeries(Options{Samples: 4})
	o := obs(1, 1, 0)
	s.Add(o)
	o.Label = "a"
	s.Add(o)
	v := s.View(0.99, DefaultDrift)
	if len(v.Samples.Label) != 2 || v.Samples.Label[0] != "" || v.Samples.Label[1] != "a" {
		t.Errorf("labels %q", v.Samples.Label)
	}
}

// TestPerBucket checks that a live Series spreads its samples over the
// buckets at a high rate.
func TestPerBucket(t *testing.T) {
	s := NewSeries(Options{Samples: 100, Width: 1000, PerBucket: 10})
	for x := range int64(20_000) { // 1000 observations per bucket, 20 buckets
		s.Add(obs(x, 1, 0))
	}
	v := s.View(0.99, DefaultDrift)
	if len(v.Samples.X) != 100 || v.Samples.X[0] != 10_000 || v.Samples.X[1] != 10_100 {
		t.Errorf("kept %d samples from %v, want 100 from 10000 every 100", len(v.Samples.X), v.Samples.X[:2])
	}
	// The first bucket has no rate to go by: it keeps its first PerBucket.
	s = NewSeries(Options{Samples: 100, Width: 1000, PerBucket: 10})
	for x := range int64(1000) {
		s.Add(obs(x, 1, 0))
	}
	if v := s.View(0.99, DefaultDrift); len(v.Samples.X) != 10 {
		t.Errorf("first bucket kept %d samples, want 10", len(v.Samples.X))
	}
}

// TestPredictions: a classifier's predictions are kept beside the labels,
// and each bucket counts the observations with both and those right,
// through the thinning of a report's record.
func TestPredictions(t *testing.T) {
	s := NewSeries(Options{Samples: 8, Buckets: 4, Width: 10, Thin: true})
	right := 0
	for i := range 100 {
		o := obs(int64(i), float64(i), 0)
		o.Label, o.Pred = "a", "a"
		if i%4 == 0 {
			o.Pred = "b"
		} else {
			right++
		}
		if i%10 == 9 {
			o.Label = "" // unlabelled: predicted, not counted
			if o.Pred == "a" {
				right--
			}
		}
		s.Add(o)
	}
	v := s.View(0.99, DefaultDrift)
	if len(v.Samples.Pred) != len(v.Samples.X) || len(v.Samples.Label) != len(v.Samples.X) {
		t.Fatalf("samples: %d x, %d labels, %d predictions", len(v.Samples.X), len(v.Samples.Label), len(v.Samples.Pred))
	}
	for i, x := range v.Samples.X {
		if want := map[bool]string{true: "b", false: "a"}[x%4 == 0]; v.Samples.Pred[i] != want {
			t.Errorf("sample at %d predicted %q, want %q", x, v.Samples.Pred[i], want)
		}
	}
	classified, correct := 0, 0
	for i := range v.Buckets.X {
		classified += v.Buckets.Classified[i]
		correct += v.Buckets.Correct[i]
	}
	if classified != 90 || correct != right {
		t.Errorf("buckets count %d classified and %d right, want 90 and %d", classified, correct, right)
	}
	if v := NewSeries(Options{}).View(0.99, DefaultDrift); v.Samples.Pred != nil || v.Buckets.Classified != nil {
		t.Error("a record without predictions has prediction columns")
	}
}

// TestViewMonitorLimits: outputs that carry a monitor's limits and alarms
// give the view those limits (not the quantile of the samples) and each
// sample's alarm; outputs without them keep the quantile.
func TestViewMonitorLimits(t *testing.T) {
	s := NewSeries(Options{Samples: 64})
	for i := range 50 {
		o := &Observation{X: int64(i), Seq: uint64(i + 1), SPE: float64(i), T2: 1, SPELimit: 45, T2Limit: 9}
		if i > 45 {
			o.Alarm = "spe"
		}
		s.Add(o)
	}
	v := s.View(0.99, DefaultDrift)
	if v.Limits.Source != "monitor" || v.Limits.SPE != 45 || v.Limits.T2 != 9 || v.Limits.SPEOver != 4 {
		t.Errorf("limits %+v, want the outputs' (monitor, SPE 45, T² 9, 4 over)", v.Limits)
	}
	if a := v.Samples.Alarm; len(a) != 50 || a[49] != "spe" || a[0] != "" {
		t.Errorf("alarms %v", a)
	}
	q := NewSeries(Options{Samples: 64})
	for i := range 50 {
		q.Add(&Observation{X: int64(i), SPE: float64(i), T2: 1})
	}
	if v := q.View(0.5, DefaultDrift); v.Limits.Source != "quantile" || v.Limits.SPE != 24.5 || v.Samples.Alarm != nil {
		t.Errorf("without a monitor: limits %+v, alarms %v; want the 0.5-quantile 24.5 and no alarms", v.Limits, v.Samples.Alarm)
	}
}

// TestContribTally checks the contributions panel's data: alarms that
// name their variables are tallied (first, top 3, the newest list), others
// are not, the view copies, and a series without any has no panel.
func TestContribTally(t *testing.T) {
	s := NewSeries(Options{Samples: 8})
	if s.View(0.99, DefaultDrift).Contrib != nil {
		t.Fatal("a series without contributions has a contributions panel")
	}
	add := func(x int64, cs ...Contribution) {
		s.Add(&Observation{X: x, Seq: uint64(x), Z: []float64{1}, Contrib: cs})
	}
	add(1, Contribution{7, 3}, Contribution{2, 1}, Contribution{0, 0.5})
	add(2)
	add(3, Contribution{2, 4}, Contribution{7, 2})
	cs := []Contribution{{7, 5}, {maxContribVars, 1}}
	s.Add(&Observation{X: 4, Seq: 4, Contrib: cs})
	cs[0].Var = 1 // the series keeps no reference
	c := s.View(0.99, DefaultDrift).Contrib
	if c == nil || c.Alarms != 3 || c.First[7] != 2 || c.First[2] != 1 || c.Top3[7] != 3 || c.Top3[2] != 2 || c.Top3[0] != 1 || c.Other != 1 {
		t.Fatalf("tally %+v: want 3 alarms, x7 first twice and in the top 3 thrice, x2 first once and top 3 twice, x0 top 3 once, one other", c)
	}
	if c.LastX != 4 || len(c.Last) != 2 || c.Last[0] != (Contribution{7, 5}) {
		t.Errorf("newest alarm %d %+v, want 4 [{7 5} …]", c.LastX, c.Last)
	}
}
