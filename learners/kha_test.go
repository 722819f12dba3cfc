package learners_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// khaData is a data set replayed as a shuffled stream.
type khaData struct {
	name string
	x    []float64
	n, d int
	kern learners.Kernel
}

func loadKHAData(t *testing.T, name string) khaData {
	t.Helper()
	dir := learnertest.DataDir(t)
	switch name {
	case "wine":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(dir, "wine.csv"), []string{"label"})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "wine.kpca_ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			Preprocessing struct{ Mean, Std []float64 }
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref.Preprocessing.Mean) != d || len(ref.Preprocessing.Std) != d {
			t.Fatalf("wine preprocessing has %d means and %d stds, want %d", len(ref.Preprocessing.Mean), len(ref.Preprocessing.Std), d)
		}
		for i := range n {
			for j := range d {
				x[i*d+j] = (x[i*d+j] - ref.Preprocessing.Mean[j]) / ref.Preprocessing.Std[j]
			}
		}
		return khaData{name, x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 0.02}}
	case "three_clusters":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(dir, "three_clusters.csv"), []string{"cluster"})
		if err != nil {
			t.Fatal(err)
		}
		return khaData{name, x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 10}}
	case "two_spirals":
		x, n, d, _, err := learnertest.LoadCSV(filepath.Join(dir, "two_spirals.csv"), []string{"label"})
		if err != nil {
			t.Fatal(err)
		}
		return khaData{name, x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 0.1}}
	}
	t.Fatalf("unknown data set %q", name)
	return khaData{}
}

// syntheticEllipse returns n seeded points on a noisy ellipse in d = 3.
func syntheticEllipse(seed uint64, n int) khaData {
	rng := rand.New(rand.NewPCG(seed, 1))
	const d = 3
	x := make([]float64, n*d)
	for i := range n {
		th := 2 * math.Pi * rng.Float64()
		r := 1 + 0.05*rng.NormFloat64()
		x[i*d] = 1.0*r*math.Cos(th) + 0.05*rng.NormFloat64()
		x[i*d+1] = 0.5*r*math.Sin(th) + 0.05*rng.NormFloat64()
		x[i*d+2] = 0.1 * rng.NormFloat64()
	}
	return khaData{"ellipse", x, n, d, learners.Kernel{Name: learners.KernelRBF, Gamma: 1}}
}

// passesToSimilarity streams ds through l as up to maxPasses shuffled passes
// and returns the similarity with batch KPCA of all rows after each pass.
func passesToSimilarity(t *testing.T, l learners.Learner, ds khaData, ref *learners.BatchFit, maxPasses int, seed uint64, target float64) []float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	order := make([]int, ds.n)
	for i := range order {
		order[i] = i
	}
	var sims []float64
	for range maxPasses {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			if err := l.Learn(ds.x[i*ds.d : (i+1)*ds.d]); err != nil {
				t.Fatalf("%s: Learn: %v", ds.name, err)
			}
		}
		m, err := l.Model()
		if err != nil {
			sims = append(sims, 0)
			continue
		}
		rep, err := kpcaeval.CompareFit(ref, m)
		if err != nil {
			t.Fatalf("%s: CompareFit: %v", ds.name, err)
		}
		sims = append(sims, rep.Similarity)
		if rep.Similarity >= target {
			break
		}
	}
	return sims
}

