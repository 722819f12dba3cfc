package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// SnapshotVersion is the version of the snapshot envelope written by EncodeSnapshot.
const SnapshotVersion = 1

// Snapshot is a learner's State with the metadata needed to resume it.
type Snapshot struct {
	// Key is the learner's partition key.
	Key string
	// Pipeline is the name of the pipeline the learner belongs to.
	Pipeline string
	// LastSeq is the last input stream sequence applied to State.
	LastSeq uint64
	// Epoch is the ownership epoch of the key's partition under which the
	// snapshot was written (0: written without fenced ownership, as by
	// versions before partitions existed, or for a core NATS input). A
	// processor refuses a snapshot written by a newer epoch than its own
	// and claims one written by an older epoch before it changes the key.
	Epoch uint64
	// State is the learner's state.
	State *learners.State
	// Classifier is the state of the key's classifier stage, or nil (no
	// classifier, and every snapshot written before the stage existed).
	Classifier *classify.State
	// Monitor is the state of the key's monitor (control limits, gated
	// learning, standardisation; see learners/monitor), or nil (no
	// monitoring, and every snapshot written before it existed).
	Monitor *monitor.State
}

// Envelope framing, shared by snapshots and manifests:
//
//	offset 0  3 bytes  magic "KPC"
//	       3  1 byte   kind: 'S' snapshot, 'M' manifest
//	       4  2 bytes  format version, big endian
//	       6  4 bytes  CRC-32C (Castagnoli) of the body, big endian
//	      10  4 bytes  body length in bytes, big endian
//	      14  …        body (msgpack)
const (
	headerLen    = 14
	kindSnapshot = 'S'
	kindManifest = 'M'
)

var (
	magic     = [3]byte{'K', 'P', 'C'}
	castagnol = crc32.MakeTable(crc32.Castagnoli)
)

// frame appends the envelope around body to dst.
func frame(dst []byte, kind byte, version uint16, body []byte) []byte {
	dst = append(dst, magic[:]...)
	dst = append(dst, kind)
	dst = binary.BigEndian.AppendUint16(dst, version)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, castagnol))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// unframe checks the envelope of data and returns its version and body.
func unframe(data []byte, kind byte, what string) (uint16, []byte, error) {
	if len(data) < headerLen {
		return 0, nil, malformed("%s: %d bytes is shorter than the %d-byte header", what, len(data), headerLen)
	}
	if !bytes.Equal(data[:3], magic[:]) || data[3] != kind {
		return 0, nil, malformed("%s: bad magic %q", what, data[:4])
	}
	version := binary.BigEndian.Uint16(data[4:6])
	sum := binary.BigEndian.Uint32(data[6:10])
	n := binary.BigEndian.Uint32(data[10:14])
	body := data[headerLen:]
	if uint64(n) != uint64(len(body)) {
		return version, nil, malformed("%s: header says %d body bytes, have %d", what, n, len(body))
	}
	if got := crc32.Checksum(body, castagnol); got != sum {
		return version, nil, fmt.Errorf("%w: %s: body crc32c %08x, header says %08x", ErrChecksum, what, got, sum)
	}
	return version, body, nil
}

// Wire structs of the snapshot body (version 1).
type wireSnapshot struct {
	Key      string    `msgpack:"key"`
	Pipeline string    `msgpack:"pipeline"`
	LastSeq  uint64    `msgpack:"last_seq"`
	Epoch    uint64    `msgpack:"epoch,omitempty"`
	State    wireState `msgpack:"state"`
	// Classifier is omitted when nil, so snapshots without one keep the
	// bytes of earlier versions (and those still decode).
	Classifier *wireClassifier `msgpack:"classifier,omitempty"`
	// Monitor is omitted when nil, as Classifier.
	Monitor *wireMonitor `msgpack:"monitor,omitempty"`
}

