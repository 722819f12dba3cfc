package processor

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
)

// TestOutputsOwned checks the messages outputs builds: subject, id and
// content type headers and payload for a batch and then a single message,
// and that the first call's messages (queued in the output window until
// acknowledged) survive the next call unchanged although the encoding
// buffer is reused.
func TestOutputsOwned(t *testing.T) {
	pl := &pipeline{cfg: PipelineConfig{Name: "p", Output: OutputConfig{Subject: "out.{pipeline}.{key}"}}}
	e := &entry{pipe: pl, key: "k1"}
	w := &worker{}
	w.obs = obsOf([]float64{1}, []float64{2})
	w.res = applied{
		Outs: []codec.Output{
			{ID: "a", Key: "k1", Seq: 9, TS: 1.5, Z: []float64{1, 2}, SPE: 0.5, Explained: 0.9},
			{ID: "b", Key: "k1", Seq: 9, TS: 2.5, Z: []float64{3, 4}, SPE: 0.25, Explained: 0.8},
		},
		Idx: []int{0, 1},
	}
	msgs, err := w.outputs(e, codec.Msgpack, 7e9)
	if err != nil {
		t.Fatal(err)
	}
	check := func(msgs []*nats.Msg, enc codec.Encoding, ids []string, outs []codec.Output) {
		t.Helper()
		if len(msgs) != len(ids) {
			t.Fatalf("got %d messages, want %d", len(msgs), len(ids))
		}
		for i, m := range msgs {
			if m.Subject != "out.p.k1" || m.Reply != "" {
				t.Errorf("message %d: subject %q reply %q, want out.p.k1 and none", i, m.Subject, m.Reply)
			}
			if got := m.Header.Get(jetstream.MsgIDHeader); got != ids[i] {
				t.Errorf("message %d: id %q, want %q", i, got, ids[i])
			}
			if got := m.Header.Get(HeaderContentType); got != enc.ContentType() {
				t.Errorf("message %d: content type %q, want %q", i, got, enc.ContentType())
			}
			got, err := codec.DecodeOutput(m.Data, enc)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if !reflect.DeepEqual(*got, outs[i]) {
				t.Errorf("message %d: payload %+v, want %+v", i, *got, outs[i])
			}
		}
	}
	first := append([]codec.Output(nil), w.res.Outs...)
	check(msgs, codec.Msgpack, []string{"p/k1/9/0", "p/k1/9/1"}, first)
	kept := msgs
	data0 := append([]byte(nil), kept[0].Data...)

	w.obs = obsOf([]float64{3})
	w.res.Outs = []codec.Output{{ID: "c", Key: "k1", Seq: 10, TS: 3.5, Z: []float64{5, 6}, T2: 2, Explained: 0.7}}
	w.res.Idx = []int{0}
	again, err := w.outputs(e, codec.JSON, 7e9)
	if err != nil {
		t.Fatal(err)
	}
	if again[0] == msgs[0] {
		t.Error("outputs reused a message that may still be queued")
	}
	check(again, codec.JSON, []string{"p/k1/10"}, w.res.Outs)
	if !bytes.Equal(kept[0].Data, data0) {
		t.Error("a kept message's payload changed with the next outputs call")
	}
	check(kept, codec.Msgpack, []string{"p/k1/9/0", "p/k1/9/1"}, first)

	// An observation without id and ts: the output carries its message id
	// and the input message's time.
	w.res.Outs = []codec.Output{{Key: "k1", Seq: 11, Z: []float64{5, 6}}}
	stamped, err := w.outputs(e, codec.JSON, 1_715_000_000_250_000_000)
	if err != nil {
		t.Fatal(err)
	}
	check(stamped, codec.JSON, []string{"p/k1/11"}, []codec.Output{{ID: "p/k1/11", Key: "k1", Seq: 11, TS: 1715000000.25, Z: []float64{5, 6}}})
}
