package codec

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// TestOutputMonitorFields checks the monitoring fields of an output: absent
// when unused (the bytes of an output without them do not change), written
// after the other optional fields in both encodings, and decoded back.
func TestOutputMonitorFields(t *testing.T) {
	base := Output{ID: "a", Key: "k", Seq: 7, TS: 1.5, Z: []float64{1, 2}, SPE: 0.5, T2: 3, Explained: 0.9, BasisVersion: 2}
	full := base
	full.Y = Scalar{Kind: ScalarString, Str: "x"}
	full.Meta = Meta{{Key: "m", Value: Scalar{Kind: ScalarNumber, Num: 1}}}
	full.Pred = Scalar{Kind: ScalarString, Str: "x"}
	full.Scores = []float64{0.1, 0.9}
	full.SPELimit, full.T2Limit, full.Alarm = 0.25, 9.5, "spe"
	full.LSPE, full.LSPELimit = 3, 1.5
	full.LEWMA, full.LEWMALimit = 30, 25
	full.Contrib = []Contribution{{Var: 7, Value: 2.5}, {Var: 0, Value: 0.125}, {Var: 300, Value: 0}}
	limitsOnly := base
	limitsOnly.SPELimit, limitsOnly.T2Limit = 0.75, 9.5
	warming := base
	warming.Warmup = true
	for _, enc := range []Encoding{JSON, Msgpack} {
		plain, err := EncodeOutput(nil, enc, &base)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(plain, []byte("limit")) || bytes.Contains(plain, []byte("alarm")) || bytes.Contains(plain, []byte("contrib")) ||
			bytes.Contains(plain, []byte("lspe")) || bytes.Contains(plain, []byte("lewma")) || bytes.Contains(plain, []byte("warmup")) {
			t.Errorf("enc %d: output without monitoring carries monitoring fields: %q", enc, plain)
		}
		for _, o := range []Output{full, limitsOnly, warming} {
			b, err := EncodeOutput(nil, enc, &o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeOutput(b, enc)
			if err != nil {
				t.Fatalf("enc %d: decode %q: %v", enc, b, err)
			}
			if !reflect.DeepEqual(*got, o) {
				t.Errorf("enc %d: round trip: got %+v, want %+v", enc, *got, o)
			}
			if o.Alarm == "" && bytes.Contains(b, []byte("alarm")) {
				t.Errorf("enc %d: output without alarm has an alarm field: %q", enc, b)
			}
		}
	}
	b, _ := EncodeOutput(nil, JSON, &full)
	if !strings.HasSuffix(string(b), `"scores":[0.1,0.9],"spe_limit":0.25,"t2_limit":9.5,"alarm":"spe","lspe":3,"lspe_limit":1.5,"lewma":30,"lewma_limit":25,`+
		`"contrib":[{"var":7,"value":2.5},{"var":0,"value":0.125},{"var":300,"value":0}]}`) {
		t.Errorf("JSON field order: %s", b)
	}
	if b, _ := EncodeOutput(nil, JSON, &warming); !strings.HasSuffix(string(b), `"basis_version":2,"warmup":true}`) {
		t.Errorf("JSON of a warming output: %s", b)
	}
	nanContrib := full
	nanContrib.Contrib = []Contribution{{Var: 1, Value: nanValue()}}
	if _, err := EncodeOutput(nil, JSON, &nanContrib); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "contrib") {
		t.Errorf("NaN contribution in JSON: got %v, want ErrNonFinite naming contrib", err)
	}
	bad := base
	bad.SPELimit = nanValue()
	if _, err := EncodeOutput(nil, JSON, &bad); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "spe_limit") {
		t.Errorf("NaN limit in JSON: got %v, want ErrNonFinite naming spe_limit", err)
	}
}

func nanValue() float64 {
	var z float64
	return z / z
}

func smallModel() *learners.Model {
	return &learners.Model{Format: learners.ModelFormat, Learner: "ikpca", Kernel: learners.Kernel{Name: "rbf", Gamma: 0.5},
		Points: [][]float64{{1, 2}, {3, 4}}, Coefficients: [][]float64{{0.5}, {-0.5}}, Offsets: []float64{0.1}, Eigenvalues: []float64{1}, Seen: 2}
}