// wireMonitor is a monitor's state (learners/monitor.State); pending
// observations are flattened row-major with their dimension.
type wireMonitor struct {
	Learned int64     `msgpack:"learned"`
	Run     int64     `msgpack:"run"`
	Tokens  float64   `msgpack:"tokens"`
	Settled bool      `msgpack:"settled"`
	SPE     []float64 `msgpack:"spe"`
	T2      []float64 `msgpack:"t2"`
	Dim     int       `msgpack:"dim"`
	PendX   []float64 `msgpack:"pend_x"`
	PendSPE []float64 `msgpack:"pend_spe"`
	PendT2  []float64 `msgpack:"pend_t2"`
	Held    []float64 `msgpack:"held"`
	InW     float64   `msgpack:"in_w"`
	InMean  []float64 `msgpack:"in_mean"`
	InM2    []float64 `msgpack:"in_m2"`
	// Trend and TrendSD are the trend gate's statistic and its measured
	// spread, omitted when 0 (a monitor without the gate, or before it
	// judged), so that such snapshots keep the bytes of earlier versions;
	// earlier snapshots decode with both 0, the gate's start.
	Trend   float64 `msgpack:"trend,omitempty"`
	TrendSD float64 `msgpack:"trend_sd,omitempty"`
	// The linear residual (monitor.linear): its limit window, the pending
	// observations' values, and its model's weight, mean and co-moment
	// (d×d); omitted without it, so such snapshots keep the bytes of
	// earlier versions, and earlier snapshots decode without it (the
	// model starts empty).
	LSPE     []float64 `msgpack:"lspe,omitempty"`
	PendLSPE []float64 `msgpack:"pend_lspe,omitempty"`
	LinW     float64   `msgpack:"lin_w,omitempty"`
	LinMean  []float64 `msgpack:"lin_mean,omitempty"`
	LinM2    []float64 `msgpack:"lin_m2,omitempty"`
	LinP     []float64 `msgpack:"lin_p,omitempty"`
	LinSince int       `msgpack:"lin_since,omitempty"`
	// The linear residual's per-variable EWMA (issue 31): omitted when
	// absent; earlier snapshots decode without it (the EWMA starts anew).
	LinE   []float64 `msgpack:"lin_e,omitempty"`
	LinV   []float64 `msgpack:"lin_v,omitempty"`
	LinS   []float64 `msgpack:"lin_s,omitempty"`
	LinN   float64   `msgpack:"lin_n,omitempty"`
	LinOut bool      `msgpack:"lin_out,omitempty"`
	// The excursion rule's counters (learn normal), omitted when 0 as the
	// trend's; earlier snapshots decode with them 0.
	LTrend   float64 `msgpack:"ltrend,omitempty"`
	LTrendSD float64 `msgpack:"ltrend_sd,omitempty"`
	Clean    int64   `msgpack:"clean,omitempty"`
	ExcN     int64   `msgpack:"exc_n,omitempty"`
	Long     bool    `msgpack:"long,omitempty"`
}

func toWireMonitor(m *monitor.State) *wireMonitor {
	w := &wireMonitor{Learned: m.Learned, Run: m.Run, Tokens: m.Tokens, Settled: m.Settled, SPE: m.SPE, T2: m.T2,
		Held: m.Held, InW: m.InW, InMean: m.InMean, InM2: m.InM2, Trend: m.Trend, TrendSD: m.TrendSD, Clean: m.Clean, ExcN: m.ExcN, Long: m.Long,
		LTrend: m.LTrend, LTrendSD: m.LTrendSD}
	for _, p := range m.Pending {
		w.Dim = len(p.X)
		w.PendX = append(w.PendX, p.X...)
		w.PendSPE = append(w.PendSPE, p.SPE)
		w.PendT2 = append(w.PendT2, p.T2)
		if m.Linear != nil {
			w.PendLSPE = append(w.PendLSPE, p.LSPE)
		}
	}
	w.LSPE = m.LSPE
	if l := m.Linear; l != nil {
		w.LinW, w.LinMean, w.LinM2, w.LinP, w.LinSince = l.W, l.Mean, l.M2, l.P, l.Since
		w.LinE, w.LinV, w.LinS, w.LinN, w.LinOut = l.E, l.V, l.S, l.N, l.Out
		if w.LinMean == nil {
			w.LinMean = []float64{} // present, so that the model is restored
		}
	}
	return w
}

