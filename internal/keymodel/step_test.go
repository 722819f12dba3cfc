package keymodel

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
)

// TestLearnLabelledOnCoords checks that LearnLabelled on the learner's
// coordinates predicts what Apply publishes for the same observations,
// and leaves the model in the same state.
func TestLearnLabelledOnCoords(t *testing.T) {
	s := fullSpec(nil)
	s.Monitor = nil
	a, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var res Result
	scores := make([]float64, 2)
	compared := 0
	for i := range 200 {
		obs := message(rng, i)
		if err := a.Apply(&res, obs, "k", uint64(i+1)); err != nil {
			t.Fatal(err)
		}
		y, err := s.Classes.of(obs[0].Y)
		if err != nil {
			t.Fatal(err)
		}
		pred, err := b.LearnLabelled(scores, obs[0].X, y)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Outs) == 1 {
			compared++
			if want := s.Classes.pred[pred]; !res.Outs[0].Pred.Equal(want) || !reflect.DeepEqual(res.Outs[0].Scores, scores) {
				t.Fatalf("observation %d: LearnLabelled predicts %v %v, Apply published %v %v", i, want, scores, res.Outs[0].Pred, res.Outs[0].Scores)
			}
		}
	}
	if compared < 100 {
		t.Fatalf("only %d predictions compared", compared)
	}
	if !reflect.DeepEqual(a.Snapshot(), b.Snapshot()) {
		t.Fatal("LearnLabelled and Apply left different models")
	}
}

// TestOnZ checks the classifier on z: Apply refuses it, LearnLabelled
// predicts nothing before the learner is ready and then learns a
// separable rule, and neither the snapshot nor the export holds it.
func TestOnZ(t *testing.T) {
	s := fullSpec(nil)
	s.Monitor, s.OnZ = nil, true
	s.Classifier.Dim = s.Learner.Components
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	rng := rand.New(rand.NewPCG(5, 6))
	if err := m.Apply(&res, message(rng, 1), "k", 1); !errors.Is(err, errOnZ) {
		t.Fatalf("Apply with the classifier on z: %v, want errOnZ", err)
	}
	if m.Learner().Seen() != 0 {
		t.Fatal("a refused Apply taught the learner")
	}
	scores := make([]float64, 2)
	pred, err := m.LearnLabelled(scores, []float64{1, 0, 0}, 1)
	if err != nil || pred != -1 || scores[0] != 0 || scores[1] != 0 {
		t.Fatalf("first row: pred %d, scores %v, %v; want -1, zeros (learner not ready)", pred, scores, err)
	}
	hits, late := 0, 0
	for i := range 600 {
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		x[0] += 3 * float64(i%2)
		pred, err := m.LearnLabelled(scores, x, i%2)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 400 {
			late++
			if pred == i%2 {
				hits++
			}
		}
	}
	if acc := float64(hits) / float64(late); acc < 0.8 {
		t.Errorf("classifier on z: accuracy %.3f over the last %d rows of two clusters 3 σ apart, want ≥ 0.8", acc, late)
	}
	if st := m.Snapshot(); st.Classifier != nil {
		t.Error("snapshot holds the classifier on z")
	}
	if x, err := m.Export(); err != nil || x.Classifier != nil {
		t.Errorf("export %v (classifier %v): want no classifier section", err, x.Classifier)
	}
	plain, err := New(&Spec{Learner: s.Learner})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.LearnLabelled(scores, []float64{1, 0, 0}, 0); err == nil {
		t.Error("LearnLabelled without a classifier stage: no error")
	}
}

// TestExportOptions checks Spec.Preprocess, HideMonitor and Synced: an
// export with a synced copy leaves the learner's state as it was.
func TestExportOptions(t *testing.T) {
	s := fullSpec(nil)
	s.Classes, s.HideMonitor, s.Synced = nil, true, true
	s.Preprocess = &learners.ModelPreprocess{Mean: []float64{1, 2, 3}, Scale: []float64{1, 1, 1}}
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var res Result
	for i := range 100 {
		if err := m.Apply(&res, []codec.Observation{message(rng, i)[0]}, "k", uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	before := m.Learner().State()
	x, err := m.Export()
	if err != nil {
		t.Fatal(err)
	}
	if x.Monitor != nil || x.Preprocess != s.Preprocess {
		t.Errorf("export: monitor %v (want hidden), preprocess %v (want the spec's)", x.Monitor, x.Preprocess)
	}
	if !reflect.DeepEqual(m.Learner().State(), before) {
		t.Error("a synced export changed the learner")
	}
	want, err := SyncedModel(m.Learner())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Eigenvalues, want.Eigenvalues) {
		t.Errorf("export eigenvalues %v, SyncedModel's %v", x.Eigenvalues, want.Eigenvalues)
	}
}
