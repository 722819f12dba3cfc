package keymodel

import (
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// KeyOverhead is what a loaded key costs beside its model's arrays, in
// bytes: the model's and its parts' headers, the worker's entry and the
// machine's state of the key, their map and LRU entries, and the Go
// allocator's rounding of every array (TestBytesCoversHeap measures it).
const KeyOverhead = 4096

// Bytes is the memory one loaded key of this model holds, in bytes: the
// learner's fixed arrays (its MemoryBytes, without the working memory it
// takes from its spec's Scratch, see Spec.ScratchBytes; a learner without
// one counts 3·8·B·(B+d)), the classifier stage's, the monitor's (48·window for its
// limit windows (each statistic's ring, its sorted copy and its newest half),
// 8·(confirm + excursion)·(d + 3) for its queues,
// 8·(d² + d·(k + 2)) for a linear residual, 8·d·warmup/2 held back while
// standardising) and KeyOverhead. It depends on the configuration only,
// never on the stream, so a memory budget divided by it is the number of
// keys that fit.
func (m *Model) Bytes() int {
	n := KeyOverhead + learnerBytes(m.l, m.spec.Learner, m.ws)
	if m.cls != nil && m.cls.ob != nil {
		n += m.cls.ob.Classifier().MemoryBytes() + len(m.cls.ring)
	}
	if m.zc != nil {
		n += m.zc.MemoryBytes() + 8*len(m.z)
	}
	if m.mon != nil {
		n += monitorBytes(m.mon.Config()) + 16*len(m.in)
	}
	return n
}

// Bytes is the memory of one loaded key of s (Model.Bytes of a fresh
// model); an error when s cannot build a model.
func (s *Spec) Bytes() (int, error) {
	m, err := New(s)
	if err != nil {
		return 0, err
	}
	return m.Bytes(), nil
}

// ScratchBytes is the working memory the learners of s take from its
// Scratch (learners.ScratchBytes of its learner configuration; 0 without
// a Scratch): charged once per Scratch, not per key.
func (s *Spec) ScratchBytes() (int, error) {
	if s.Scratch == nil {
		return 0, nil
	}
	return learners.ScratchBytes(s.Learner)
}

// learnerBytes is l's MemoryBytes; for a learner without one (a wrapper
// built by Spec.NewLearner, say) that of the standard learner of its
// configuration c (sharing ws when ws is not nil), else three B×(B+d)
// arrays.
func learnerBytes(l learners.Learner, c learners.Config, ws *learners.Scratch) int {
	if n, ok := memoryBytes(l); ok {
		return n
	}
	if std, err := learners.New(c); err == nil {
		if ws != nil {
			learners.ShareScratch(std, learners.NewScratch())
		}
		if n, ok := memoryBytes(std); ok {
			return n
		}
	}
	c = c.WithDefaults()
	return 3 * 8 * c.Budget * (c.Budget + c.Dim)
}

// memoryBytes is l's own MemoryBytes, if it has one.
func memoryBytes(l learners.Learner) (int, bool) {
	switch v := l.(type) {
	case interface{ MemoryBytes() int }:
		return v.MemoryBytes(), true
	case interface{ MemoryBytes() int64 }:
		return int(v.MemoryBytes()), true
	}
	return 0, false
}

// monitorBytes is the memory of a monitor of c (defaults applied), as its
// Config documents it.
func monitorBytes(c monitor.Config) int {
	d, k := c.Dim, c.LinearComponents
	n := 48*c.Window + 8*(c.Confirm+max(c.Excursion, 0))*(d+3)
	if c.Linear {
		// The co-moment and the eigendecomposition's two d×d buffers, the
		// components, and per variable mean, shares, the EWMA's three
		// values and scratch; its limit window as the others'.
		n += 8*(3*d*d+d*(k+7)) + 48*c.Window
	}
	if c.Standardize {
		n += 8*d*c.Warmup/2 + 16*d
	}
	return n
}