func fromWireMonitor(w *wireMonitor) (*monitor.State, error) {
	n := len(w.PendSPE)
	if w.Dim < 0 || w.Dim > 1<<20 || len(w.PendT2) != n || uint64(len(w.PendX)) != uint64(n)*uint64(w.Dim) || (n > 0 && w.Dim == 0) {
		return nil, malformed("snapshot: monitor with %d pending statistics, %d and %d values of dimension %d", n, len(w.PendT2), len(w.PendX), w.Dim)
	}
	m := &monitor.State{Learned: w.Learned, Run: w.Run, Tokens: w.Tokens, Settled: w.Settled, SPE: w.SPE, T2: w.T2,
		Held: w.Held, InW: w.InW, InMean: w.InMean, InM2: w.InM2, Trend: w.Trend, TrendSD: w.TrendSD, LSPE: w.LSPE,
		Clean: w.Clean, ExcN: w.ExcN, Long: w.Long, LTrend: w.LTrend, LTrendSD: w.LTrendSD}
	if len(w.PendLSPE) != 0 && len(w.PendLSPE) != n {
		return nil, malformed("snapshot: monitor with %d pending observations and %d linear residuals", n, len(w.PendLSPE))
	}
	for i := range n {
		p := monitor.Pending{X: w.PendX[i*w.Dim : (i+1)*w.Dim], SPE: w.PendSPE[i], T2: w.PendT2[i]}
		if len(w.PendLSPE) == n {
			p.LSPE = w.PendLSPE[i]
		}
		m.Pending = append(m.Pending, p)
	}
	if w.LinMean != nil || w.LinM2 != nil || w.LinW != 0 {
		m.Linear = &monitor.LinearState{W: w.LinW, Mean: w.LinMean, M2: w.LinM2, P: w.LinP, Since: w.LinSince,
			E: w.LinE, V: w.LinV, S: w.LinS, N: w.LinN, Out: w.LinOut}
	}
	return m, nil
}

// wireLoss is a classifier loss as the snapshot writes it: "" for the
// default (squared), so such snapshots are byte-identical to those written
// before the option existed.
func wireLoss(loss string) string {
	if loss == classify.LossSquared {
		return ""
	}
	return loss
}

// wireClassifier is a classifier stage's state: its config, the labelled
// observations learned, W (classes×(dim+1)) and P ((dim+1)×(dim+1)),
// row-major.
type wireClassifier struct {
	Classes int     `msgpack:"classes"`
	Dim     int     `msgpack:"dim"`
	Ridge   float64 `msgpack:"ridge"`
	Forget  float64 `msgpack:"forget"`
	// Loss is omitted when "" or "squared" (the default), so those
	// snapshots keep their bytes and older ones read as squared.
	Loss string    `msgpack:"loss,omitempty"`
	Seen int64     `msgpack:"seen"`
	W    []float64 `msgpack:"w"`
	P    []float64 `msgpack:"p"`
}

type wireState struct {
	Version  int                   `msgpack:"version"`
	Kind     string                `msgpack:"kind"`
	Config   wireConfig            `msgpack:"config"`
	Seen     int64                 `msgpack:"seen"`
	Ints     sortedMap[int64]      `msgpack:"ints"`
	Scalars  sortedMap[float64]    `msgpack:"scalars"`
	Matrices sortedMap[wireMatrix] `msgpack:"matrices"`
}

// sortedMap is a map that msgpack encodes with its keys in increasing
// order, so that equal maps give equal bytes (the encoder's SetSortMapKeys
// only covers a few map types). It decodes as a plain map.
type sortedMap[V any] map[string]V

// EncodeMsgpack implements msgpack.CustomEncoder.
func (m sortedMap[V]) EncodeMsgpack(e *msgpack.Encoder) error {
	if m == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := e.EncodeString(k); err != nil {
			return err
		}
		if err := e.Encode(m[k]); err != nil {
			return err
		}
	}
	return nil
}

type wireMatrix struct {
	Rows int       `msgpack:"rows"`
	Cols int       `msgpack:"cols"`
	Data []float64 `msgpack:"data"`
}

