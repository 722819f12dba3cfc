package learners_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// countTracker records the calls of a CoordTracker that is not a
// CoordMapper.
type countTracker struct{ rotates, drops, appends int }

func (c *countTracker) Rotate(int, float64, float64) { c.rotates++ }
func (c *countTracker) Drop(int)                     { c.drops++ }
func (c *countTracker) Append(int, float64)          { c.appends++ }

// kha with dictionary kmeans tells a tracker of each rebase: a tracker
// that cannot Map has every coordinate dropped and appended anew, so it
// never keeps weights on coordinates that changed meaning; the default
// dictionary tells it of the completion only.
func TestKHATrackedRebase(t *testing.T) {
	const b = 10
	for _, dict := range []string{"", learners.DictKMeans} {
		l, err := learners.NewKHA(learners.Config{Learner: learners.KindKHA, Dim: 2, Components: 2, Budget: b, Dictionary: dict,
			Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		var tr countTracker
		for range 8*b + 1 { // rebases at 2B, 4B, 8B
			if err := l.LearnTracked([]float64{rng.NormFloat64(), rng.NormFloat64()}, &tr); err != nil {
				t.Fatal(err)
			}
		}
		want := countTracker{appends: b}
		if dict == learners.DictKMeans {
			want = countTracker{drops: 3 * b, appends: 4 * b}
		}
		if tr != want {
			t.Errorf("dictionary %q: tracker told %+v, want %+v", dict, tr, want)
		}
	}
}
