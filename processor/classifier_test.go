package processor

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
)

func TestClassifierConfigValidate(t *testing.T) {
	base := func() PipelineConfig {
		pc := pipelineConfig("c")
		pc.Learner = learners.Config{Dim: 3, Components: 2, Budget: 12, Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}}
		return pc
	}
	for _, tc := range []struct {
		name string
		set  func(*PipelineConfig)
		want string
	}{
		{"one class", func(pc *PipelineConfig) { pc.Classifier = &ClassifierConfig{Classes: []string{"a"}} }, "classifier.classes: need at least 2 classes, got 1"},
		{"duplicate class", func(pc *PipelineConfig) { pc.Classifier = &ClassifierConfig{Classes: []string{"a", "a"}} }, `classifier.classes: class "a" is listed twice`},
		{"empty class", func(pc *PipelineConfig) { pc.Classifier = &ClassifierConfig{Classes: []string{"a", ""}} }, "classifier.classes: class 1 is empty"},
		{"negative ridge", func(pc *PipelineConfig) { pc.Classifier = &ClassifierConfig{Classes: []string{"a", "b"}, Ridge: -1} }, "classifier.ridge: must be > 0"},
		{"forget", func(pc *PipelineConfig) { pc.Classifier = &ClassifierConfig{Classes: []string{"a", "b"}, Forget: 2} }, "classifier.forget: must be in (0, 1]"},
		{"window", func(pc *PipelineConfig) { pc.Classifier = &ClassifierConfig{Classes: []string{"a", "b"}, Window: -1} }, "classifier.window: must be ≥ 0"},
		{"loss", func(pc *PipelineConfig) {
			pc.Classifier = &ClassifierConfig{Classes: []string{"a", "b"}, Loss: "logistic"}
		}, `classifier.loss: must be "squared" or "hinge"`},
		{"learner", func(pc *PipelineConfig) {
			pc.Learner.Learner = learners.KindWindow
			pc.Classifier = &ClassifierConfig{Classes: []string{"a", "b"}}
		}, `classifier.classes: a classifier needs the ikpca or kha learner`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := base()
			tc.set(&pc)
			err := Config{Pipelines: []PipelineConfig{pc}}.Validate()
			if err == nil || !strings.Contains(err.Error(), "pipelines[0]."+tc.want) {
				t.Fatalf("got %v, want an error naming pipelines[0].%s", err, tc.want)
			}
		})
	}
	for _, loss := range []string{"", "squared", "hinge"} {
		pc := base()
		pc.Classifier = &ClassifierConfig{Classes: []string{"a", "b"}, Loss: loss}
		if err := (Config{Pipelines: []PipelineConfig{pc}}).Validate(); err != nil {
			t.Fatalf("valid classifier config (loss %q): %v", loss, err)
		}
	}
}

// TestLabelDeadLettered checks that a label that is no class is bad
// input: dead-lettered, not retried.
func TestLabelDeadLettered(t *testing.T) {
	if a, _ := classify(fmt.Errorf("x: %w", errLabel)); a != actTerm {
		t.Errorf("errLabel is not dead-lettered")
	}
}