type wireConfig struct {
	Learner      string     `msgpack:"learner"`
	Dim          int        `msgpack:"dim"`
	Components   int        `msgpack:"components"`
	Budget       int        `msgpack:"budget"`
	Kernel       wireKernel `msgpack:"kernel"`
	Forget       float64    `msgpack:"forget"`
	Admission    string     `msgpack:"admission"`
	Eviction     string     `msgpack:"eviction"`
	Tolerance    float64    `msgpack:"tolerance"`
	SwapRatio    float64    `msgpack:"swap_ratio,omitempty"`
	Coherence    float64    `msgpack:"coherence"`
	Jitter       float64    `msgpack:"jitter"`
	LearningRate float64    `msgpack:"learning_rate"`
	Decay        float64    `msgpack:"decay"`
	Rule         string     `msgpack:"rule,omitempty"`       // kha; "" is the default (gha)
	Beta         float64    `msgpack:"beta,omitempty"`       // kha gha β; 0 is the default (1)
	Gain         string     `msgpack:"gain,omitempty"`       // kha gain schedule; "" is the default (et)
	Dictionary   string     `msgpack:"dictionary,omitempty"` // kha memorised set; "" is the default (first)
	Refresh      int        `msgpack:"refresh"`
	Seed         uint64     `msgpack:"seed"`
}

type wireKernel struct {
	Name   string  `msgpack:"name"`
	Gamma  float64 `msgpack:"gamma"`
	Coef0  float64 `msgpack:"coef0"`
	Degree int     `msgpack:"degree"`
}

// EncodeSnapshot encodes s in the snapshot envelope (version
// SnapshotVersion): a 14-byte header (magic "KPCS", version, CRC-32C and
// length of the body) and a msgpack body holding the key, pipeline, last
// sequence, epoch (omitted when 0, so snapshots of earlier versions keep
// their bytes), the State, the classifier state and the monitor state
// (each omitted when nil). Map keys are sorted, so equal snapshots give
// equal bytes. s.State must not be nil.
func EncodeSnapshot(s *Snapshot) ([]byte, error) {
	if s == nil || s.State == nil {
		return nil, fmt.Errorf("codec: encode snapshot: nil state")
	}
	w := wireSnapshot{Key: s.Key, Pipeline: s.Pipeline, LastSeq: s.LastSeq, Epoch: s.Epoch, State: toWireState(s.State)}
	if c := s.Classifier; c != nil {
		w.Classifier = &wireClassifier{Classes: c.Config.Classes, Dim: c.Config.Dim, Ridge: c.Config.Ridge, Forget: c.Config.Forget,
			Loss: wireLoss(c.Config.Loss),
			Seen: c.Seen, W: c.W, P: c.P}
	}
	if m := s.Monitor; m != nil {
		w.Monitor = toWireMonitor(m)
	}
	body, err := marshalSorted(&w)
	if err != nil {
		return nil, fmt.Errorf("codec: encode snapshot: %w", err)
	}
	return frame(make([]byte, 0, headerLen+len(body)), kindSnapshot, SnapshotVersion, body), nil
}

// DecodeSnapshot decodes an envelope written by EncodeSnapshot. An unknown
// envelope version gives ErrVersion, a body that does not match its
// checksum ErrChecksum, and anything else wrong ErrMalformed (including a
// matrix whose data length is not rows×cols). It does not check the state
// against a learner: Restore does that.
func DecodeSnapshot(data []byte) (*Snapshot, error) {
	version, body, err := unframe(data, kindSnapshot, "snapshot")
	if err != nil {
		return nil, err
	}
	if version != SnapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d (this build reads %d)", ErrVersion, version, SnapshotVersion)
	}
	var w wireSnapshot
	if err := unmarshalStrict(body, &w); err != nil {
		return nil, fmt.Errorf("%w: snapshot body: %w", ErrMalformed, err)
	}
	st, err := fromWireState(&w.State)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Key: w.Key, Pipeline: w.Pipeline, LastSeq: w.LastSeq, Epoch: w.Epoch, State: st}
	if c := w.Classifier; c != nil {
		// Shapes are checked here; values (finiteness, config) by Restore.
		if c.Classes < 0 || c.Dim < 0 || c.Classes > 1<<20 || c.Dim > 1<<20 ||
			uint64(len(c.W)) != uint64(c.Classes)*uint64(c.Dim+1) || uint64(len(c.P)) != uint64(c.Dim+1)*uint64(c.Dim+1) {
			return nil, malformed("snapshot: classifier of %d classes and dim %d with %d weights and %d covariance values", c.Classes, c.Dim, len(c.W), len(c.P))
		}
		snap.Classifier = &classify.State{Config: classify.Config{Classes: c.Classes, Dim: c.Dim, Ridge: c.Ridge, Forget: c.Forget, Loss: c.Loss},
			Seen: c.Seen, W: c.W, P: c.P}
	}
	if m := w.Monitor; m != nil {
		if snap.Monitor, err = fromWireMonitor(m); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

func marshalSorted(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unmarshalStrict decodes the msgpack body into v: unknown fields and
// trailing bytes are errors. The library sizes maps and slices from the
// lengths in the data, so body is first checked with the codec's own
// bounded walker (every length must fit in the bytes that follow, nesting
// at most maxDepth): a 20-byte body claiming a map of 2³² entries used to
// cost seconds and gigabytes (found by FuzzDecodeSnapshot).
func unmarshalStrict(body []byte, v any) error {
	p := mpParser{d: obsDecoder{elem: -1}, b: body, noExt: true}
	if err := p.skip(0); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": "))
	}
	if p.i != len(body) {
		return fmt.Errorf("%d trailing bytes", len(body)-p.i)
	}
	r := bytes.NewReader(body)
	dec := msgpack.NewDecoder(r)
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d trailing bytes", r.Len())
	}
	return nil
}

