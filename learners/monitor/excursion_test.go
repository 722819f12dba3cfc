package monitor

import (
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// echo is a Scorer whose SPE is the observation's first value and whose
// T² is its second; it records what it learned.
type echo struct{ learned [][]float64 }

func (e *echo) Learn(x []float64) error {
	e.learned = append(e.learned, append([]float64(nil), x...))
	return nil
}

func (e *echo) Score(dst, x []float64) ([]float64, learners.Novelty, error) {
	return dst, learners.Novelty{SPE: x[0], T2: x[1]}, nil
}

// TestExcursion checks the excursion rule of learn normal: a run of
// alarms no longer than Excursion, followed by 2·Confirm observations
// without alarm, is learned (and enters the limit windows); a longer run
// is discarded with everything pending, and alarms are not queued again
// until Confirm observations without alarm have passed; with Excursion
// negative every unadmitted alarm discards the pending observations.
func TestExcursion(t *testing.T) {
	run := func(excursion, alarms int) (learnedAlarms int, m *Monitor) {
		m = newMonitor(t, Config{Learn: LearnNormal, Trend: TrendOff, Dim: 2, Warmup: 200, Excursion: excursion}, 100)
		e := &echo{}
		rng := rand.New(rand.NewPCG(1, 1))
		in, z := make([]float64, 2), make([]float64, 1)
		step := func(spe float64) Result {
			r, err := m.Step(e, nil, in, z, []float64{spe, rng.Float64()})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		for range 1500 {
			step(rng.Float64())
		}
		m.st.Tokens = 0 // no alarm admitted by a token: the rule alone
		for i := range alarms {
			if r := step(10 + float64(i)); r.Verdict.Alarm&AlarmSPE == 0 {
				t.Fatalf("observation %d of the run: no alarm", i)
			}
		}
		for range 3 * m.cfg.Confirm {
			step(0.5 * rng.Float64())
		}
		for _, x := range e.learned {
			if x[0] >= 10 {
				learnedAlarms++
			}
		}
		return learnedAlarms, m
	}
	if n, m := run(0, 20); n != 20 {
		t.Errorf("an excursion of 20 alarms (default Excursion %d): %d learned, want 20", m.cfg.Excursion, n)
	} else if m.spe.sorted[m.spe.len()-1] < 29 {
		t.Errorf("an excursion of 20 alarms: largest SPE in the limit window %v, want the excursion's (≥ 29)", m.spe.sorted[m.spe.len()-1])
	}
	if n, m := run(0, DefaultExcursion+1); n != 0 || m.st.Long {
		t.Errorf("a run of %d alarms: %d learned (long %v after it), want 0 (and queued again after Confirm clean ones)", DefaultExcursion+1, n, m.st.Long)
	}
	if n, _ := run(-1, 5); n != 0 {
		t.Errorf("excursion -1: a run of 5 alarms: %d learned, want 0", n)
	}
}
