package processor

import (
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/processor/internal/machine"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
)

// control is a request from the operations (micro service, HTTP API),
// answered on reply: op on key, or with list the worker's loaded keys.
type control struct {
	op    ops.Op // OpSnapshot with key "": every changed key of the worker
	list  bool   // list the loaded keys of pipe (only key when set)
	pipe  *pipeline
	key   string
	reply chan controlReply
}

type controlReply struct {
	data []byte
	n    int
	err  error
}

// control starts a control request: a list of the keys and a snapshot of
// every key are answered at once; the others need their key loaded (never created;
// a reset does not need to decode the key's snapshot: it may be corrupt,
// and the reset is the fix), which the machine answers with Serve.
func (w *worker) control(c *control) {
	var r controlReply
	switch {
	case c.list:
		r.data, r.err = w.listKeys(c.pipe, c.key)
	case c.op == ops.OpSnapshot && c.key == "":
		for _, k := range w.m.Keys() {
			if k.Dirty {
				w.step(machine.SaveNow{Key: k.Key})
				r.n++
			}
		}
	default:
		w.step(machine.Request{Key: c.key, ReplaceCorrupt: c.op == ops.OpReset, Ref: c})
		return
	}
	c.reply <- r
}

// serve answers a control request on its loaded key.
func (w *worker) serve(a *coreAction) {
	c := a.Ref.(*control)
	var r controlReply
	defer func() { c.reply <- r }()
	if a.Err != nil {
		r.err = a.Err
		return
	}
	e := w.keys[a.Key]
	if c.op != ops.OpSnapshot {
		if _, r.err = w.model(e); r.err != nil {
			return
		}
	}
	switch c.op {
	case ops.OpModel:
		m, err := e.m.Export()
		if err == nil {
			r.data, err = codec.EncodeModel(m)
		}
		r.err = err
	case ops.OpSnapshot:
		if k, _ := w.m.Key(a.Key); k.Dirty {
			w.step(machine.SaveNow{Key: a.Key})
			r.n = 1
		}
	case ops.OpReset:
		if r.err = e.m.Reset(); r.err != nil {
			return
		}
		// Outputs already queued (of messages applied before the reset)
		// still go out; the reset's snapshot waits for them.
		w.step(machine.Reset{Key: a.Key})
		w.log.Info("key reset", zap.String("key", c.key))
	case ops.OpAccept:
		if e.m.Accept() != nil {
			r.err = fmt.Errorf("processor: %w: pipeline %s has no monitor: section, nothing to accept", ErrBadRequest, c.pipe.cfg.Name)
			return
		}
		// The monitor's state changed outside a message: saved soon.
		w.step(machine.Reset{Key: a.Key})
		w.log.Info("key's regime accepted: its control limits start a new warm-up", zap.String("key", c.key))
	}
}

// listKeys answers the "keys" control request on the worker goroutine:
// the loaded keys of pl (only key when set), as JSON.
func (w *worker) listKeys(pl *pipeline, key string) ([]byte, error) {
	var out []KeyInfo
	for _, k := range w.m.Keys() {
		e := w.keys[k.Key]
		if e == nil || e.pipe != pl || k.Unloading || (key != "" && k.Key != key) {
			continue
		}
		seen := e.seen // in the local tier
		if e.m != nil {
			seen = e.m.Learner().Seen()
		}
		out = append(out, KeyInfo{Key: k.Key, Partition: w.num, Seen: seen, LastSeq: k.LastSeq, Stored: e.stored, Advice: e.advice})
	}
	return json.Marshal(out)
}
