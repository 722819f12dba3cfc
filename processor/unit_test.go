package processor

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

func testLearnerConfig() learners.Config {
	return learners.Config{Learner: learners.KindBatch, Dim: 3, Components: 2, Budget: 16, Kernel: learners.Kernel{Name: learners.KernelLinear}}
}

func obsOf(xs ...[]float64) []codec.Observation {
	out := make([]codec.Observation, len(xs))
	for i, x := range xs {
		out[i] = codec.Observation{ID: fmt.Sprint("id", i), TS: float64(i), X: x}
	}
	return out
}

func TestApply(t *testing.T) {
	l, err := newPCA(testLearnerConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := modelOf(t, &pipeline{cfg: PipelineConfig{Learner: testLearnerConfig()}}, l)
	var res applied
	warm := obsOf([]float64{1, 0, 0}, []float64{0, 2, 0}, []float64{0, 0, 3})
	if err := m.Apply(&res, warm, "k", 7); err != nil {
		t.Fatal(err)
	}
	if res.Warming != 3 || len(res.Outs) != 0 {
		t.Fatalf("warm-up batch: got warming %d, outputs %d; want 3, 0", res.Warming, len(res.Outs))
	}
	before := l.State()
	bad := map[string]struct {
		obs  []codec.Observation
		want error
	}{
		"dimension in batch": {obsOf([]float64{1, 1, 1}, []float64{1, 1}), learners.ErrDimension},
		"nan in batch":       {obsOf([]float64{1, 1, 1}, []float64{1, math.NaN(), 1}), learners.ErrNonFinite},
		"inf":                {obsOf([]float64{math.Inf(-1), 1, 1}), learners.ErrNonFinite},
		"empty":              {nil, codec.ErrMalformed},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			err := m.Apply(&res, tc.obs, "k", 8)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !reflect.DeepEqual(l.State(), before) {
				t.Fatal("state changed by a rejected message")
			}
		})
	}
	batch := obsOf([]float64{1, 1, 0}, []float64{2, 0, 1}, []float64{0, 1, 1})
	if err := m.Apply(&res, batch, "k", 9); err != nil {
		t.Fatal(err)
	}
	if len(res.Outs) != 3 || res.Warming != 0 {
		t.Fatalf("ready batch: got %d outputs, %d warming; want 3, 0", len(res.Outs), res.Warming)
	}
	for i, o := range res.Outs {
		if o.Key != "k" || o.Seq != 9 || o.ID != fmt.Sprint("id", i) || len(o.Z) != 2 || res.Idx[i] != i {
			t.Errorf("output %d: got %+v idx %d", i, o, res.Idx[i])
		}
		if !(o.Explained > 0 && o.Explained <= 1) {
			t.Errorf("output %d: explained %v outside (0, 1]", i, o.Explained)
		}
	}
	if l.Seen() != 6 {
		t.Errorf("seen: got %d, want 6", l.Seen())
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err    error
		act    action
		reason string
	}{
		{fmt.Errorf("x: %w", codec.ErrMalformed), actTerm, "malformed"},
		{fmt.Errorf("x: %w", codec.ErrTooLarge), actTerm, "too_large"},
		{codec.ErrVersion, actTerm, "version"},
		{fmt.Errorf("x: %w", learners.ErrDimension), actTerm, "dimension"},
		{learners.ErrNonFinite, actTerm, "non_finite"},
		{codec.ErrNonFinite, actTerm, "non_finite"},
		{learners.ErrNumerical, actTerm, "numerical"},
		{fmt.Errorf("%w: boom", errPanic), actTerm, "panic"},
		{fmt.Errorf("load: %w", snapshot.ErrCorrupt), actNak, "corrupt_snapshot"},
		{learners.ErrState, actNak, "corrupt_snapshot"},
		{fmt.Errorf("%w: %w", snapshot.ErrCorrupt, codec.ErrMalformed), actNak, "corrupt_snapshot"},
		{errIncompatible, actNak, "corrupt_snapshot"},
		{fmt.Errorf("new: %w", learners.ErrConfig), actFatal, "config"},
		{errors.New("nats: timeout"), actNak, "transient"},
		{fmt.Errorf("%w: key k: sequence 3 before 5", errWaiting), actNak, "waiting"},
		{jetstream.ErrNoStreamResponse, actHold, "no_stream"},
		{fmt.Errorf("%w: dead letters to %q: %w", errNoStream, "kpca.dlq.p", jetstream.ErrNoStreamResponse), actHold, "no_stream"},
		{fmt.Errorf("x: %w", nats.ErrNoResponders), actNak, "transient"},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			act, reason := classify(tc.err)
			if act != tc.act || reason != tc.reason {
				t.Errorf("classify(%v): got (%d, %q), want (%d, %q)", tc.err, act, reason, tc.act, tc.reason)
			}
		})
	}
}

