package monitor_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// A learner under a monitor with gated learning and standardisation: after
// the warm-up, observations carry limits. A first observation far off the
// normal curve raises an SPE alarm; as an isolated alarm (as the tail of a
// normal process gives them) it is accepted, pending confirmation. A
// second one is not, and it discards the first: neither is learned.
func ExampleMonitor_Step() {
	l, _ := learners.New(learners.Config{Learner: learners.KindIKPCA, Dim: 2, Components: 1, Budget: 50,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 0.5}})
	m, _ := monitor.New(monitor.Config{Learn: monitor.LearnNormal, Standardize: true, Dim: 2}.WithDefaults(50))
	rng := rand.New(rand.NewPCG(1, 1))
	in, z := make([]float64, 2), make([]float64, 1)
	for range 500 { // a normal process: points near a parabola, the second variable 1000 times larger
		t := 2*rng.Float64() - 1
		m.Step(l, nil, in, z, []float64{t, 1000 * (t*t + 0.05*rng.NormFloat64())})
	}
	_, _, inForce := m.Limits()
	fmt.Println("limits in force:", inForce)
	for range 2 {
		r, _ := m.Step(l, nil, in, z, []float64{0, 1000}) // off the curve
		fmt.Println("alarm:", r.Verdict.Alarm, "accepted for learning:", r.Learned)
	}
	// Output:
	// limits in force: true
	// alarm: spe accepted for learning: true
	// alarm: spe accepted for learning: false
}
