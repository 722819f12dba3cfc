package learners

import "fmt"

// Coords writes x's whitened coordinates z = L⁻¹k_D(x) over the memorised
// set (K_DD + εI = LLᵀ) into dst[:B] and returns dst[:B]; while the set is
// not complete (the first B observations) there are no coordinates and it
// returns dst[:0]. As IKPCA.Coords: zᵀz' is the kernel on span φ(D), dst
// must have length Budget (nil is allocated), cost O(Bd + B²), the state
// is not changed.
func (l *KHA) Coords(dst, x []float64) ([]float64, error) {
	dst = prepareDst(dst, l.b)
	if err := checkInput(x, l.d); err != nil {
		return dst[:0], err
	}
	if !l.full {
		clear(dst)
		return dst[:0], nil
	}
	z := l.rows.Row(dst, x, norm2(x))
	trsvLower(l.b, l.chol, l.b, z)
	if !finiteAll(z) {
		return dst[:0], fmt.Errorf("%w: kha: coordinates are not finite", ErrNumerical)
	}
	return z, nil
}

// Budget returns B, the size of the memorised set.
func (l *KHA) Budget() int { return l.b }

// CoordTransform returns α = L⁻ᵀw for the n coordinate weight rows of w
// (stride Budget) in dst (n×m, m = B once the set is complete, else 0), as
// IKPCA.CoordTransform.
func (l *KHA) CoordTransform(dst, w []float64, n int) []float64 {
	m := 0
	if l.full {
		m = l.b
	}
	return dualWeights(dst, w, n, m, l.chol, l.b)
}

// LearnTracked is Learn, telling t of every change of coordinates: the
// completion of the memorised set, when the B coordinates appear (Append
// 0…B−1, no carry), and with Config.Dictionary "kmeans" each rebase onto
// the centroids: Map with T = L'⁻¹K(D',D)L⁻ᵀ when t is a CoordMapper,
// else every coordinate dropped (B−1…0) and appended anew without carry.
// With the default dictionary the set never changes once complete and t
// is not called again. t is not retained. A rebase told to a mapper
// allocates T's B² values (then garbage; MemoryBytes is the steady state).
func (l *KHA) LearnTracked(x []float64, t CoordTracker) error {
	was := l.full
	l.tr = t
	err := l.Learn(x)
	l.tr = nil
	if err != nil {
		return err
	}
	if !was && l.full {
		for j := range l.b {
			t.Append(j, 0)
		}
	}
	return nil
}