// A pipeline with a classifier stage predicts every output (pred, one
// score per class), passes y and meta through, learns the labels, counts
// them, and dead-letters a label that is no class (reason "label") or of
// a bad type (reason "malformed") without touching the learner.
func TestClassifierStage(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("cls")
	pc.Learner = learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 20,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1}
	pc.Classifier = &ClassifierConfig{Classes: []string{"neg", "pos", "7"}, Window: 50}
	r := e.startWith(t, Config{Pipelines: []PipelineConfig{pc}}, nil)
	out, err := e.nc.SubscribeSync("kpca.out.cls.s1")
	if err != nil {
		t.Fatal(err)
	}
	dl, err := e.nc.SubscribeSync("kpca.dlq.cls")
	if err != nil {
		t.Fatal(err)
	}
	subj := "in.cls.s1"
	xs := vectors(11, 300)
	for i, x := range xs {
		o := codec.Observation{X: x, ID: fmt.Sprint(i), Y: testLabel(i, x), Meta: codec.Meta{{Key: "i", Value: codec.Number(float64(i))}}}
		enc := codec.JSON
		if i%2 == 1 {
			enc = codec.Msgpack
		}
		b, err := codec.EncodeObservations(nil, enc, []codec.Observation{o})
		if err != nil {
			t.Fatal(err)
		}
		e.publish(t, subj, b, "")
	}
	var last *codec.Output
	got := 0
	for {
		m, err := out.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("after %d outputs: %v", got, err)
		}
		enc := codec.JSON
		if m.Header.Get(HeaderContentType) == codec.Msgpack.ContentType() {
			enc = codec.Msgpack
		}
		o, err := codec.DecodeOutput(m.Data, enc)
		if err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscan(o.ID, &i)
		if !o.Y.Equal(testLabel(i, xs[i])) || len(o.Meta) != 1 || !o.Meta[0].Value.Equal(codec.Number(float64(i))) {
			t.Fatalf("output %s: y %+v meta %+v, want the input's", o.ID, o.Y, o.Meta)
		}
		if len(o.Scores) != 3 || o.Pred.Kind == codec.ScalarNone {
			t.Fatalf("output %s: pred %+v scores %v", o.ID, o.Pred, o.Scores)
		}
		last = o
		got++
		if o.ID == fmt.Sprint(len(xs)-1) {
			break
		}
	}
	t.Logf("%d outputs, last %+v", got, last)
	acc := metricValue(t, r.p.met.clsAccuracy.WithLabelValues(pc.Name))
	var correct, wrong, labels float64
	for _, c := range pc.Classifier.Classes {
		correct += metricValue(t, r.p.met.clsPredictions.WithLabelValues(pc.Name, c, "correct"))
		wrong += metricValue(t, r.p.met.clsPredictions.WithLabelValues(pc.Name, c, "wrong"))
		labels += metricValue(t, r.p.met.clsLabels.WithLabelValues(pc.Name, c))
	}
	if labels != 200 || correct+wrong == 0 || correct/(correct+wrong) < 0.7 || acc < 0.7 {
		t.Errorf("labels %v (want 200), correct %v, wrong %v, windowed accuracy %v (want ≥ 0.7)", labels, correct, wrong, acc)
	}
	// Bad labels.
	for _, b := range []struct {
		data        []byte
		reason, has string
	}{
		{[]byte(`{"x":[1,2,3],"y":"dog"}`), "label", `"dog"`},
		{[]byte(`{"x":[1,2,3],"y":true}`), "malformed", "field y"},
		{[]byte(`{"batch":[{"x":[1,2,3],"y":"pos"},{"x":[1,2,3],"y":8}]}`), "label", `observation 1`},
	} {
		e.publish(t, subj, b.data, "")
		m, err := dl.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("dead letter of %s: %v", b.data, err)
		}
		if got, d := m.Header.Get(HeaderError), m.Header.Get(HeaderErrorDetail); got != b.reason || !strings.Contains(d, b.has) {
			t.Errorf("%s: reason %q detail %q, want %q naming %s", b.data, got, d, b.reason, b.has)
		}
	}
	waitFor(t, 5*time.Second, "drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	snap := e.loadSnap(t, pc.Name, "s1")
	if snap.State.Seen != int64(len(xs)) || snap.Classifier == nil || snap.Classifier.Seen != 200 {
		t.Errorf("snapshot: learner seen %d (want %d), classifier %+v (want 200 labels learned)", snap.State.Seen, len(xs), snap.Classifier)
	}
}

// apply with a classifier stage, without NATS: outputs carry y, meta,
// pred and scores; a label that is no class fails the message before
// anything is learned; unlabelled observations do not train it.
func TestApplyClassifier(t *testing.T) {
	for _, loss := range []string{"", "hinge"} {
		t.Run("loss "+loss, func(t *testing.T) { testApplyClassifier(t, loss) })
	}
}