func TestKeyOf(t *testing.T) {
	tests := []struct {
		subject string
		tok     int
		want    string
	}{
		{"sensors.a1.features", 1, "a1"},
		{"sensors.a1.features", 0, "sensors"},
		{"sensors.a1", 1, "a1"},
		{"sensors", 1, SingleKey},
		{"sensors.a1.features", -1, SingleKey},
	}
	for _, tc := range tests {
		if got := keyOf(tc.subject, tc.tok); got != tc.want {
			t.Errorf("keyOf(%q, %d): got %q, want %q", tc.subject, tc.tok, got, tc.want)
		}
	}
}

func TestSubjectCovers(t *testing.T) {
	for _, tc := range []struct {
		filter, subj string
		want         bool
	}{
		{"kpca.out.>", "kpca.out.demo.*", true},
		{"kpca.out.demo.*", "kpca.out.demo.*", true},
		{"kpca.out.*.*", "kpca.out.demo.*", true},
		{"bench.b.*.in", "bench.b.out.*", false}, // overlaps, does not capture
		{"kpca.out.demo.a", "kpca.out.demo.*", false},
		{"kpca.>", "kpca", false},
		{"kpca.out", "kpca.out.demo.*", false},
		{"kpca.out.*", "kpca.out.>", false},
		{">", "a.b.*", true},
	} {
		if got := subjectCovers(tc.filter, tc.subj); got != tc.want {
			t.Errorf("subjectCovers(%q, %q) = %v, want %v", tc.filter, tc.subj, got, tc.want)
		}
	}
}

// TestDeadLetterLog: a flood of dead letters writes the first one at once
// and then one line per interval with the count by reason, not one line
// per message.
func TestDeadLetterLog(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core)
	var d deadLetterLog
	t0 := time.Unix(1000, 0)
	for i := range 2000 {
		reason := "too_large"
		if i%4 == 0 {
			reason = "dimension"
		}
		d.add(log, t0.Add(time.Duration(i)*time.Millisecond), "k", "s", uint64(i), reason, errors.New("bad"))
		d.flush(log, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d lines during the flood (2 s), want 1", n)
	}
	d.flush(log, t0.Add(deadLetterLogEvery+time.Millisecond))
	d.flush(log, t0.Add(deadLetterLogEvery+2*time.Millisecond))
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d lines after the interval, want 2", len(all))
	}
	m := all[1].ContextMap()
	if m["count"] != int64(1999) || fmt.Sprint(m["by_reason"]) != "map[dimension:499 too_large:1500]" {
		t.Errorf("summary line %v", m)
	}
	// The next dead letter after a quiet interval is logged at once.
	d.add(log, t0.Add(3*deadLetterLogEvery), "k", "s", 1, "malformed", errors.New("bad"))
	if logs.Len() != 3 {
		t.Errorf("%d lines, want 3", logs.Len())
	}
}

// TestWorkerWindow checks a worker's share of the output window: the
// window split over the partition's workers, and through a lane at least
// key_in_flight (one hot key among many workers).
func TestWorkerWindow(t *testing.T) {
	pc := PipelineConfig{Output: OutputConfig{Window: 256, KeyInFlight: 128}}
	for _, c := range []struct {
		workers int
		lane    bool
		want    int
	}{
		{1, false, 256}, {2, false, 128}, {16, false, 16}, {1000, false, 1},
		{1, true, 256}, {2, true, 128}, {16, true, 128}, {1000, true, 128},
	} {
		if got := workerWindow(pc, c.workers, c.lane); got != c.want {
			t.Errorf("window 256, key_in_flight 128, %d workers, lane %v: %d, want %d", c.workers, c.lane, got, c.want)
		}
	}
}
