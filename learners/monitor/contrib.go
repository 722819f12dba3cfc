package monitor

import (
	"math"
	"slices"
)

// TopContributions is the number of variables an alarm names
// (Result.Contrib): the largest reconstruction-based contributions.
const TopContributions = 3

// Contribution is a variable's share in an alarm.
type Contribution struct {
	// Var is the variable's index in the observation (0-based).
	Var int
	// Value is its reconstruction-based contribution: by how much the
	// alarm index (see contributions) falls when the variable alone is
	// reconstructed, in units of the limits (the index is 1 at a limit).
	Value float64
}

// contributions computes the reconstruction-based contributions (RBC,
// Alcala & Qin 2009 for PCA, 2010 for kernel PCA) of the learner's input
// x (standardised) to an alarm v, and returns the TopContributions
// largest, largest first, in m's buffer (valid until the next Step).
//
// The alarm index is I(x) = Σ s(x)/δₛ over the statistics s above their
// limits δₛ at the alarmed x (the kernel SPE, the linear residual, T²),
// and when the linear residual's per-variable EWMA is above its limit,
// each variable's own EWMA statistic over that limit is added to its
// contribution (the EWMA is a chart per variable, its own diagnosis);
// so that I ≥ 1 on an alarm; the same terms, continuous, at every probe
// (on the replay below, a term dropped once below its limit tied every
// variable that could bring it there: x₃ first on 58 %, kept: 93 %). The RBC of variable j is I(x) − min_f I(x − f·ξⱼ): how much of
// the index a fault along ξⱼ alone explains. Alcala & Qin minimise over f
// in closed form for a quadratic index (linear PCA) and by the kernel's
// gradient for kernel PCA; here the minimisation is numerical and uses
// only the learner's current Score, so that it holds for every learner,
// its budget and its forgetting as they are when the alarm is raised
// (nothing is kept for it): a Newton step from central differences
// (f = g/H, exact for a quadratic index, so for linear PCA's SPE this is
// Alcala & Qin's RBC), and the variable set to each of 2·gridHalf + 1
// values of its normal range (its mean ± 0, 1, …, gridHalf standard
// deviations: 0 and 1 once standardised, the linear model's without
// Standardize), the lowest index of them: an RBF index is far from
// quadratic away from the data (on the Dong–McAvoy step of x₃ through
// replay, the stepped variable ranked first on 29 % of the alarms with
// the mean alone, 58 % with the grid). The quadratic model ranks every
// variable (its drop g²/(2H)); the index itself is evaluated for the
// refineContributions largest. Cost: 2d + 1 + refineContributions·(2 +
// 2·gridHalf) evaluations of the index, each a Score (O(B·d) for a
// budget-B kernel learner) plus O(d·k) for the linear residual; only on
// an alarm (BenchmarkContributions).
func (m *Monitor) contributions(l Scorer, x []float64, v Verdict) []Contribution {
	d := len(x)
	if cap(m.probe) < d {
		m.probe = make([]float64, d)
	}
	p := m.probe[:d]
	copy(p, x)
	var linSPE float64
	// A linear residual of one dimension (d − k = 1) cannot say which
	// variable: every variable alone explains all of it, so its term
	// would add the same to each (the replayed step of x₃ with the linear
	// residual on: x₃ first on 93 → 76 % of the alarms); it is left out.
	if m.lin != nil && m.lin.d-m.lin.k >= 2 && v.Alarm&AlarmSPE != 0 && v.LSPELimit > 0 && v.LSPE > v.LSPELimit {
		linSPE = m.lin.spe(x)
	}
	// The index's terms are those of the statistics above their limits at
	// x, each kept continuous as the probe moves (a term that vanished
	// once its statistic fell below its limit made every variable that
	// could bring it there score the whole index: ties on a marginal
	// alarm).
	kernelIn := -1 // unknown until the first evaluation, at x
	// An SPE alarm of a one-dimensional linear residual alone is
	// diagnosed by the kernel's SPE, below its limit or not: the only term
	// that can tell the variables apart (the replayed step of x₃: x₃
	// first on 76 → 91 % of the alarms).
	oneDim := m.lin != nil && m.lin.d-m.lin.k < 2
	index := func() float64 {
		zz, n, err := l.Score(m.zc, p)
		m.zc = zz
		if err != nil {
			return math.NaN()
		}
		if kernelIn < 0 {
			kernelIn = 0
			if v.Alarm&AlarmSPE != 0 && v.SPELimit > 0 && (n.SPE > v.SPELimit || oneDim) {
				kernelIn = 1
			}
		}
		var s float64
		if v.Alarm&AlarmSPE != 0 {
			if kernelIn == 1 {
				s += n.SPE / v.SPELimit
			}
			if linSPE > 0 {
				// The linear residual's SPE, scaled to its index over
				// its limit at x (see the comment above).
				s += m.lin.spe(p) / linSPE * v.LSPE / v.LSPELimit
			}
		}
		if v.Alarm&AlarmT2 != 0 && v.T2Limit > 0 {
			s += n.T2 / v.T2Limit
		}
		return s
	}
	i0 := index()
	m.contrib = m.contrib[:0]
	if math.IsNaN(i0) {
		return nil
	}
	// First the quadratic model of the index along every variable, from
	// central differences (2 evaluations each): its drop g²/(2H) at the
	// Newton step f = g/H (exact for a quadratic index). Then, for the
	// refineContributions largest, the index itself at that step and on
	// a grid over the variable's normal range, the lowest; a model without
	// curvature (H ≤ 0) is only refined if it ranks there.
	if cap(m.newton) < d {
		m.newton = make([]float64, d)
	}
	f := m.newton[:d]
	for j := range d {
		xj := x[j]
		h := m.step(j, xj)
		p[j] = xj + h
		ip := index()
		p[j] = xj - h
		im := index()
		p[j] = xj
		g, hh := (ip-im)/(2*h), (ip+im-2*i0)/(h*h)
		est := 0.0
		f[j] = math.NaN()
		if hh > 0 && finite(g/hh) {
			f[j] = g / hh
			est = min(g*g/(2*hh), i0)
		}
		m.contrib = append(m.contrib, Contribution{Var: j, Value: est})
	}
	sortContrib(m.contrib)
	for i := range min(refineContributions, d) {
		c := &m.contrib[i]
		j := c.Var
		best := i0
		if finite(f[j]) {
			p[j] = x[j] - f[j]
			best = minFinite(best, index())
		}
		if ref, ok := m.reference(j); ok {
			// The normal range around the mean, in steps of one standard
			// deviation (RBF indices are not quadratic away from the data).
			sd := m.spread(j)
			for k := -gridHalf; k <= gridHalf; k++ {
				p[j] = ref + float64(k)*sd
				best = minFinite(best, index())
			}
		}
		p[j] = x[j]
		c.Value = max(i0-best, 0)
	}
	if v.LEWMALimit > 0 && v.LEWMA > v.LEWMALimit && m.lin.d-m.lin.k >= 2 {
		// The linear residual's EWMA: variable j's share is eⱼ², the
		// reconstruction-based contribution of the EWMA of the residual
		// (eⱼ² = ēⱼ²/c̃ⱼ), in units of the alarming variable's limit
		// σ*²·LEWMALimit (so that it has LEWMA/LEWMALimit). One spread
		// for all: a fault along ξᵢ gives ēⱼ²/c̃ⱼ ≤ ēᵢ²/c̃ᵢ (Cauchy–Schwarz
		// on the projection C̃), which per-variable spreads would undo
		// (the 20-sensor drift, seed 2: another sensor first on 91 % of
		// the alarms). With one residual dimension every eⱼ² is the same
		// (see linSPE above) and none is added.
		sd := m.lin.alarmSpread(m.cfg.TrendLambda)
		for i := range m.contrib {
			c := &m.contrib[i]
			if e := m.lin.e[c.Var]; sd > 0 && m.lin.c[c.Var] > minShare {
				c.Value += e * e / sd / v.LEWMALimit
			}
		}
	}
	sortContrib(m.contrib)
	return m.contrib[:min(TopContributions, d)]
}

