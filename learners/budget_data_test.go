package learners_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

// satellite is testdata/data/satellite.csv standardised as its reference was
// (z = (x − mean)/std, population std), with scikit-learn's batch KPCA of
// all rows (rbf γ = 0.05, k = 8) from testdata/data/satellite.kpca_ref.json.
type satellite struct {
	x     []float64 // n×d standardised rows
	n, d  int
	kern  learners.Kernel
	alpha []float64 // n×k: αᵢ = yᵢ/λᵢ, the reference's unit directions uᵢ = Σⱼ αⱼᵢ(φ(xⱼ) − m)
	k     int
}

// loadSatellite reads the satellite stream and its reference from
// testdata/data at the module root (copied from the shared data directory, so that a
// fresh clone runs the test).
func loadSatellite(t testing.TB) *satellite {
	t.Helper()
	x, n, d, _, err := learnertest.LoadCSV(filepath.Join(learnertest.DataDir(t), "satellite.csv"), []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(learnertest.DataDir(t), "satellite.kpca_ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Preprocessing struct {
			Mean, Std []float64
		}
		References []struct {
			Kernel struct {
				Name  string
				Gamma float64
			}
			NComponents        int         `json:"n_components"`
			EigenvaluesKc      []float64   `json:"eigenvalues_Kc"`
			ProjectionsAllRows [][]float64 `json:"projections_all_rows"`
		}
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	r := ref.References[0]
	if len(ref.Preprocessing.Mean) != d || len(ref.Preprocessing.Std) != d || len(r.ProjectionsAllRows) != n || r.Kernel.Name != "rbf" {
		t.Fatalf("satellite reference does not match the data: %d means, %d stds, %d rows, kernel %q; want %d, %d, %d, rbf",
			len(ref.Preprocessing.Mean), len(ref.Preprocessing.Std), len(r.ProjectionsAllRows), r.Kernel.Name, d, d, n)
	}
	for i := range n {
		for j := range d {
			x[i*d+j] = (x[i*d+j] - ref.Preprocessing.Mean[j]) / ref.Preprocessing.Std[j]
		}
	}
	k := r.NComponents
	// Projections of the training rows are Y = K̃α = V·Λ^½ (scikit-learn's
	// fit_transform), so α = Y·Λ⁻¹.
	alpha := make([]float64, n*k)
	for i, row := range r.ProjectionsAllRows {
		for c := range k {
			alpha[i*k+c] = row[c] / r.EigenvaluesKc[c]
		}
	}
	return &satellite{x: x, n: n, d: d, kern: learners.Kernel{Name: learners.KernelRBF, Gamma: r.Kernel.Gamma}, alpha: alpha, k: k}
}

// similarity is kpcaeval's subspace similarity (mean cos² of the principal
// angles) of m against the reference directions U = Φ̃α, which are
// orthonormal: with W = Φ_Z A the model's directions, the cosines are the
// singular values of UᵀW(WᵀW)^-½, so their mean square is
// trace((WᵀW)⁻¹·(UᵀW)ᵀ(UᵀW))/k. UᵀW = αᵀ·H·K(X,Z)·A (centring on the X
// side, as kpcaeval). Cost O(n·p·(d + k)).
func (s *satellite) similarity(t testing.TB, m *learners.Model) float64 {
	t.Helper()
	p, d, k := m.Dims()
	if d != s.d || k != s.k {
		t.Fatalf("model is d=%d k=%d, reference d=%d k=%d", d, k, s.d, s.k)
	}
	z := make([]float64, 0, p*d)
	for _, row := range m.Points {
		z = append(z, row...)
	}
	a := mat.NewDense(p, k, nil)
	for j, row := range m.Coefficients {
		a.SetRow(j, row)
	}
	kxz := s.kern.Cross(nil, s.x, s.n, z, p, d)
	for j := range p {
		var sum float64
		for i := range s.n {
			sum += kxz[i*p+j]
		}
		sum /= float64(s.n)
		for i := range s.n {
			kxz[i*p+j] -= sum
		}
	}
	var b, utw, wtw, tmp, g mat.Dense
	b.Mul(mat.NewDense(s.n, p, kxz), a)
	utw.Mul(mat.NewDense(s.n, k, s.alpha).T(), &b)
	tmp.Mul(mat.NewDense(p, p, s.kern.Gram(nil, z, p, d)), a)
	wtw.Mul(a.T(), &tmp)
	g.Mul(utw.T(), &utw)
	var sol mat.Dense
	if err := sol.Solve(&wtw, &g); err != nil {
		t.Fatalf("similarity: WᵀW is singular: %v", err)
	}
	return math.Min(1, mat.Trace(&sol)/float64(k))
}

// shuffled returns a permutation of n rows from seed.
func shuffled(n int, seed uint64) []int {
	return rand.New(rand.NewPCG(seed, 0x5a7)).Perm(n)
}
