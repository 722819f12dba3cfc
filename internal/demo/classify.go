package demo

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/kpcastream/kpcastream/codec"
)

// demo --classify: the demo's ellipse becomes two concentric rings, inner
// (radius 0.7) and outer (radius 1.3), labelled in y; the pipeline gets a
// classifier stage, and the status line shows the accuracy of the
// predictions published since the last line (each made before its label
// was learned).

// classifierConfig is the classifier block of the demo's pipeline
// (indented as a pipeline field), or "" without --classify.
func classifierConfig(o *Options) string {
	if !o.Classify {
		return ""
	}
	return "    classifier: {classes: [inner, outer]}\n"
}

// ring draws a ring radius and its label.
func ring(rng *rand.Rand) (float64, codec.Scalar) {
	if rng.IntN(2) == 0 {
		return 0.7 + 0.05*rng.NormFloat64(), codec.String("inner")
	}
	return 1.3 + 0.05*rng.NormFloat64(), codec.String("outer")
}

// accuracy counts the labelled predictions seen on the outputs.
type accuracy struct {
	hits, labelled         atomic.Int64
	lastHits, lastLabelled int64 // at the last status line (report goroutine only)
}

// count records an output's prediction against its label.
func (a *accuracy) count(out *codec.Output) {
	if out.Y.Kind == codec.ScalarNone || out.Pred.Kind == codec.ScalarNone {
		return
	}
	a.labelled.Add(1)
	if out.Pred.Equal(out.Y) {
		a.hits.Add(1)
	}
}

// line is the status line's accuracy since the previous line ("" when no
// labelled prediction arrived).
func (a *accuracy) line() string {
	h, n := a.hits.Load(), a.labelled.Load()
	dh, dn := h-a.lastHits, n-a.lastLabelled
	a.lastHits, a.lastLabelled = h, n
	if dn == 0 {
		return ""
	}
	return fmt.Sprintf("  accuracy %.3f (%d predictions; %.3f overall)", float64(dh)/float64(dn), dn, float64(h)/float64(n))
}
