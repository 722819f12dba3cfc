package kpcaeval_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
)

// ring returns n seeded rows in d ≥ 2 dimensions: a noisy ellipse in the
// first two coordinates plus small isotropic noise.
func ring(seed uint64, n, d int) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float64, n*d)
	for i := range n {
		th := 2 * math.Pi * rng.Float64()
		row := x[i*d : (i+1)*d]
		for j := range row {
			row[j] = 0.05 * rng.NormFloat64()
		}
		row[0] += math.Cos(th)
		row[1] += 0.6 * math.Sin(th)
	}
	return x
}

var rbf = learners.Kernel{Name: learners.KernelRBF, Gamma: 1}

func fitModel(t *testing.T, kern learners.Kernel, x []float64, n, d, k int) (*learners.BatchFit, *learners.Model) {
	t.Helper()
	fit, err := learners.FitBatch(kern, x, n, d, k)
	if err != nil {
		t.Fatal(err)
	}
	return fit, fit.Model(learners.KindBatch, int64(n))
}

func TestCompareSelf(t *testing.T) {
	const n, d, k = 120, 3, 4
	x := ring(1, n, d)
	fit, m := fitModel(t, rbf, x, n, d, k)
	rep, err := kpcaeval.Compare(m, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rep.Cosines {
		if math.Abs(c-1) > 1e-9 {
			t.Errorf("cosine %d = %.15g, want 1", i, c)
		}
	}
	if math.Abs(rep.Similarity-1) > 1e-9 {
		t.Errorf("similarity %.15g, want 1", rep.Similarity)
	}
	for i, e := range rep.EigRelErr {
		if e > 1e-12 {
			t.Errorf("eigenvalue %d relative error %.3g, want 0", i, e)
		}
	}
	if math.Abs(rep.ReconError-rep.ReconErrorBatch) > 1e-9*rep.ReconErrorBatch {
		t.Errorf("reconstruction error %.15g, batch %.15g: want equal", rep.ReconError, rep.ReconErrorBatch)
	}
	wantGap := (fit.Eigenvalues[k-1] - fit.Next) / fit.Eigenvalues[k-1]
	if rep.Gap != wantGap || !(rep.Gap > 0 && rep.Gap < 1) {
		t.Errorf("gap %v, want %v in (0, 1)", rep.Gap, wantGap)
	}
	if !(rep.ReconErrorBatch > 0) {
		t.Errorf("batch reconstruction error %v, want > 0", rep.ReconErrorBatch)
	}
}

// TestCompareInvariances: offsets do not matter, a rotation within the
// subspace keeps every cosine at 1, and a component along the feature-space
// mean lowers them.
func TestCompareInvariances(t *testing.T) {
	const n, d, k = 100, 3, 3
	x := ring(2, n, d)
	_, m := fitModel(t, rbf, x, n, d, k)
	base, err := kpcaeval.Compare(m, x, n, d)
	if err != nil {
		t.Fatal(err)
	}

	shifted := cloneModel(m)
	for i := range shifted.Offsets {
		shifted.Offsets[i] += 3.5
	}
	rep, err := kpcaeval.Compare(shifted, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Similarity != base.Similarity || rep.ReconError != base.ReconError {
		t.Errorf("offsets changed the report: similarity %v → %v, recon %v → %v", base.Similarity, rep.Similarity, base.ReconError, rep.ReconError)
	}

	rotated := cloneModel(m)
	c, s := math.Cos(0.7), math.Sin(0.7)
	for _, row := range rotated.Coefficients {
		a0, a1 := row[0], row[1]
		row[0], row[1] = c*a0-s*a1, s*a0+c*a1
	}
	rep, err = kpcaeval.Compare(rotated, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rep.Similarity-1) > 1e-9 {
		t.Errorf("rotation within the subspace: similarity %.15g, want 1", rep.Similarity)
	}
	if math.Abs(rep.ReconError-base.ReconError) > 1e-9 {
		t.Errorf("rotation within the subspace: recon %.15g, want %.15g", rep.ReconError, base.ReconError)
	}

	// Adding t to every coefficient of component 0 adds t·n·m to w₀.
	meaned := cloneModel(m)
	for _, row := range meaned.Coefficients {
		row[0] += 0.05
	}
	rep, err = kpcaeval.Compare(meaned, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	if !(rep.Similarity < 0.95) || rep.Cosines[k-1] > 0.9 {
		t.Errorf("mean component: similarity %.4g (cosines %.4g), want < 0.95 and the smallest cosine < 0.9", rep.Similarity, rep.Cosines)
	}
	if !(rep.ReconError > base.ReconError) {
		t.Errorf("mean component: recon %v, want > %v", rep.ReconError, base.ReconError)
	}
}

// TestCompareWrongModels: a model whose coefficients belong to another
// kernel, and random coefficients, score clearly below 1.
func TestCompareWrongModels(t *testing.T) {
	const n, d, k = 120, 3, 4
	x := ring(3, n, d)
	_, other := fitModel(t, learners.Kernel{Name: learners.KernelRBF, Gamma: 25}, x, n, d, k)
	other.Kernel = rbf // coefficients fitted for γ = 25, evaluated as γ = 1
	rep, err := kpcaeval.Compare(other, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("other kernel: similarity %.4f cosines %.4f", rep.Similarity, rep.Cosines)
	if !(rep.Similarity < 0.97) {
		t.Errorf("other kernel: similarity %.4g, want < 0.97", rep.Similarity)
	}

	// A model fitted to the same ellipse turned by 90°.
	turned := make([]float64, len(x))
	for i := range n {
		row, out := x[i*d:(i+1)*d], turned[i*d:(i+1)*d]
		copy(out, row)
		out[0], out[1] = -row[1], row[0]
	}
	_, rot := fitModel(t, rbf, turned, n, d, k)
	rep, err = kpcaeval.Compare(rot, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("turned data: similarity %.4f cosines %.4f", rep.Similarity, rep.Cosines)
	if !(rep.Similarity < 0.8) {
		t.Errorf("turned data: similarity %.4g, want < 0.8", rep.Similarity)
	}

	_, m := fitModel(t, rbf, x, n, d, k)
	rng := rand.New(rand.NewPCG(4, 4))
	for _, row := range m.Coefficients {
		for i := range row {
			row[i] = rng.NormFloat64()
		}
	}
	rep, err = kpcaeval.Compare(m, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("random coefficients: similarity %.4f cosines %.4f recon %.4f batch %.4f", rep.Similarity, rep.Cosines, rep.ReconError, rep.ReconErrorBatch)
	if !(rep.Similarity < 0.8) {
		t.Errorf("random coefficients: similarity %.4g, want < 0.8", rep.Similarity)
	}
	if !(rep.ReconError > rep.ReconErrorBatch) {
		t.Errorf("random coefficients: recon %v, want > batch %v", rep.ReconError, rep.ReconErrorBatch)
	}
	sim, err := kpcaeval.Similarity(m, x, n, d)
	if err != nil || sim != rep.Similarity {
		t.Errorf("Similarity = %v, %v; want %v, nil", sim, err, rep.Similarity)
	}
}

func TestCompareErrors(t *testing.T) {
	const n, d, k = 40, 3, 2
	x := ring(5, n, d)
	_, m := fitModel(t, rbf, x, n, d, k)
	if _, err := kpcaeval.Compare(m, x[:n*2], n, 2); !errors.Is(err, learners.ErrDimension) {
		t.Errorf("wrong dimension: got %v, want ErrDimension", err)
	}
	bad := cloneModel(m)
	bad.Coefficients[0][0] = math.NaN()
	if _, err := kpcaeval.Compare(bad, x, n, d); !errors.Is(err, learners.ErrState) {
		t.Errorf("NaN coefficient: got %v, want ErrState", err)
	}
	nanX := append([]float64(nil), x...)
	nanX[5] = math.Inf(1)
	if _, err := kpcaeval.Compare(m, nanX, n, d); !errors.Is(err, learners.ErrNonFinite) {
		t.Errorf("Inf in rows: got %v, want ErrNonFinite", err)
	}
	if _, err := kpcaeval.Compare(nil, x, n, d); err == nil {
		t.Error("nil model: got nil error")
	}
}

func cloneModel(m *learners.Model) *learners.Model {
	c := *m
	c.Points = make([][]float64, len(m.Points))
	c.Coefficients = make([][]float64, len(m.Coefficients))
	for j := range m.Points {
		c.Points[j] = append([]float64(nil), m.Points[j]...)
		c.Coefficients[j] = append([]float64(nil), m.Coefficients[j]...)
	}
	c.Offsets = append([]float64(nil), m.Offsets...)
	c.Eigenvalues = append([]float64(nil), m.Eigenvalues...)
	return &c
}
