package processor

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
)

// warmModel returns a model of spec that learned n observations.
func warmModel(t testing.TB, spec *keymodel.Spec, n int) *keymodel.Model {
	t.Helper()
	m, err := keymodel.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	var res keymodel.Result
	obs := make([]codec.Observation, 1)
	for i, x := range vectors(5, n) {
		obs[0].X = pad(x, spec.Learner.Dim)
		if err := m.Apply(&res, obs, "k", uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestLocalFormat: a learner's state goes through the local tier's flat
// format unchanged (its configuration given back by the caller), a model
// with a monitor as its snapshot; every truncation and a corrupted count
// of a value is an error, never a panic.
func TestLocalFormat(t *testing.T) {
	lc := benchLearner(16, 2, 16)
	spec := &keymodel.Spec{Learner: lc}
	for _, kind := range []string{learners.KindIKPCA, learners.KindKHA} {
		lc.Learner = kind
		spec.Learner = lc
		m := warmModel(t, spec, 40)
		st := m.Snapshot()
		b, err := appendLocal([]byte("prefix"), &codec.Snapshot{Key: "k", Pipeline: "p", State: st.Learner})
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:6]) != "prefix" || b[6] != localFlat {
			t.Fatalf("%s: value %q…, want the prefix kept and the flat format", kind, b[:8])
		}
		got, err := decodeLocal(b[6:], st.Learner.Config)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !reflect.DeepEqual(got.State, st.Learner) {
			t.Errorf("%s: state changed through the local format", kind)
		}
		if _, _, err := keymodel.Restore(spec, keymodel.State{Learner: got.State}); err != nil {
			t.Errorf("%s: restore: %v", kind, err)
		}
		keep := localDecoder{keep: true} // the tier's: one State reused
		for n := range len(b) - 6 {
			if _, err := decodeLocal(b[6:6+n], st.Learner.Config); err == nil {
				t.Fatalf("%s: a value cut to %d of %d bytes decoded", kind, n, len(b)-6)
			}
			if _, err := keep.decode(b[6:6+n], st.Learner.Config); err == nil {
				t.Fatalf("%s: a value cut to %d of %d bytes decoded into a reused state", kind, n, len(b)-6)
			}
			if n%97 == 0 { // after a failed one, a whole value decodes as it was written
				got, err := keep.decode(b[6:], st.Learner.Config)
				if err != nil || !reflect.DeepEqual(got.State, st.Learner) {
					t.Fatalf("%s: after a value cut to %d bytes the reused decoder gives %v", kind, n, err)
				}
			}
		}
		bad := append([]byte(nil), b[6:]...)
		bad[1] = 0xff // the version's varint runs on
		if _, err := decodeLocal(bad, st.Learner.Config); !errors.Is(err, errLocalFormat) {
			t.Errorf("%s: corrupted value: %v, want errLocalFormat", kind, err)
		}
	}
	// A monitored model is written as its snapshot.
	pc := pipelineConfig("p")
	pc.Learner = benchLearner(16, 2, 16)
	pc.Monitor = &MonitorConfig{}
	mc, ok := pc.monitorConfig()
	if !ok {
		t.Fatal("no monitor config")
	}
	mspec := &keymodel.Spec{Learner: pc.Learner, Monitor: &mc}
	m := warmModel(t, mspec, 40)
	st := m.Snapshot()
	snap := &codec.Snapshot{Key: "k", Pipeline: "p", State: st.Learner, Monitor: st.Monitor}
	b, err := appendLocal(nil, snap)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != localSnapshot {
		t.Fatalf("monitored model written in format %q, want its snapshot", b[0])
	}
	got, err := decodeLocal(b, learners.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// What the snapshot store would give back (its codec may give an
	// empty slice as nil).
	enc, err := codec.EncodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	want, err := codec.DecodeSnapshot(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.State, st.Learner) || !reflect.DeepEqual(got.Monitor, want.Monitor) {
		t.Error("monitored model changed through the local tier")
	}
}
