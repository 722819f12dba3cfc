package processor

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/snapshot"
)

// gather returns the registry's families by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// series returns the value of the family's series with the given labels
// (a counter or gauge), and whether it exists.
func series(mf *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
		return math.NaN(), true
	}
	return 0, false
}

// TestMetricNames checks Prometheus' naming conventions on every metric
// of a fresh processor: the kpcastream_ prefix, _total on counters and only
// on them, base units, and every failure counter present at 0 before the
// first failure (so that an alert's rate() has a series to read).
func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p1", "p2"} {
		if _, err := m.forPipeline(p, 64); err != nil {
			t.Fatal(err)
		}
	}
	fams := gather(t, reg)
	for name, mf := range fams {
		if !strings.HasPrefix(name, MetricPrefix) {
			t.Errorf("%s: no %s prefix", name, MetricPrefix)
		}
		isCounter := mf.GetType() == dto.MetricType_COUNTER
		if isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s (%v): _total is for counters, and every counter has it", name, mf.GetType())
		}
		for _, bad := range []string{"_ms", "_millis", "_micro", "_kb", "_mb", "_kib", "_mib", "_minutes", "_hours"} {
			if strings.Contains(name, bad) {
				t.Errorf("%s: not a base unit (%s)", name, bad)
			}
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s: no help", name)
		}
	}
	for _, r := range deadLetterReasons {
		if v, ok := series(fams[MetricPrefix+"dead_letters_total"], map[string]string{"pipeline": "p1", "reason": r}); !ok || v != 0 {
			t.Errorf("dead_letters_total{reason=%q}: %v %v, want a series at 0", r, v, ok)
		}
	}
	for _, r := range snapshotFailureReasons {
		if v, ok := series(fams[MetricPrefix+"snapshot_failures_total"], map[string]string{"pipeline": "p1", "reason": r}); !ok || v != 0 {
			t.Errorf("snapshot_failures_total{reason=%q}: %v %v, want a series at 0", r, v, ok)
		}
	}
	for _, r := range messageResults {
		if _, ok := series(fams[MetricPrefix+"messages_total"], map[string]string{"pipeline": "p1", "result": r}); !ok {
			t.Errorf("messages_total{result=%q}: no series", r)
		}
	}
	for _, n := range []string{"publish_errors_total", "partition_takeovers_total", "partitions_fenced_total", "outputs_total"} {
		if v, ok := series(fams[MetricPrefix+n], map[string]string{"pipeline": "p1"}); !ok || v != 0 {
			t.Errorf("%s: %v %v, want a series at 0", n, v, ok)
		}
	}
	if v, ok := series(fams[MetricPrefix+"learner_budget_points"], map[string]string{"pipeline": "p1"}); !ok || v != 64 {
		t.Errorf("learner_budget_points: %v %v, want 64", v, ok)
	}
	if mf := fams[MetricPrefix+"explained_variance_ratio_mean"]; len(mf.GetMetric()) != 2 {
		t.Errorf("explained_variance_ratio_mean: %d series, want one per pipeline", len(mf.GetMetric()))
	}
	bi := fams[MetricPrefix+"build_info"]
	if v, ok := series(bi, nil); !ok || v != 1 || len(bi.GetMetric()) != 1 {
		t.Fatalf("build_info: %v", bi)
	}
	var labels []string
	for _, lp := range bi.GetMetric()[0].GetLabel() {
		labels = append(labels, lp.GetName())
		if lp.GetValue() == "" {
			t.Errorf("build_info label %s is empty", lp.GetName())
		}
	}
	if !slices.Equal(labels, []string{"goversion", "revision", "version"}) {
		t.Errorf("build_info labels %v", labels)
	}
	// Latency buckets are finer than ×4 apart.
	for _, b := range [][]float64{learnBuckets, snapSecBuckets, snapByteBuckets} {
		for i := 1; i < len(b); i++ {
			if r := b[i] / b[i-1]; r > 2.0001 {
				t.Errorf("buckets %v: ratio %g > 2", b, r)
			}
		}
	}
}

