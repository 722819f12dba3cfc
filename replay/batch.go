package replay

import (
	"fmt"
	"io"
	"time"

	"github.com/kpcastream/kpcastream/learners"
)

// batchOptions are the batch learner's fit options from the flags; a fit
// on the exact matrix-free product (O(n²d) per product) is announced on
// stderr before it starts.
func batchOptions(c *Config, stderr io.Writer) learners.BatchOptions {
	return learners.BatchOptions{Solver: c.Solver, Precision: c.Precision, OnPlan: func(p learners.BatchPlan) {
		if p.Product == learners.ProductBlocked {
			line := fmt.Sprintf("replay: batch fit of %d rows on the exact matrix-free product: O(n²d) per product, this can take long", p.Rows)
			if p.Note != "" {
				line += "; " + p.Note
			}
			fmt.Fprintln(stderr, line)
		}
	}}
}

// batchFitLine describes a batch fit for stderr: solver, product, its
// error bound or why a fast solver fell back, and the time taken.
func batchFitLine(f *learners.BatchFit, took time.Duration) string {
	if f == nil {
		return "replay: batch: no fit"
	}
	line := fmt.Sprintf("replay: batch fit of %d rows: solver %s, product %s", f.N, f.Solver, f.Product)
	switch {
	case f.Product == learners.ProductIFGT:
		line += fmt.Sprintf(" (approximate: each covariance eigenvalue within %.3g)", f.ErrorBound)
	default:
		line += " (exact)"
	}
	if f.Note != "" {
		line += "; " + f.Note
	}
	if f.Products > 0 {
		line += fmt.Sprintf(", %d products", f.Products)
	}
	return line + fmt.Sprintf(", %.2f s", took.Seconds())
}