// refineContributions is the number of variables, those with the largest
// contributions by reset, that a Newton step refines.
const refineContributions = TopContributions + 2

// sortContrib sorts cs by value, largest first (ties by variable).
func sortContrib(cs []Contribution) {
	slices.SortStableFunc(cs, func(a, b Contribution) int {
		switch {
		case a.Value > b.Value:
			return -1
		case a.Value < b.Value:
			return 1
		}
		return a.Var - b.Var
	})
}

// step is the finite-difference step of variable j at value xj: a
// twentieth of a standard deviation once standardised, else a twentieth
// of the linear model's standard deviation of it, else 10⁻³·max(|xj|, 1).
func (m *Monitor) step(j int, xj float64) float64 {
	if m.cfg.Standardize {
		return 0.05
	}
	if l := m.lin; l != nil && l.w > 1 {
		if sd := math.Sqrt(l.m2[j*l.d+j] / l.w); sd > 0 {
			return 0.05 * sd
		}
	}
	return 1e-3 * max(math.Abs(xj), 1)
}

// gridHalf is the half-width, in standard deviations, of the grid of
// reconstructed values a refined contribution tries.
const gridHalf = 3

// spread is variable j's normal standard deviation in the learner's
// frame: 1 once standardised, else the linear model's.
func (m *Monitor) spread(j int) float64 {
	if m.cfg.Standardize {
		return 1
	}
	if l := m.lin; l != nil && l.w > 1 {
		return math.Sqrt(l.m2[j*l.d+j] / l.w)
	}
	return 0
}

// reference is the normal mean of variable j in the learner's frame: 0
// once standardised, the linear model's mean without; false when neither.
func (m *Monitor) reference(j int) (float64, bool) {
	if m.cfg.Standardize {
		return 0, true
	}
	if l := m.lin; l != nil && l.w > 0 {
		return l.mean[j], true
	}
	return 0, false
}

func minFinite(a, b float64) float64 {
	if finite(b) && b < a {
		return b
	}
	return a
}