// TestDeadLetterReasonsComplete checks that every reason classify gives a
// terminated (dead-lettered) message is initialised in the metrics.
func TestDeadLetterReasonsComplete(t *testing.T) {
	for _, err := range []error{codec.ErrMalformed, codec.ErrVersion, codec.ErrTooLarge, codec.ErrChecksum, codec.ErrNonFinite,
		learners.ErrDimension, learners.ErrNonFinite, learners.ErrNotReady, learners.ErrNumerical, learners.ErrConfig,
		learners.ErrState, snapshot.ErrNoSnapshot, snapshot.ErrConflict, snapshot.ErrCorrupt, errPanic, errWaiting,
		errIncompatible, errFenced, errNoKey, errors.New("other")} {
		act, reason := classify(err)
		if act == actTerm && !slices.Contains(deadLetterReasons, reason) {
			t.Errorf("classify(%v) dead-letters with reason %q, missing from deadLetterReasons", err, reason)
		}
	}
}

// TestExplainedVarianceSeries checks the explained-variance series over
// learners: the cumulative counts by le and the sum move with each
// learner's last value, and an unloaded learner leaves them.
func TestExplainedVarianceSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := m.forPipeline("p", 16)
	if err != nil {
		t.Fatal(err)
	}
	type learner struct {
		band int8
		v    float64
	}
	set := func(l *learner, v float64, remove bool) {
		to := explainedBand(v)
		if remove {
			to, v = -1, 0
		}
		pm.setExplained(l.band, l.v, to, v)
		l.band, l.v = to, v
	}
	a, b := &learner{band: -1}, &learner{band: -1}
	check := func(wantMean float64, want map[string]float64) {
		t.Helper()
		fams := gather(t, reg)
		if v, _ := series(fams[MetricPrefix+"explained_variance_ratio_mean"], map[string]string{"pipeline": "p"}); math.Abs(v-wantMean) > 1e-12 {
			t.Errorf("mean %v, want %v", v, wantMean)
		}
		for at, w := range want {
			if v, ok := series(fams[MetricPrefix+"explained_variance_learners"], map[string]string{"pipeline": "p", "at_most": at}); !ok || v != w {
				t.Errorf("learners{at_most=%s} = %v (%v), want %v", at, v, ok, w)
			}
		}
	}
	check(0, map[string]float64{"0.5": 0, "1": 0})
	set(a, 0.6, false)
	set(b, 0.97, false)
	check(1.57/2, map[string]float64{"0.5": 0, "0.8": 1, "0.9": 1, "0.95": 1, "0.99": 2, "1": 2})
	set(a, 0.65, false) // same band: only the sum moves
	set(b, 0.3, false)
	check(0.95/2, map[string]float64{"0.5": 1, "0.8": 2, "1": 2})
	set(b, 0, true)
	check(0.65, map[string]float64{"0.5": 0, "0.8": 1, "1": 1})
	set(a, 0.999, false)
	check(0.999, map[string]float64{"0.99": 0, "1": 1})
}

// BenchmarkOutputMetrics is what the metrics of this release add per
// projection on the hot path: the T² histogram and the explained-variance
// sum (the counts by at_most change only when a learner's band does).
//
//	go test ./processor -run '^$' -bench OutputMetrics
func BenchmarkOutputMetrics(b *testing.B) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	pm, err := m.forPipeline("p", 16)
	if err != nil {
		b.Fatal(err)
	}
	band, v := int8(-1), 0.0
	b.ReportAllocs()
	for i := range b.N {
		nv := 0.9 + float64(i%7)*1e-4
		nb := explainedBand(nv)
		pm.setExplained(band, v, nb, nv)
		band, v = nb, nv
		pm.t2.Observe(float64(i % 13))
	}
}
