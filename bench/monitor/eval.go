package monitorbench

import (
	"fmt"
	"io"
	"slices"

	"github.com/kpcastream/kpcastream/internal/keymodel"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// Setup is one evaluation: N normal training samples, then runs of Run
// samples, each starting where the training ended (the process keeps
// drifting), with the fault from sample Onset on.
type Setup struct {
	N, Run, Onset int
	// K components, Budget B of the online learner, Level of the limits.
	K, Budget int
	Level     float64
	// Drift of the process per sample (0: stationary).
	Drift float64
	// Seed of the process; runs use Seed+1, Seed+2, ….
	Seed uint64
	// TrendLambda of the online learner's trend gate (0: the default).
	TrendLambda float64
	// Plant is the process and its faults; nil: the Dong–McAvoy process
	// (Process) with Drift and Faults.
	Plant *Plant
}

// Plant is a simulated process with its faults.
type Plant struct {
	Name string
	Dim  int
	// New returns the sampler of a run drawn with seed, starting at
	// sample start of the process's time.
	New    func(seed uint64, start int) func(x []float64)
	Faults []Fault
}

// plant returns s.Plant or the Dong–McAvoy process with s.Drift.
func (s Setup) plant() *Plant {
	if s.Plant != nil {
		return s.Plant
	}
	return &Plant{Name: "dong-mcavoy", Dim: 3, Faults: Faults,
		New: func(seed uint64, start int) func([]float64) { return shifted(seed, s.Drift, start).Next }}
}

// draw draws n samples of next (n×d) with fault f from onset on (nil: normal).
func draw(next func([]float64), d, n, onset int, f *Fault) []float64 {
	out := make([]float64, d*n)
	for i := range n {
		x := out[d*i : d*(i+1)]
		next(x)
		if f != nil && i >= onset {
			f.Apply(x, i-onset)
		}
	}
	return out
}

// Method is one monitoring method: Train learns the normal training
// samples, then Clone gives an independent copy to score a run with
// (online methods go on learning during the run, so every run starts from
// the trained state).
type Method interface {
	Name() string
	Train(x []float64, n int) error
	Clone() (Method, error)
	// Score scores one sample; alarm is the method's own verdict
	// (monitor.AlarmNone for a method without limits of its own).
	Score(x []float64) (spe, t2 float64, alarm monitor.Alarm, err error)
}

// Row is the figures of one method on one fault (or on normal data).
type Row struct {
	Method, Fault string
	// DetSPE and DetT2 are the shares of samples after the onset above the
	// limits drawn from a normal run (the 99 % quantile of the method's own
	// statistics on it, as an outside checker does); FA is the share of
	// the samples before the onset above either of them.
	DetSPE, DetT2, FA float64
	// Delay is the number of samples from the onset to the first SPE
	// alarm (−1: none).
	Delay int
	// OwnDet and OwnFA are the same shares by the method's own alarms (the
	// online monitor's limits), −1 for a method without them.
	OwnDet, OwnFA float64
	// First and Top3 are the shares of the own alarms after the onset
	// whose contributions rank the faulty variable first and among the
	// first three (−1: no contributions, or no alarm).
	First, Top3 float64
}

// Evaluate runs every method over a normal run (for the limits) and one
// run per fault, by the same code for each method.
func Evaluate(s Setup, methods []Method) ([]Row, error) {
	p := s.plant()
	train := draw(p.New(s.Seed, 0), p.Dim, s.N, 0, nil)
	limitRun := draw(p.New(s.Seed+1, s.N), p.Dim, s.Run, s.Run, nil)
	runs := make([][]float64, len(p.Faults))
	for i := range p.Faults {
		runs[i] = draw(p.New(s.Seed+2+uint64(i), s.N), p.Dim, s.Run, s.Onset, &p.Faults[i])
	}
	var rows []Row
	for _, m := range methods {
		if err := m.Train(train, s.N); err != nil {
			return nil, fmt.Errorf("%s: train: %w", m.Name(), err)
		}
		spe, t2, own, err := scoreRun(m, limitRun, s.Run)
		if err != nil {
			return nil, err
		}
		limSPE, limT2 := quantile(spe, s.Level), quantile(t2, s.Level)
		normal := Row{Method: m.Name(), Fault: "normal", Delay: -1, OwnDet: -1, OwnFA: -1}
		normal.FA = share(spe, t2, limSPE, limT2, 0, s.Run)
		if own != nil {
			normal.OwnFA = ownShare(own, 0, s.Run)
		}
		rows = append(rows, normal)
		for i, f := range p.Faults {
			spe, t2, own, ranks, err := scoreRunRanks(m, runs[i], s.Run, f.Var)
			if err != nil {
				return nil, err
			}
			r := Row{Method: m.Name(), Fault: f.Name, Delay: -1, OwnDet: -1, OwnFA: -1}
			r.DetSPE = share(spe, nil, limSPE, 0, s.Onset, s.Run)
			r.DetT2 = share(nil, t2, 0, limT2, s.Onset, s.Run)
			r.FA = share(spe, t2, limSPE, limT2, 0, s.Onset)
			for j := s.Onset; j < s.Run; j++ {
				if spe[j] > limSPE {
					r.Delay = j - s.Onset
					break
				}
			}
			if own != nil {
				r.OwnDet = ownShare(own, s.Onset, s.Run)
				r.OwnFA = ownShare(own, 0, s.Onset)
			}
			r.First, r.Top3 = -1, -1
			if rk := ranks[s.Onset:]; own != nil && slices.ContainsFunc(rk, func(r int) bool { return r >= 0 }) {
				var first, top, n float64
				for _, k := range rk {
					if k < 0 {
						continue
					}
					n++
					if k == 0 {
						first++
					}
					if k < 3 {
						top++
					}
				}
				r.First, r.Top3 = first/n, top/n
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func shifted(seed uint64, drift float64, start int) *Process {
	p := NewProcess(seed, drift)
	p.shift = drift * float64(start)
	p.i = start
	return p
}

func scoreRun(m Method, x []float64, n int) (spe, t2 []float64, own []monitor.Alarm, err error) {
	spe, t2, own, _, err = scoreRunRanks(m, x, n, -1)
	return
}

// contributor is a method that names the variables behind its last alarm.
type contributor interface {
	Contrib() []monitor.Contribution
}

// scoreRunRanks is scoreRun that also returns, per sample, the rank of
// variable v among the contributions of an own alarm (0 first; len(top)
// when not among them; −1 without an alarm or contributions).
func scoreRunRanks(m Method, x []float64, n, v int) (spe, t2 []float64, own []monitor.Alarm, ranks []int, err error) {
	c, err := m.Clone()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ranks = make([]int, n)
	spe, t2, own = make([]float64, n), make([]float64, n), make([]monitor.Alarm, n)
	hasOwn := false
	d := len(x) / n
	for i := range n {
		var a monitor.Alarm
		spe[i], t2[i], a, err = c.Score(x[d*i : d*(i+1)])
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s: sample %d: %w", m.Name(), i, err)
		}
		own[i] = a
		hasOwn = ownLimits(c)
		ranks[i] = -1
		if cc, ok := c.(contributor); ok && a != monitor.AlarmNone && v >= 0 {
			top := cc.Contrib()
			ranks[i] = len(top)
			for k, t := range top {
				if t.Var == v {
					ranks[i] = k
					break
				}
			}
		}
	}
	if !hasOwn {
		own = nil
	}
	return spe, t2, own, ranks, nil
}

// quantile is the empirical level-quantile at rank (n+1)·level, the rule
// of the monitor's own limits.
func quantile(v []float64, level float64) float64 {
	s := slices.Sorted(slices.Values(v))
	r := float64(len(s)+1)*level - 1
	if r >= float64(len(s)-1) {
		return s[len(s)-1]
	}
	i := int(r)
	return s[i] + (r-float64(i))*(s[i+1]-s[i])
}

// share is the share of samples in [from, to) with spe > ls or t2 > lt
// (a nil slice does not count).
func share(spe, t2 []float64, ls, lt float64, from, to int) float64 {
	if to <= from {
		return 0
	}
	n := 0
	for j := from; j < to; j++ {
		if (spe != nil && spe[j] > ls) || (t2 != nil && t2[j] > lt) {
			n++
		}
	}
	return float64(n) / float64(to-from)
}

func ownShare(a []monitor.Alarm, from, to int) float64 {
	n := 0
	for j := from; j < to; j++ {
		if a[j] != monitor.AlarmNone {
			n++
		}
	}
	return float64(n) / float64(to-from)
}

// Batch is batch kernel PCA (or linear PCA, with the linear kernel) fitted
// once on the training samples, standardised by their means and standard
// deviations. Its own limits, as a user of a batch model draws them, are
// the Level-quantiles of its statistics on the training samples (0: no
// own limits).
type Batch struct {
	Label  string
	Kernel learners.Kernel
	K      int
	Level  float64
	limSPE float64
	limT2  float64
	l      *learners.Batch
	mean   []float64
	sd     []float64
	buf    []float64
	z      []float64
}

func (b *Batch) Name() string { return b.Label }

func (b *Batch) Train(x []float64, n int) error {
	d := len(x) / n
	l, err := learners.NewBatch(learners.Config{Dim: d, Components: b.K, Budget: n, Kernel: b.Kernel})
	if err != nil {
		return err
	}
	b.mean, b.sd = make([]float64, d), make([]float64, d)
	for i := range n {
		for j := range d {
			b.mean[j] += x[i*d+j] / float64(n)
		}
	}
	for i := range n {
		for j := range d {
			v := x[i*d+j] - b.mean[j]
			b.sd[j] += v * v / float64(n)
		}
	}
	for j := range d {
		b.sd[j] = max(sqrt(b.sd[j]), 1e-300)
	}
	b.buf = make([]float64, d)
	for i := range n {
		if err := l.Learn(b.std(x[i*d : (i+1)*d])); err != nil {
			return err
		}
	}
	if err := l.Fit(); err != nil {
		return err
	}
	b.l = l
	if b.Level > 0 {
		spe, t2 := make([]float64, n), make([]float64, n)
		for i := range n {
			z, nov, err := l.Score(b.z, b.std(x[i*d:(i+1)*d]))
			if err != nil {
				return err
			}
			b.z, spe[i], t2[i] = z, nov.SPE, nov.T2
		}
		b.limSPE, b.limT2 = quantile(spe, b.Level), quantile(t2, b.Level)
	}
	return nil
}

func (b *Batch) std(x []float64) []float64 {
	for j, v := range x {
		b.buf[j] = (v - b.mean[j]) / b.sd[j]
	}
	return b.buf
}

// Clone returns b: scoring does not change a batch model.
func (b *Batch) Clone() (Method, error) { return b, nil }

func (b *Batch) Score(x []float64) (float64, float64, monitor.Alarm, error) {
	z, nov, err := b.l.Score(b.z, b.std(x))
	b.z = z
	var a monitor.Alarm
	if b.Level > 0 {
		if nov.SPE > b.limSPE {
			a |= monitor.AlarmSPE
		}
		if nov.T2 > b.limT2 {
			a |= monitor.AlarmT2
		}
	}
	return nov.SPE, nov.T2, a, err
}

// ownLimits tells whether the method raises alarms of its own.
func ownLimits(m Method) bool {
	switch m := m.(type) {
	case *Online:
		return true
	case *Batch:
		return m.Level > 0
	}
	return false
}

// Online is kpcastream's online learner with its monitor, as a pipeline
// or replay runs it (running standardisation, limits, Learn always or
// normal): a key's model (internal/keymodel) stepped row by row.
type Online struct {
	Label   string
	Learner learners.Config
	Monitor monitor.Config
	km      *keymodel.Model
	l       learners.Learner
	m       *monitor.Monitor
	in, z   []float64
	contrib []monitor.Contribution
	// lim0 and llim0 are the residual limits at the end of training (0
	// without the linear residual): the fixed scales of the combined
	// residual Score returns.
	lim0, llim0 float64
	// lspeOnly makes Score return the linear residual as the SPE (what a
	// checker reading an output's lspe column sees).
	lspeOnly bool
}

// Contrib returns the contributions of the last alarm.
func (o *Online) Contrib() []monitor.Contribution { return o.contrib }

func (o *Online) Name() string { return o.Label }

// spec is the key model of o's settings.
func (o *Online) spec() *keymodel.Spec {
	c := o.Monitor
	c.Dim, c.Forget, c.Standardize = o.Learner.Dim, o.Learner.Forget, true
	c.Freeze = c.Freeze || monitor.DefaultFreeze(c.Forget)
	if c.Linear && c.LinearComponents == 0 {
		c.LinearComponents = min(o.Learner.Components, o.Learner.Dim-1)
	}
	c = c.WithDefaults(o.Learner.Budget)
	return &keymodel.Spec{Learner: o.Learner, Monitor: &c}
}

// use makes km o's model.
func (o *Online) use(km *keymodel.Model) {
	o.km, o.l, o.m = km, km.Learner(), km.Monitor()
	o.in, o.z = make([]float64, o.Learner.Dim), make([]float64, o.Learner.Components)
}

func (o *Online) Train(x []float64, n int) error {
	km, err := keymodel.New(o.spec())
	if err != nil {
		return err
	}
	o.use(km)
	d := o.Learner.Dim
	var r monitor.Result
	for i := range n {
		var err error
		if r, err = o.m.Step(o.l, nil, o.in, o.z, x[i*d:(i+1)*d]); err != nil {
			return err
		}
	}
	if v := r.Verdict; v.LSPELimit > 0 && v.SPELimit > 0 {
		o.lim0, o.llim0 = v.SPELimit, v.LSPELimit
	}
	return nil
}

func (o *Online) Clone() (Method, error) {
	c := &Online{Label: o.Label, Learner: o.Learner, Monitor: o.Monitor, lim0: o.lim0, llim0: o.llim0, lspeOnly: o.lspeOnly}
	km, _, err := keymodel.Restore(c.spec(), o.km.Snapshot())
	if err != nil {
		return nil, err
	}
	c.use(km)
	return c, nil
}

func (o *Online) Score(x []float64) (float64, float64, monitor.Alarm, error) {
	r, err := o.m.Step(o.l, nil, o.in, o.z, x)
	if err != nil || !r.Ready {
		return 0, 0, monitor.AlarmNone, fmt.Errorf("not scored: %w", err)
	}
	o.contrib = r.Contrib
	spe := r.Novelty.SPE
	if o.lspeOnly {
		spe = r.Verdict.LSPE
	} else if o.llim0 > 0 {
		// The combined residual, as a checker computes it from an
		// output's spe and lspe: the larger of the two, each in units of
		// its limit at the end of training (fixed scales).
		spe = max(spe/o.lim0, r.Verdict.LSPE/o.llim0)
	}
	return spe, r.Novelty.T2, r.Verdict.Alarm, nil
}

// Frozen is the online learner trained as Online (learn normal) and then
// never learning again: it scores every run with the trained model, the
// bound of what any gate of learn normal can keep of a fault.
type Frozen struct{ *Online }

// Clone returns a frozen copy of f.
func (f *Frozen) Clone() (Method, error) {
	c, err := f.Online.Clone()
	if err != nil {
		return nil, err
	}
	return &Frozen{c.(*Online)}, nil
}

// Score scores x with the trained model (standardised as trained) and
// learns nothing; it has no alarms of its own.
func (f *Frozen) Score(x []float64) (float64, float64, monitor.Alarm, error) {
	z, nov, err := f.l.Score(f.z, f.m.Input(f.in, x))
	f.z = z
	return nov.SPE, nov.T2, monitor.AlarmNone, err
}

// Methods returns the methods of the benchmark for s: batch kernel PCA
// and linear PCA (min(k, d − 1) components) fitted once on the training
// samples standardised by their statistics, and the online ikpca learner
// with learn always, learn normal without and with its trend gate, and
// frozen after training (Frozen), with running standardisation, with k
// components and the RBF kernel at γ = 1/d (scikit-learn's default;
// nothing is tuned to the process).
func Methods(s Setup) []Method {
	d := s.plant().Dim
	rbf := learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(d)}
	online := func(label, learn, trend string) *Online {
		return &Online{Label: label,
			Learner: learners.Config{Learner: learners.KindIKPCA, Dim: d, Components: s.K, Budget: s.Budget, Kernel: rbf, Seed: 1},
			Monitor: monitor.Config{Learn: learn, Level: s.Level, Trend: trend, TrendLambda: s.TrendLambda}}
	}
	return []Method{
		&Batch{Label: "batch KPCA", Kernel: rbf, K: s.K, Level: s.Level},
		// Linear PCA keeps at most d − 1 components, so that its SPE has a
		// residual space to measure.
		&Batch{Label: "linear PCA", Kernel: learners.Kernel{Name: learners.KernelLinear}, K: min(s.K, d-1), Level: s.Level},
		online("online always", monitor.LearnAlways, ""),
		online("online normal", monitor.LearnNormal, monitor.TrendOff),
		online("online trend", monitor.LearnNormal, monitor.TrendEWMA),
		&Frozen{online("online frozen", monitor.LearnNormal, monitor.TrendOff)},
		withLinear(online("online linear", monitor.LearnNormal, monitor.TrendEWMA)),
		lspeColumn(withLinear(online("online linear, lspe column", monitor.LearnNormal, monitor.TrendEWMA))),
	}
}

// lspeColumn scores o's runs by the linear residual alone (its own alarms
// are o's).
func lspeColumn(o *Online) *Online {
	o.lspeOnly = true
	return o
}

func withLinear(o *Online) *Online {
	o.Monitor.Linear = true
	return o
}

// WriteTable writes rows as a markdown table.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| method | fault | SPE det. | T² det. | false alarms (SPE or T²) | SPE delay | own det. | own false alarms | faulty var. first | in top 3 |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	pct := func(v float64) string {
		if v < 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f %%", 100*v)
	}
	for _, r := range rows {
		det, dt2, delay := pct(r.DetSPE), pct(r.DetT2), fmt.Sprint(r.Delay)
		if r.Fault == "normal" {
			det, dt2, delay = "—", "—", "—"
		} else if r.Delay < 0 {
			delay = "none"
		}
		first, top := pct(r.First), pct(r.Top3)
		if r.Fault == "normal" {
			first, top = "—", "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Method, r.Fault, det, dt2, pct(r.FA), delay, pct(r.OwnDet), pct(r.OwnFA), first, top)
	}
}
