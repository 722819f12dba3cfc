package monitor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func pot(v []float64, alpha float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	iu := int(float64(n) * (1 - 10*alpha))
	u := s[iu]
	var sum float64
	var c int
	for _, x := range s[iu+1:] {
		sum += x - u
		c++
	}
	pu := float64(c) / float64(n)
	return u + sum/float64(c)*math.Log(pu/alpha)
}

func TestDiag(t *testing.T) {
	for _, gamma := range []float64{0.33, 3} {
		l := newLearner(t, 3, 2, 100, 1)
		_ = gamma
		m := newMonitor(t, Config{Learn: LearnNormal, Warmup: 1e9, Dim: 3}, 100)
		rng := rand.New(rand.NewPCG(1, 7))
		x, in, z := make([]float64, 3), make([]float64, 3), make([]float64, 2)
		var s, t2 []float64
		for i := range 11000 {
			process(rng, x)
			r, _ := m.Step(l, nil, in, z, x)
			if i >= 1000 && r.Ready {
				s = append(s, r.Novelty.SPE)
				t2 = append(t2, r.Novelty.T2)
			}
		}
		for _, v := range [][]float64{s, t2} {
			for _, w := range []int{200, 500, 1000} {
				var exE, exP float64
				var n int
				for st := 0; st+w+500 <= len(v); st += 250 {
					pe := slices.Sorted(slices.Values(v[st : st+w]))
					qe := pe[int(float64(w+1)*0.99)-1]
					qp := pot(v[st:st+w], 0.01)
					for _, y := range v[st+w : st+w+500] {
						if y > qe {
							exE++
						}
						if y > qp {
							exP++
						}
						n++
					}
				}
				t.Logf("window %d: exceed empirical %.2f %% pot %.2f %%", w, 100*exE/float64(n), 100*exP/float64(n))
			}
		}
	}
}