// TestModelSections checks the preprocess and monitor sections of the
// model export: absent when unused, round trip, applied by Transform, and
// invalid sections refused with the field named.
func TestModelSections(t *testing.T) {
	m := smallModel()
	plain, err := EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("preprocess")) || bytes.Contains(plain, []byte("monitor")) {
		t.Errorf("model without sections: %s", plain)
	}
	m.Preprocess = &learners.ModelPreprocess{Mean: []float64{10, 20}, Scale: []float64{2, 4}}
	m.Monitor = &learners.ModelMonitor{Level: 0.99, Learn: "normal", SPELimit: 0.3, T2Limit: 7}
	b, err := EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte(`"seen":2,"preprocess":{"standardize":{"mean":[10,20],"scale":[2,4]}},"monitor":{"level":0.99,"learn":"normal","spe_limit":0.3,"t2_limit":7}}`)) {
		t.Errorf("model sections: %s", b)
	}
	got, err := DecodeModel(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip: got %+v, want %+v", got, m)
	}
	// Transform applies the preprocessing: raw (12, 28) is standardised (1, 2).
	raw := got.Transform(nil, []float64{12, 28})
	m.Preprocess = nil
	std := m.Transform(nil, []float64{1, 2})
	if raw[0] != std[0] {
		t.Errorf("Transform of the raw row %v, of the standardised row %v: want equal", raw, std)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"scale-zero", `"scale":[2,4]`, `"scale":[0,4]`},
		{"mean-length", `"mean":[10,20]`, `"mean":[10]`},
		{"no-standardize", `{"standardize":{"mean":[10,20],"scale":[2,4]}}`, `{}`},
		{"learn", `"learn":"normal"`, `"learn":"sometimes"`},
		{"level", `"level":0.99`, `"level":1`},
		{"negative-limit", `"spe_limit":0.3`, `"spe_limit":-1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(b), tc.from, tc.to, 1)
			if bad == string(b) {
				t.Fatalf("edit %q not found", tc.from)
			}
			if _, err := DecodeModel([]byte(bad)); !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want ErrMalformed", err)
			}
		})
	}
}

// TestSnapshotMonitor checks that a snapshot carries a monitor's state
// exactly and that one without it keeps its bytes.
func TestSnapshotMonitor(t *testing.T) {
	st := &learners.State{Version: 1, Kind: "ikpca", Config: learners.Config{Learner: "ikpca", Dim: 2, Components: 1, Budget: 4,
		Kernel: learners.Kernel{Name: "rbf", Gamma: 1}, Forget: 1}, Seen: 3}
	snap := &Snapshot{Key: "k", Pipeline: "p", LastSeq: 9, State: st}
	plain, err := EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("monitor")) {
		t.Error("snapshot without monitor carries a monitor field")
	}
	snap.Monitor = &monitor.State{Learned: 500, Run: 2, Tokens: 1.5, Settled: true, SPE: []float64{0.1, 0.2}, T2: []float64{1, 2},
		Pending: []monitor.Pending{{X: []float64{1, 2}, SPE: 0.1, T2: 1}, {X: []float64{3, 4}, SPE: 0.2, T2: 2}},
		InW:     10, InMean: []float64{5, 6}, InM2: []float64{7, 8}}
	b, err := EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Monitor, snap.Monitor) {
		t.Errorf("monitor round trip: got %+v, want %+v", got.Monitor, snap.Monitor)
	}
	if bytes.Contains(b, []byte("trend")) {
		t.Error("a monitor without the trend gate's state carries trend fields")
	}
	// The trend gate's state travels exactly; without it the bytes are
	// those above.
	withTrend := *snap
	mt := *snap.Monitor
	mt.Trend, mt.TrendSD = 0.123456789, 0.0987654321
	withTrend.Monitor = &mt
	bt, err := EncodeSnapshot(&withTrend)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSnapshot(bt); err != nil || !reflect.DeepEqual(got.Monitor, &mt) {
		t.Errorf("monitor with the trend gate's state: got %+v (%v), want %+v", got.Monitor, err, &mt)
	}
	if bytes.Contains(bt, []byte("lspe")) || bytes.Contains(bt, []byte("lin_")) {
		t.Error("a monitor without the linear residual carries its fields")
	}
	// The linear residual's state travels exactly (issue 31).
	withLinear := *snap
	ml := mt
	ml.LSPE = []float64{0.5, 0.25}
	ml.Pending = []monitor.Pending{{X: []float64{1, 2}, SPE: 0.1, T2: 1, LSPE: 0.3}, {X: []float64{3, 4}, SPE: 0.2, T2: 2, LSPE: 0.4}}
	ml.Linear = &monitor.LinearState{W: 12, Mean: []float64{1, 2}, M2: []float64{3, 1, 1, 4}, P: []float64{0.6, 0.8}, Since: 7,
		E: []float64{0.1, -0.2}, V: []float64{1, 2}, S: []float64{0.01, 0.02}, N: 60, Out: true}
	ml.Clean, ml.ExcN, ml.Long = 3, 1, true
	ml.LTrend, ml.LTrendSD = 0.01, 0.02
	withLinear.Monitor = &ml
	bl, err := EncodeSnapshot(&withLinear)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSnapshot(bl); err != nil || !reflect.DeepEqual(got.Monitor, &ml) {
		t.Errorf("monitor with the linear residual: got %+v (%v), want %+v", got.Monitor, err, &ml)
	}
	got.Monitor = nil
	if b2, _ := EncodeSnapshot(got); !bytes.Equal(b2, plain) {
		t.Error("snapshot without the monitor does not give the bytes it had")
	}
}
