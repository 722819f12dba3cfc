package monitorbench

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// TestSatelliteFaults is a second, real data set with the checker's
// settings (k 20, B 200, rbf γ = 1/d, 500 normal rows to learn, runs of
// 960 rows with the fault from row 160): the 36 variables of satellite.csv
// in a random order, faults added to one variable (steps of 1 and 3
// standard deviations, a ramp of 0.01 standard deviations per row). It
// prints SPE detection for batch KPCA and the online learner (learn always,
// learn normal without and with its trend gate), limits from a normal
// run, and checks the false alarms before the onset. On a ramp this slow,
// relative to the spread of this data's SPE, gated learning without the
// trend gate follows the ramp as it follows slow normal drift
// (bench/RESULTS.md §10); with it, it must see the ramp about as batch
// KPCA does.
func TestSatelliteFaults(t *testing.T) {
	det := satellite(t, 0, false, true)
	// The trend gate (the default of learn normal) must catch the slow
	// ramp that learn normal without it absorbs: at least 80 % of batch
	// KPCA's detection and three times that without it.
	on, off, batch := det["online trend ramp-0.01sd"], det["online normal ramp-0.01sd"], det["batch KPCA ramp-0.01sd"]
	if on < 0.8*batch || on < 3*off {
		t.Errorf("slow ramp: trend gate detects %.3f, without it %.3f, batch KPCA %.3f: want ≥ 80 %% of batch and ≥ 3× without", on, off, batch)
	}
	// With the linear residual (the default since issue 31's third round),
	// scored by the combined residual: the faults of one variable are
	// what it is for; measured 87.5 % of the ramp (batch KPCA 53.7 %),
	// 19.4 % of the 1-sd step (1.4 % without), 100 % of the 3-sd step
	// (5.5 %). It must not see less than without it.
	lin := satellite(t, 0, true, true)
	for _, f := range []string{"ramp-0.01sd", "step-1sd", "step-3sd"} {
		if l, k := lin["online trend "+f], det["online trend "+f]; l < k {
			t.Errorf("%s: with the linear residual %.3f, without %.3f: want at least as much", f, l, k)
		}
	}
}

// satellite runs the satellite evaluation with the trend gate's EWMA
// weight lambda (0: the default), the linear residual when linear, and returns the SPE detection by method
// and fault ("online trend ramp-0.01sd"); verbose logs each figure.
func satellite(t *testing.T, lambda float64, linear, verbose bool) map[string]float64 {
	x, n, d, _, err := learnertest.LoadCSV(filepath.Join("..", "..", "testdata", "data", "satellite.csv"), []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	perm := rand.New(rand.NewPCG(3, 3)).Perm(n)
	row := func(i int) []float64 { return slices.Clone(x[perm[i]*d : (perm[i]+1)*d]) }
	const N, R, onset = 500, 960, 160
	var train, normal []float64
	for i := range N {
		train = append(train, row(i)...)
	}
	for i := range R {
		normal = append(normal, row(N+i)...)
	}
	sd := make([]float64, d)
	for j := range d {
		var m, q float64
		for i := range N {
			m += train[i*d+j] / N
		}
		for i := range N {
			q += (train[i*d+j] - m) * (train[i*d+j] - m) / N
		}
		sd[j] = math.Sqrt(q)
	}
	faults := []Fault{
		{"step-1sd", 3, func(x []float64, _ int) { x[3] += sd[3] }},
		{"step-3sd", 10, func(x []float64, _ int) { x[10] += 3 * sd[10] }},
		{"ramp-0.01sd", 20, func(x []float64, a int) { x[20] += 0.01 * float64(a+1) * sd[20] }},
	}
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(d)}
	online := func(label, learn, trend string) *Online {
		return &Online{Label: label, Learner: learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: 20, Budget: 200, Kernel: rbf, Seed: 1},
			Monitor: monitor.Config{Learn: learn, Trend: trend, TrendLambda: lambda, Linear: linear}}
	}
	ramp := map[string]float64{}
	for _, m := range []Method{&Batch{Label: "batch KPCA", Kernel: rbf, K: 20}, online("online always", monitor.LearnAlways, ""),
		online("online normal", monitor.LearnNormal, monitor.TrendOff), online("online trend", monitor.LearnNormal, monitor.TrendEWMA)} {
		if err := m.Train(train, N); err != nil {
			t.Fatal(err)
		}
		spe, _, _, err := scoreRun(m, normal, R)
		if err != nil {
			t.Fatal(err)
		}
		limit := quantile(spe, 0.99)
		for i, f := range faults {
			var run []float64
			for j := range R {
				r := row(N + R + i*R + j)
				if j >= onset {
					f.Apply(r, j-onset)
				}
				run = append(run, r...)
			}
			spe, _, _, err := scoreRun(m, run, R)
			if err != nil {
				t.Fatal(err)
			}
			det, fa := share(spe, nil, limit, 0, onset, R), share(spe, nil, limit, 0, 0, onset)
			if verbose {
				t.Logf("linear %-5v %-13s %-11s SPE detection %5.1f %%, false alarms before the onset %.1f %%", linear, m.Name(), f.Name, 100*det, 100*fa)
			}
			ramp[m.Name()+" "+f.Name] = det
			if fa > 0.03 {
				t.Errorf("%s, %s: %.1f %% false alarms before the onset, want ≤ 3 %%", m.Name(), f.Name, 100*fa)
			}
		}
	}
	return ramp
}
