package keymodel

import (
	"errors"
	"fmt"

	"github.com/kpcastream/kpcastream/learners"
)

// errOnZ marks an Apply on a model whose classifier is on z.
var errOnZ = errors.New("keymodel: Apply has no classifier stage on z: step such a model with LearnLabelled")

// LearnLabelled feeds one observation x of class y (−1: none) to a model
// with a classifier stage, prequentially: the learner learns x, the
// classifier predicts x's class into scores (length: the classes), then
// learns y. On the learner's coordinates the learner learns through the
// classifier; on z (Spec.OnZ) the classifier sees x's projection, and
// nothing is predicted (pred −1, scores zero) before the learner is
// ready. Unlike Apply it keeps no accuracy window and counts nothing.
func (m *Model) LearnLabelled(scores, x []float64, y int) (pred int, err error) {
	switch {
	case m.cls != nil:
		ob := m.cls.ob
		if err := ob.Learn(x); err != nil {
			return -1, err
		}
		if pred, _, err = ob.Predict(scores, x); err != nil {
			return pred, err
		}
		if y >= 0 {
			return pred, ob.Teach(y)
		}
		return pred, nil
	case m.zc != nil:
		return m.learnOnZ(scores, x, y)
	}
	return -1, fmt.Errorf("keymodel: LearnLabelled on a model without a classifier stage")
}

// learnOnZ is LearnLabelled with the classifier on z.
func (m *Model) learnOnZ(scores, x []float64, y int) (int, error) {
	if err := m.l.Learn(x); err != nil {
		return -1, err
	}
	clear(scores)
	if _, err := m.l.Transform(m.z, x); err != nil {
		if errors.Is(err, learners.ErrNotReady) {
			return -1, nil
		}
		return -1, err
	}
	pred, _, err := m.zc.Predict(scores, m.z)
	if err != nil {
		return pred, err
	}
	if y >= 0 {
		return pred, m.zc.Learn(m.z, y)
	}
	return pred, nil
}
