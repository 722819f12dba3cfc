package learners

// ifgtProduct is the improved fast Gauss transform product (stub).
type ifgtProduct struct {
	eps float64
}

func (g *ifgtProduct) apply(dst, v []float64) {}

func newIFGT(x []float64, n, d int, gamma, eps float64) (*ifgtProduct, string) {
	return nil, "stub"
}