func testApplyClassifier(t *testing.T, loss string) {
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	pc := pipelineConfig("u")
	pc.Learner = learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 16,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}}
	pc.Classifier = &ClassifierConfig{Classes: []string{"neg", "pos", "7"}, Loss: loss}
	st := newStage(pc, met)
	l, err := learners.New(pc.Learner)
	if err != nil {
		t.Fatal(err)
	}
	m := modelOf(t, &pipeline{cfg: pc, cls: st}, l)
	var res applied
	xs := vectors(3, 200)
	for i, x := range xs {
		obs := []codec.Observation{{X: x, ID: fmt.Sprint(i), Y: testLabel(i, x), Meta: codec.Meta{{Key: "i", Value: codec.Number(float64(i))}}}}
		if err := m.Apply(&res, obs, "k", uint64(i+1)); err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Outs {
			if len(o.Scores) != 3 || o.Pred.Kind == codec.ScalarNone || !o.Y.Equal(obs[0].Y) || len(o.Meta) != 1 {
				t.Fatalf("observation %d: output %+v", i, o)
			}
		}
	}
	if got := m.Snapshot().Classifier.Config.Loss; got != pc.Classifier.withDefaults().Loss {
		t.Errorf("the snapshot's classifier has loss %q, the pipeline's is %q", got, pc.Classifier.withDefaults().Loss)
	}
	if got, want := m.Snapshot().Classifier.Seen, int64(200-200/3); got != want {
		t.Errorf("classifier learned %d labels, want %d (every third observation is unlabelled)", got, want)
	}
	if acc, n := m.Accuracy(); n == 0 || acc < 0.7 {
		t.Errorf("windowed accuracy %v over %d, want ≥ 0.7", acc, n)
	}
	before, cBefore := l.State(), m.Snapshot().Classifier
	bad := []codec.Observation{{X: []float64{1, 2, 3}, Y: codec.String("pos")}, {X: []float64{1, 2, 3}, Y: codec.String("dog")}}
	if err := m.Apply(&res, bad, "k", 1000); !errors.Is(err, errLabel) || !strings.Contains(err.Error(), "observation 1") {
		t.Fatalf("unknown class: got %v, want errLabel naming observation 1", err)
	}
	if !reflect.DeepEqual(l.State(), before) || !reflect.DeepEqual(m.Snapshot().Classifier, cBefore) {
		t.Fatal("a message with an unknown class changed the learner or the classifier")
	}
}

// Migration: a key snapshotted without a classifier (an older build, or
// the stage switched on later) restores into a pipeline with a stage: the
// learner continues where it was, the classifier starts untrained, and
// the next snapshot carries it.
func TestClassifierOnOldSnapshot(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("mig")
	pc.Learner = learners.Config{Learner: learners.KindIKPCA, Dim: 3, Components: 2, Budget: 20,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1}
	subj := "in.mig.s1"
	xs := vectors(21, 120)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			b, err := codec.EncodeObservations(nil, codec.Msgpack, []codec.Observation{{X: xs[i], ID: fmt.Sprint(i), Y: testLabel(i, xs[i])}})
			if err != nil {
				t.Fatal(err)
			}
			e.publish(t, subj, b, "")
		}
	}
	r := e.startWith(t, Config{Pipelines: []PipelineConfig{pc}}, nil)
	publish(0, 60)
	waitFor(t, 10*time.Second, "first half drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if snap := e.loadSnap(t, pc.Name, "s1"); snap.Classifier != nil || snap.State.Seen != 60 {
		t.Fatalf("snapshot without a stage: classifier %v, seen %d; want none, 60", snap.Classifier != nil, snap.State.Seen)
	}
	pc.Classifier = &ClassifierConfig{Classes: []string{"neg", "pos", "7"}}
	r = e.startWith(t, Config{Pipelines: []PipelineConfig{pc}}, nil)
	publish(60, 120)
	waitFor(t, 10*time.Second, "second half drained", func() bool { return e.drained(t, pc) })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	snap := e.loadSnap(t, pc.Name, "s1")
	want := int64(0)
	for i := 60; i < 120; i++ {
		if testLabel(i, xs[i]).Kind != codec.ScalarNone {
			want++
		}
	}
	if snap.State.Seen != 120 || snap.Classifier == nil || snap.Classifier.Seen != want {
		t.Fatalf("after the restart with a stage: learner seen %d (want 120), classifier %+v (want %d labels)", snap.State.Seen, snap.Classifier, want)
	}
	if out := e.lastOutput(t, pc.Name+"_OUT"); out.Pred.Kind == codec.ScalarNone || len(out.Scores) != 3 {
		t.Errorf("last output after the restart: %+v, want pred and 3 scores", out)
	}
}
