package keymodel

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	lclassify "github.com/kpcastream/kpcastream/learners/classify"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

func TestClassesOf(t *testing.T) {
	c := NewClasses([]string{"cat", "3", "2.5", "x3"})
	for _, tc := range []struct {
		y    codec.Scalar
		want int
	}{
		{codec.String("cat"), 0}, {codec.Number(3), 1}, {codec.String("3"), 1}, {codec.Number(2.5), 2}, {codec.Scalar{}, -1},
	} {
		if got, err := c.of(tc.y); err != nil || got != tc.want {
			t.Errorf("label %+v: class %d, %v; want %d", tc.y, got, err, tc.want)
		}
	}
	if _, err := c.of(codec.Number(4)); !errors.Is(err, ErrLabel) {
		t.Errorf("unknown label: got %v, want ErrLabel", err)
	}
	if !c.pred[1].Equal(codec.Number(3)) || !c.pred[0].Equal(codec.String("cat")) || !c.pred[3].Equal(codec.String("x3")) {
		t.Errorf("pred values %+v", c.pred)
	}
}

// counter is a Meter that counts.
type counter struct{ labels, preds, alarms int }

func (c *counter) Label(int)                    { c.labels++ }
func (c *counter) Prediction(int, int, float64) { c.preds++ }
func (c *counter) Alarm(monitor.Alarm)          { c.alarms++ }

// fullSpec is a spec with every part: an ikpca learner, a classifier
// stage and a standardising monitor.
func fullSpec(mt Meter) *Spec {
	lc := learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 16,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1}
	mc := monitor.Config{Level: 0.99, Learn: monitor.LearnAlways, Warmup: 30, Standardize: true, Dim: 3}.WithDefaults(lc.Budget)
	return &Spec{Learner: lc, Classes: NewClasses([]string{"a", "b"}), Classifier: lclassify.Config{Ridge: 0.1, Forget: 1},
		Window: 50, Monitor: &mc, Meter: mt}
}

func message(rng *rand.Rand, i int) []codec.Observation {
	x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	y := codec.String("a")
	if x[0] > 0 {
		y = codec.String("b")
	}
	if i%3 == 0 {
		y = codec.Scalar{}
	}
	return []codec.Observation{{X: x, Y: y}}
}

// TestModelRoundTrip steps a model with every part, snapshots and
// restores it, and checks that both go on identically (the snapshot holds
// the whole model); that a bad message changes nothing; that Reset starts
// afresh, Accept needs a monitor and Export carries every section.
func TestModelRoundTrip(t *testing.T) {
	mt := &counter{}
	s := fullSpec(mt)
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var res, res2 Result
	for i := range 200 {
		if err := m.Apply(&res, message(rng, i), "k", uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if mt.labels == 0 || mt.preds == 0 || len(res.Outs) != 1 || res.Outs[0].SPELimit == 0 || len(res.Outs[0].Scores) != 2 {
		t.Fatalf("meter %+v, last outputs %+v: want labels, predictions and a judged, classified output", mt, res.Outs)
	}
	st := m.Snapshot()
	if st.Learner == nil || st.Classifier == nil || st.Monitor == nil {
		t.Fatalf("snapshot %+v lacks a part", st)
	}
	m2, kept, err := Restore(s, st)
	if err != nil || kept {
		t.Fatalf("restore: %v (kept %v)", err, kept)
	}
	for i := range 50 {
		obs := message(rng, i)
		if err := m.Apply(&res, obs, "k", uint64(300+i)); err != nil {
			t.Fatal(err)
		}
		if err := m2.Apply(&res2, obs, "k", uint64(300+i)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Outs, res2.Outs) {
			t.Fatalf("message %d: restored model's outputs %+v, want %+v", i, res2.Outs, res.Outs)
		}
	}
	before := m.Snapshot()
	bad := []codec.Observation{{X: []float64{1, 2, 3}, Y: codec.String("a")}, {X: []float64{1, 2, 3}, Y: codec.String("dog")}}
	if err := m.Apply(&res, bad, "k", 1000); !errors.Is(err, ErrLabel) {
		t.Fatalf("unknown class: got %v, want ErrLabel", err)
	}
	if !reflect.DeepEqual(m.Snapshot(), before) {
		t.Fatal("a refused message changed the model")
	}
	x, err := m.Export()
	if err != nil || x.Classifier == nil || x.Monitor == nil || x.Preprocess == nil {
		t.Fatalf("export %+v, %v: want classifier, monitor and preprocess sections", x, err)
	}
	if err := m.Accept(); err != nil {
		t.Fatal(err)
	}
	if err := m.Reset(); err != nil || m.Learner().Seen() != 0 {
		t.Fatalf("reset: %v, seen %d", err, m.Learner().Seen())
	}
	plain, err := New(&Spec{Learner: s.Learner})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Accept(); !errors.Is(err, ErrNoMonitor) {
		t.Errorf("accept without a monitor: %v, want ErrNoMonitor", err)
	}
	if st := plain.Snapshot(); st.Classifier != nil || st.Monitor != nil {
		t.Errorf("plain model's snapshot %+v has a classifier or monitor", st)
	}
}

// TestRestorePolicy checks that a snapshot with another budget policy is
// kept (and says so), and one with another dimension refused.
func TestRestorePolicy(t *testing.T) {
	s := &Spec{Learner: fullSpec(nil).Learner}
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Snapshot()
	other := *s
	other.Learner.Eviction = "fifo"
	if _, kept, err := Restore(&other, st); err != nil || !kept {
		t.Errorf("another eviction: kept %v, %v; want kept", kept, err)
	}
	other = *s
	other.Learner.Dim = 4
	if _, _, err := Restore(&other, st); !errors.Is(err, ErrIncompatible) {
		t.Errorf("another dimension: %v, want ErrIncompatible", err)
	}
	if _, _, err := Restore(s, State{}); !errors.Is(err, learners.ErrState) {
		t.Errorf("empty state: %v, want learners.ErrState", err)
	}
}