func toWireState(s *learners.State) wireState {
	c := s.Config
	w := wireState{
		Version: s.Version,
		Kind:    s.Kind,
		Config: wireConfig{
			Learner: c.Learner, Dim: c.Dim, Components: c.Components, Budget: c.Budget,
			Kernel: wireKernel{Name: c.Kernel.Name, Gamma: c.Kernel.Gamma, Coef0: c.Kernel.Coef0, Degree: c.Kernel.Degree},
			Forget: c.Forget, Admission: c.Admission, Eviction: c.Eviction, Tolerance: c.Tolerance, SwapRatio: c.SwapRatio,
			Coherence: c.Coherence, Jitter: c.Jitter, LearningRate: c.LearningRate, Decay: c.Decay,
			Rule: c.Rule, Beta: c.Beta, Gain: c.Gain, Dictionary: c.Dictionary, Refresh: c.Refresh, Seed: c.Seed,
		},
		Seen:    s.Seen,
		Ints:    s.Ints,
		Scalars: s.Scalars,
	}
	if s.Matrices != nil {
		w.Matrices = make(sortedMap[wireMatrix], len(s.Matrices))
		for name, m := range s.Matrices {
			w.Matrices[name] = wireMatrix{Rows: m.Rows, Cols: m.Cols, Data: m.Data}
		}
	}
	return w
}

func fromWireState(w *wireState) (*learners.State, error) {
	c := w.Config
	s := &learners.State{
		Version: w.Version,
		Kind:    w.Kind,
		Config: learners.Config{
			Learner: c.Learner, Dim: c.Dim, Components: c.Components, Budget: c.Budget,
			Kernel: learners.Kernel{Name: c.Kernel.Name, Gamma: c.Kernel.Gamma, Coef0: c.Kernel.Coef0, Degree: c.Kernel.Degree},
			Forget: c.Forget, Admission: c.Admission, Eviction: c.Eviction, Tolerance: c.Tolerance, SwapRatio: c.SwapRatio,
			Coherence: c.Coherence, Jitter: c.Jitter, LearningRate: c.LearningRate, Decay: c.Decay,
			Rule: c.Rule, Beta: c.Beta, Gain: c.Gain, Dictionary: c.Dictionary, Refresh: c.Refresh, Seed: c.Seed,
		},
		Seen:    w.Seen,
		Ints:    w.Ints,
		Scalars: w.Scalars,
	}
	if w.Matrices != nil {
		s.Matrices = make(map[string]learners.Matrix, len(w.Matrices))
		for name, m := range w.Matrices {
			if m.Rows < 0 || m.Cols < 0 || uint64(len(m.Data)) != uint64(m.Rows)*uint64(m.Cols) {
				return nil, malformed("snapshot: matrix %q is %d×%d with %d values", name, m.Rows, m.Cols, len(m.Data))
			}
			s.Matrices[name] = learners.Matrix{Rows: m.Rows, Cols: m.Cols, Data: m.Data}
		}
	}
	return s, nil
}
