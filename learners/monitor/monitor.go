package monitor

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/learners"
)

// Learning modes of Config.Learn.
const (
	// LearnAlways learns every observation, then scores it (the default).
	LearnAlways = "always"
	// LearnNormal scores first and learns only observations within the limits.
	LearnNormal = "normal"
)

// Trend gates of Config.Trend.
const (
	// TrendOff learns every observation within the limits (no trend gate).
	TrendOff = "off"
	// TrendEWMA also stops learning while the EWMA of the SPE's rank in
	// its limit window is above its limit (see the package comment).
	TrendEWMA = "ewma"
)

// Defaults.
const (
	// DefaultLevel is the default level of the limits.
	DefaultLevel = 0.99
	// MinWarmup is the smallest default warm-up (see DefaultWarmup).
	MinWarmup = 100
	// MaxDefaultWarmup is the largest default warm-up (see DefaultWarmup).
	MaxDefaultWarmup = 200
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("monitor: invalid config")
	// ErrState reports a State that cannot be restored.
	ErrState = errors.New("monitor: invalid state")
)

// DefaultWarmup is the warm-up used when Config.Warmup is 0 for a learner
// of budget B: 2·B, at least MinWarmup and at most MaxDefaultWarmup. The
// warm-up's rows are learned unconditionally: they must be rows known to
// be normal, and a default that grew with the budget outgrew the normal
// history a user has (issue 31: with budget 400 it ran 800 rows, past the
// 500 normal ones, into the faults, learned their first rows and then
// alarmed on 5 % of faulty rows instead of 80 %). After the warm-up, learn
// normal goes on learning the rows within the limits, so a budget larger
// than the warm-up still fills.
func DefaultWarmup(budget int) int {
	return min(max(2*budget, MinWarmup), MaxDefaultWarmup)
}

// DefaultWindow is the default limit window for a level: ⌈10/(1 − level)⌉
// observations (1,000 at 0.99), at least 100, so that about ten normal
// observations lie above the limit.
func DefaultWindow(level float64) int {
	return max(int(math.Ceil(10/(1-level)-1e-9)), 100)
}

// DefaultTrend is the default of Config.Trend.
const DefaultTrend = TrendEWMA

// DefaultTrendLambda is the default weight of the trend statistic's EWMA
// at a level and limit window: λ = 2/(n + 1) with n = 1/(1 − level), at
// most window: the EWMA whose span (2/λ − 1 observations) is the average
// run length of a normal process between two alarms of one per-sample
// limit (100 at 0.99: λ = 0.0198). A fault too slow to raise a per-sample
// alarm within that run is what the trend gate is for. Measured on
// bench/monitor (TestTrendLambda): λ from 0.005 to 0.05 catch satellite's
// slow ramp alike (53–54 %, batch KPCA 54 %) and the smaller ones more of
// the simulated drift fault (7.0 % at 0.01, 6.4 % at 0.02, 5.0 % at 0.18,
// 4.4 % without the gate, batch KPCA 10.3 %).
func DefaultTrendLambda(level float64, window int) float64 {
	n := 1 / (1 - level)
	if w := float64(window); w >= 1 && n > w {
		n = w
	}
	return 2 / (n + 1)
}

// DefaultConfirm is the default confirmation delay (Config.Confirm): a
// fault seen by a fraction p of its samples slips one into the learner
// with probability about (1 − p)¹⁰.
const DefaultConfirm = 10

// DefaultExcursion is the default of Config.Excursion.
const DefaultExcursion = 50

// MaxExcursion bounds Config.Excursion (memory per key: 8·(d + 3)·Excursion bytes).
const MaxExcursion = 1 << 12

// MaxConfirm bounds Config.Confirm (memory per key: 8·(d + 2)·Confirm bytes).
const MaxConfirm = 1 << 12

// MaxLinearDim bounds Config.Dim with Config.Linear (memory per key
// 8·d² bytes: 2 MB at 512; an eigendecomposition O(d³) every d learned
// observations).
const MaxLinearDim = 512

// DefaultLinear is the default of Config.Linear for a pipeline's key of
// dimension dim (callers apply it): on for 2 ≤ dim ≤ DefaultLinearMaxDim
// (issue 31; see the package comment, "Linear residual").
func DefaultLinear(dim int) bool { return dim >= 2 && dim <= DefaultLinearMaxDim }

// DefaultLinearMaxDim is the largest dimension for which the linear
// residual is on by default: its memory, about 24·d² bytes per key (the
// co-moment and the eigendecomposition's buffers), is then at most about
// 400 KB, no more than an RBF learner's of budget 200 at that dimension
// (its points and Gram matrix, about 530 KB); above it a key's memory
// would grow by up to 6 MB (d = 512) without being asked for.
const DefaultLinearMaxDim = 128

// MaxWindow bounds Config.Window (memory per key: 32·Window bytes).
const MaxWindow = 1 << 20

// DefaultFreeze is the default of Config.Freeze for a learner with
// forgetting factor forget: frozen when the learner does not forget
// (forget = 1). Such a learner keeps its first points for good, each
// scaled by the statistics of its time, so statistics that kept moving
// would shift the frame under them (measured on bench/monitor: weak step
// 53 % detected with moving statistics, 60 % frozen). A forgetting
// learner lets old points fade, and the statistics move with the same
// forgetting.
func DefaultFreeze(forget float64) bool { return forget == 1 || forget == 0 }

// Config configures a Monitor. The zero value of each field means its default.
type Config struct {
	// Level of the limits, in (0, 1); default 0.99. About 1 − Level of the
	// normal observations are expected above each limit.
	Level float64
	// Learn is LearnAlways (default) or LearnNormal.
	Learn string
	// Warmup is the number of observations learned unconditionally before
	// the limits are in force: rows known to be normal (default:
	// DefaultWarmup of the learner's budget, filled in by the caller; must
	// be ≥ 2 after defaults).
	Warmup int
	// Confirm is the confirmation delay of LearnNormal: an observation
	// judged normal is learned only once the Confirm observations after
	// it raised no alarm that was not admitted; such an alarm discards
	// the observations still waiting. Default DefaultConfirm.
	Confirm int
	// Excursion is the largest number of alarmed observations that
	// LearnNormal still learns as part of a normal excursion, once Confirm
	// observations without alarm follow them (see the package comment);
	// default DefaultExcursion; negative: none (every unadmitted alarm
	// discards the pending observations, as before).
	Excursion int
	// AcceptAfter is the number of consecutive alarmed observations after
	// which LearnNormal accepts the new regime and starts a new warm-up;
	// 0 (default) never does. Only alarms count: an observation held by
	// the trend gate without an alarm ends the run (issue 31: counting
	// held ones, a normal run accepted a "regime" and persistent faults
	// were absorbed).
	AcceptAfter int
	// Trend is the trend gate of LearnNormal, TrendOff or TrendEWMA;
	// default DefaultTrend.
	Trend string
	// TrendLambda is the weight in (0, 1] of the trend statistic's EWMA;
	// default DefaultTrendLambda(Level, Window).
	TrendLambda float64
	// Window is the number of recent normal observations whose statistics
	// give the limits (their empirical Level-quantiles); default
	// DefaultWindow(Level). Memory: 32·Window bytes.
	Window int
	// Forget is the forgetting factor in (0, 1] of the standardisation
	// statistics, the learner's; default 1 (equal weights).
	Forget float64
	// Standardize centres and scales every input variable by the running
	// mean and standard deviation of the learned observations. The first
	// ⌊Warmup/2⌋ observations are held back (memory 8·d·Warmup/2 bytes,
	// released afterwards) while the statistics settle, then learned in
	// order with the settled statistics, so that the learner's first
	// points are not scaled by the statistics of a handful of rows.
	Standardize bool
	// Freeze stops the standardisation statistics at the end of the
	// warm-up (callers default it with DefaultFreeze).
	Freeze bool
	// Dim is the input dimension d (needed with Standardize and Linear).
	Dim int
	// Linear monitors a linear residual beside the kernel one: the
	// residual of a linear PCA with LinearComponents components of the
	// vectors the learner learned, its statistic the largest variable's
	// reconstruction-based contribution (see linear.go), judged by its
	// own limit; an
	// observation above either residual's limit has an SPE alarm, each
	// limit at level 1 − (1 − Level)/2 so that the two together keep about
	// 1 − Level false alarms (with both at Level, bench/monitor measured
	// 2.3–2.8 % own false alarms of either limit on its normal processes
	// instead of 1.6–2.0 %). Memory: 8·(d² + d·(k + 4)) bytes.
	Linear bool
	// LinearComponents is the number of linear components (callers
	// default it to the learner's components); at most Dim − 1.
	LinearComponents int
}

// WithDefaults returns c with zero fields set to their defaults; a zero
// Warmup becomes DefaultWarmup(budget).
func (c Config) WithDefaults(budget int) Config {
	if c.Level == 0 {
		c.Level = DefaultLevel
	}
	if c.Learn == "" {
		c.Learn = LearnAlways
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup(budget)
	}
	if c.Forget == 0 {
		c.Forget = 1
	}
	if c.Confirm == 0 {
		c.Confirm = DefaultConfirm
	}
	if c.Excursion == 0 {
		c.Excursion = DefaultExcursion
	}
	if c.Window == 0 && c.Level > 0 && c.Level < 1 {
		c.Window = DefaultWindow(c.Level)
	}
	if c.Trend == "" {
		c.Trend = DefaultTrend
	}
	if c.TrendLambda == 0 && c.Level > 0 && c.Level < 1 {
		c.TrendLambda = DefaultTrendLambda(c.Level, c.Window)
	}
	return c
}

// Validate reports every problem of c (after WithDefaults), each a
// *fielderr.Error naming its field and wrapping ErrConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fielderr.New(ErrConfig.Error(), ErrConfig, field, format, args...))
	}
	if !(c.Level > 0 && c.Level < 1) {
		bad("level", "must be in (0, 1), got %v", c.Level)
	}
	if c.Learn != LearnAlways && c.Learn != LearnNormal {
		bad("learn", "must be %q or %q, got %q", LearnAlways, LearnNormal, c.Learn)
	}
	if c.Warmup < 2 {
		bad("warmup", "must be ≥ 2, got %d", c.Warmup)
	}
	if c.Window == 0 && !(c.Level > 0 && c.Level < 1) {
		// no default without a valid level: reported there
	} else if c.Window < 2 {
		bad("window", "must be ≥ 2, got %d", c.Window)
	} else if c.Window > MaxWindow {
		bad("window", "must be ≤ %d, got %d", MaxWindow, c.Window)
	}
	if c.AcceptAfter < 0 {
		bad("accept_after", "must be ≥ 0 (0 = never), got %d", c.AcceptAfter)
	}
	if !(c.Forget > 0 && c.Forget <= 1) {
		bad("forget", "must be in (0, 1], got %v", c.Forget)
	}
	if c.Confirm < 1 || c.Confirm > MaxConfirm {
		bad("confirm", "must be in [1, %d], got %d", MaxConfirm, c.Confirm)
	}
	if c.Excursion > MaxExcursion {
		bad("excursion", "must be ≤ %d (negative: none), got %d", MaxExcursion, c.Excursion)
	}
	if c.Trend != TrendOff && c.Trend != TrendEWMA {
		bad("trend", "must be %q or %q, got %q", TrendOff, TrendEWMA, c.Trend)
	}
	if c.TrendLambda == 0 && !(c.Level > 0 && c.Level < 1) {
		// no default without a valid level: reported there
	} else if !(c.TrendLambda > 0 && c.TrendLambda <= 1) {
		bad("trend_lambda", "must be in (0, 1], got %v", c.TrendLambda)
	}
	if c.Dim < 1 {
		bad("dim", "must be ≥ 1, got %d", c.Dim)
	}
	if c.Freeze && !c.Standardize {
		bad("freeze", "needs standardize")
	}
	if c.Linear && c.Dim >= 1 && (c.Dim < 2 || c.LinearComponents < 1 || c.LinearComponents > c.Dim-1) {
		bad("linear", "needs 2 ≤ dim and 1 ≤ components ≤ dim − 1, got dim %d, components %d", c.Dim, c.LinearComponents)
	}
	if c.Linear && c.Dim > MaxLinearDim {
		bad("linear", "needs dim ≤ %d (memory 8·d² bytes per key), got %d", MaxLinearDim, c.Dim)
	}
	return errors.Join(errs...)
}

// Alarm says which statistics of an observation are above their limits.
type Alarm uint8

// Alarm values.
const (
	AlarmNone Alarm = iota
	AlarmSPE
	AlarmT2
	AlarmBoth
)

// String returns "", "spe", "t2" or "both", the wire values of an output's
// alarm field.
func (a Alarm) String() string {
	switch a {
	case AlarmSPE:
		return "spe"
	case AlarmT2:
		return "t2"
	case AlarmBoth:
		return "both"
	}
	return ""
}

// ParseAlarm is the inverse of Alarm.String.
func ParseAlarm(s string) (Alarm, error) {
	switch s {
	case "":
		return AlarmNone, nil
	case "spe":
		return AlarmSPE, nil
	case "t2":
		return AlarmT2, nil
	case "both":
		return AlarmBoth, nil
	}
	return AlarmNone, fmt.Errorf("monitor: unknown alarm %q, want spe, t2 or both", s)
}

// Verdict is the monitor's judgement of one observation.
type Verdict struct {
	// InForce tells whether the limits are in force (after the warm-up);
	// without it the limits are 0 and there is no alarm.
	InForce bool
	// SPELimit and T2Limit are the limits the observation was judged by.
	SPELimit, T2Limit float64
	// LSPE and LSPELimit are the linear residual and its limit (0 without
	// Config.Linear or before the linear model is ready); an LSPE above
	// its limit is an AlarmSPE.
	LSPE, LSPELimit float64
	// LEWMA and LEWMALimit are the linear residual's per-variable EWMA
	// statistic and its limit (see the package comment, "Linear
	// residual"; 0 before it judges); an LEWMA above its limit is an
	// AlarmSPE.
	LEWMA, LEWMALimit float64
	// Alarm says which statistic is above its limit.
	Alarm Alarm
	// Trend tells that the trend statistic is above its limit (LearnNormal
	// with TrendEWMA): the observation is not learned, as an alarmed one;
	// it is not an alarm of the output (see the package comment).
	Trend bool
}

// State is everything a Monitor needs to resume; Monitor.State and
// Monitor.Restore copy it deeply.
type State struct {
	// Learned counts the observations learned since the current warm-up began.
	Learned int64
	// Run counts the consecutive alarmed observations (an observation
	// held by the trend gate without an alarm ends it).
	Run int64
	// Clean counts the consecutive observations without alarm at the end
	// of the pending queue, ExcN the alarmed observations in it (an
	// excursion's), and Long tells that an excursion ran too long: alarms
	// are not queued until Confirm observations without alarm have passed.
	// All 0 in a snapshot from before excursions: the queue then holds no
	// alarm, and Clean counts from there.
	Clean, ExcN int64
	Long        bool
	// SPE and T2 are the limit windows: the statistics of the last (at
	// most Window) observations admitted to the limits, oldest first.
	SPE, T2 []float64
	// Tokens is the budget of alarmed observations that may still enter
	// the windows (see Record).
	Tokens float64
	// Trend is the trend statistic's EWMA of the SPE's rank in its limit
	// window, less ½ (0 at the start of the limits and after Accept).
	Trend float64
	// TrendSD is the spread of the trend statistic on the limit window
	// (see TrendSpread), 0 before it was first measured.
	TrendSD float64
	// LTrend and LTrendSD are the same for the linear residual (its rank
	// in its own limit window; 0 without Config.Linear): the gate is out
	// when either statistic is above its limit.
	LTrend, LTrendSD float64
	// Pending holds the observations accepted for learning under
	// LearnNormal that wait for their confirmation, oldest first (at most
	// Confirm).
	Pending []Pending
	// Held holds the raw observations (row-major, n×d) kept back at the
	// start while the standardisation settles; Settled tells that they
	// were learned (see Config.Standardize).
	Held    []float64
	Settled bool
	// InW is the total weight of the standardisation statistics; InMean and
	// InM2 hold, per input variable, the weighted mean and Σ w(x − mean)²
	// (length d; nil without Standardize).
	InW          float64
	InMean, InM2 []float64
	// LSPE is the linear residual's limit window, in step with SPE (nil
	// without Config.Linear; a snapshot without it restores with an empty
	// window and the limits start again from the kernel's).
	LSPE []float64
	// Linear is the linear residual's model (nil without Config.Linear).
	Linear *LinearState
}

// LinearState is the linear residual's model: the weight, mean and
// co-moment (d×d, row-major) of the learned vectors, its leading
// eigenvectors P (d×k, row-major; nil before the first refresh) and the
// additions since they were computed. A state without P has them
// recomputed on restore.
type LinearState struct {
	W        float64
	Mean, M2 []float64
	P        []float64
	Since    int
	// E, V and S are the per-variable EWMA of the residual, the running
	// mean square of the residual and of the EWMA (length d, or nil in a
	// state from before them: the EWMA starts anew); N counts the normal
	// observations they averaged; Out tells that the EWMA was above its
	// gate at the last observation.
	E, V, S []float64
	N       float64
	Out     bool
}

// Pending is an observation accepted for learning, waiting for Confirm
// more observations without an unadmitted alarm.
type Pending struct {
	// X is the raw observation (length d).
	X []float64
	// SPE and T2 are its statistics when it was judged, LSPE its linear
	// residual (0 without Config.Linear).
	SPE, T2, LSPE float64
}

// Monitor is the per-key monitoring state: limits, learning gate and
// standardisation. It holds O(d) memory, allocated at construction.
type Monitor struct {
	cfg           Config
	spe, t2       window
	lspe          window
	lin           *linear // nil without Config.Linear
	pend          queue
	st            State
	speLim, t2Lim float64
	lspeLim       float64
	inForce       bool
	scale         []float64 // 1/σⱼ, or 1 for σⱼ = 0
	scaleW        float64   // InW at which scale was computed (−1: stale)
	trendZ        float64   // standard normal Level-quantile (0 without the trend gate)
	trendSD       float64   // σ of the trend statistic for independent ranks
	backup        []float64 // InMean and InM2 before a learn, to undo it
	probe, zc     []float64 // contributions' scratch: the probed input, Score's dst
	newton        []float64 // contributions' scratch: the Newton steps
	contrib       []Contribution
}

// New returns a Monitor for c (after WithDefaults); an invalid c gives an
// error wrapping ErrConfig.
func New(c Config) (*Monitor, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{cfg: c, scaleW: -1, spe: newWindow(c.Window), t2: newWindow(c.Window)}
	if c.Learn == LearnNormal && c.Trend == TrendEWMA {
		m.trendZ = math.Sqrt2 * math.Erfinv(2*c.Level-1)
		m.trendSD = math.Sqrt(c.TrendLambda / (2 - c.TrendLambda) / 12)
	}
	if c.Linear {
		m.lin = newLinear(c.Dim, c.LinearComponents, c.Forget)
		m.lspe = newWindow(c.Window)
	}
	m.st.Tokens = m.tokenCap()
	m.st.Settled = m.holdLen() == 0
	if c.Learn == LearnNormal {
		n := c.Confirm
		if c.Trend == TrendEWMA {
			n *= 2 // and the newest Confirm of a trend episode
		}
		n += max(c.Excursion, 0) // and an excursion's alarms
		m.pend = newQueue(n, c.Dim, c.Linear)
	}
	if c.Standardize {
		m.st.InMean = make([]float64, c.Dim)
		m.st.InM2 = make([]float64, c.Dim)
		m.scale = make([]float64, c.Dim)
		m.backup = make([]float64, 0, 2*c.Dim)
	}
	return m, nil
}

// Config returns the monitor's configuration.
func (m *Monitor) Config() Config { return m.cfg }

// ScoreFirst tells whether an observation is scored before it is learned
// (LearnNormal): the caller then learns it only if Admit says so.
func (m *Monitor) ScoreFirst() bool { return m.cfg.Learn == LearnNormal }

// Warm tells whether the monitor is in its warm-up.
func (m *Monitor) Warm() bool { return m.st.Learned < int64(m.cfg.Warmup) }

// Limits returns the current limits and whether they are in force.
func (m *Monitor) Limits() (spe, t2 float64, inForce bool) {
	return m.speLim, m.t2Lim, m.inForce
}

// Judge compares an observation's statistics with the limits. It does not
// change the state. Cost: two comparisons.
func (m *Monitor) Judge(spe, t2 float64) Verdict { return m.judge(spe, t2, 0) }

// judge is Judge with the linear residual lspe (ignored without Config.Linear).
func (m *Monitor) judge(spe, t2, lspe float64) Verdict {
	if !m.inForce {
		return Verdict{LSPE: lspe}
	}
	v := Verdict{InForce: true, SPELimit: m.speLim, T2Limit: m.t2Lim, LSPE: lspe, LSPELimit: m.lspeLim}
	if spe > m.speLim || (m.lspeLim > 0 && lspe > m.lspeLim) {
		v.Alarm |= AlarmSPE
	}
	if t2 > m.t2Lim {
		v.Alarm |= AlarmT2
	}
	return v
}

// Observe updates the standardisation statistics with the raw observation
// x that is about to be learned (call it before Input for the vector to
// learn). It does nothing without Standardize or once frozen.
func (m *Monitor) Observe(x []float64) {
	if !m.cfg.Standardize || (m.cfg.Freeze && !m.Warm()) {
		return
	}
	f := m.cfg.Forget
	w := f*m.st.InW + 1
	for j, v := range x {
		d := v - m.st.InMean[j]
		m.st.InMean[j] += d / w
		q := f*m.st.InM2[j] + d*(v-m.st.InMean[j])
		if q < 0 {
			q = 0
		}
		m.st.InM2[j] = q
	}
	m.st.InW = w
	m.scaleW = -1
}

// Input returns the vector the learner sees for the raw observation x:
// without Standardize x itself; otherwise (x − μ)/σ written into dst (of
// length d; a nil dst is allocated; another length panics).
func (m *Monitor) Input(dst, x []float64) []float64 {
	if !m.cfg.Standardize {
		return x
	}
	if dst == nil {
		dst = make([]float64, len(x))
	}
	if len(dst) != len(x) {
		panic("monitor: Input: dst of wrong length")
	}
	if m.scaleW != m.st.InW {
		m.refreshScale()
	}
	for j, v := range x {
		dst[j] = (v - m.st.InMean[j]) * m.scale[j]
	}
	return dst
}

func (m *Monitor) refreshScale() {
	for j := range m.scale {
		m.scale[j] = 1
		if m.st.InW > 0 {
			sd := math.Sqrt(m.st.InM2[j] / m.st.InW)
			// A constant variable (σ at the rounding level of its mean) is only centred.
			if sd > 1e-12*math.Abs(m.st.InMean[j]) && sd > 0 {
				m.scale[j] = 1 / sd
			}
		}
	}
	m.scaleW = m.st.InW
}

// takeToken tells whether an alarmed observation may be learned and enter
// the limit windows: the observation before it had no alarm and a token
// is left (which it spends). See the package comment.
func (m *Monitor) takeToken() bool {
	if m.st.Run == 0 && m.st.Tokens >= 1 {
		m.st.Tokens--
		return true
	}
	return false
}

// learned counts an observation the learner learned and, from the second
// half of the warm-up on, adds its statistics to the limit windows.
func (m *Monitor) learned(spe, t2, lspe float64, scored bool) {
	m.st.Learned++
	if scored && m.st.Learned > int64(m.cfg.Warmup/2) && finite(spe) && finite(t2) && finite(lspe) {
		m.spe.add(spe)
		m.t2.add(t2)
		if m.lin != nil {
			if m.lin.ready() {
				if !m.linearHeld() {
					m.lspe.add(lspe)
				}
			} else {
				m.lspe.reset() // in step with the kernel's window from the model's first refresh on
			}
		}
		if m.trendZ != 0 && (m.st.Learned == int64(m.cfg.Warmup) || m.st.Learned%m.trendEvery() == 0) {
			m.measureTrend()
		}
	}
}

// judged accrues tokens, counts the run of consecutive alarms and applies
// the acceptance rule; it reports whether the monitor accepted a new regime.
func (m *Monitor) judged(v Verdict) bool {
	if v.InForce {
		m.st.Tokens = min(m.st.Tokens+3*(1-m.cfg.Level), m.tokenCap())
	}
	if v.Alarm == AlarmNone {
		m.st.Run = 0
		return false
	}
	m.st.Run++
	if m.cfg.Learn == LearnNormal && m.cfg.AcceptAfter > 0 && m.st.Run >= int64(m.cfg.AcceptAfter) {
		m.Accept()
		return true
	}
	return false
}

// holdLen is the number of observations held back at the start (0 without Standardize).
func (m *Monitor) holdLen() int {
	if !m.cfg.Standardize {
		return 0
	}
	return m.cfg.Warmup / 2
}

func (m *Monitor) tokenCap() float64 {
	return math.Ceil((1 - m.cfg.Level) * float64(m.cfg.Window))
}

// Accept accepts the current regime: the limit moments are cleared and a
// new warm-up begins (the control plane's "accept"). The standardisation
// statistics are kept and move again during the warm-up.
func (m *Monitor) Accept() {
	m.st.Learned, m.st.Run = 0, 0
	m.st.Clean, m.st.ExcN, m.st.Long = 0, 0, false
	m.pend.reset()
	m.spe.reset()
	m.t2.reset()
	m.lspe.reset()
	if m.lin != nil {
		m.lin.resetEWMA()
	}
	m.st.Tokens = m.tokenCap()
	m.st.Trend, m.st.TrendSD, m.st.LTrend, m.st.LTrendSD = 0, 0, 0, 0
	m.speLim, m.t2Lim, m.inForce = 0, 0, false
}

// TrendLimit returns the limit of the trend statistic (State.Trend, the
// EWMA of the SPE's rank less ½) in force and whether the trend gate is
// on: z·max(σ₀, σ̂), where z is the standard normal Level-quantile,
// σ₀² = λ/(2 − λ)·1/12 the stationary variance of an EWMA of independent
// ranks uniform on [0, 1] (variance 1/12), and σ̂ (State.TrendSD) the
// spread of the same EWMA run over the limit window's observations in
// their order, which is larger when normal observations are
// autocorrelated.
func (m *Monitor) TrendLimit() (float64, bool) {
	if m.trendZ == 0 {
		return 0, false
	}
	return m.trendZ * max(m.trendSD, m.st.TrendSD), true
}

// trendEvery is the number of observations added to the limit window
// between two measurements of the trend statistic's spread on it: half
// the window, so that each value is measured about twice.
func (m *Monitor) trendEvery() int64 { return int64(max(m.cfg.Window/2, 1)) }

// measureTrend sets State.TrendSD: the root mean square of the trend
// statistic's EWMA (from 0) run over the ranks of the SPE window's values
// in arrival order. O(Window·log Window), every trendEvery additions.
func (m *Monitor) measureTrend() {
	if sd, ok := m.trendSpread(&m.spe); ok {
		m.st.TrendSD = sd
	}
	if m.lin != nil {
		if sd, ok := m.trendSpread(&m.lspe); ok {
			m.st.LTrendSD = sd
		}
	}
}

// trendSpread is the root mean square of the trend statistic's EWMA (from
// 0) run over the ranks of w's values in arrival order; false with fewer
// than two values.
func (m *Monitor) trendSpread(w *window) (float64, bool) {
	n := len(w.ring)
	if n < 2 {
		return 0, false
	}
	l := m.cfg.TrendLambda
	var e, s2 float64
	for _, part := range [2][]float64{w.ring[w.start:], w.ring[:w.start]} {
		for _, v := range part {
			e = (1-l)*e + l*(w.rank(v)-0.5)
			s2 += e * e
		}
	}
	return math.Sqrt(s2 / float64(n)), true
}

// trend updates the trend statistic with the SPE of a judged observation
// and tells whether it is above its limit; false without the trend gate.
func (m *Monitor) trend(spe, lspe float64) bool {
	lim, on := m.TrendLimit()
	if !on || !m.inForce || !finite(spe) {
		return false
	}
	l := m.cfg.TrendLambda
	m.st.Trend = (1-l)*m.st.Trend + l*(m.spe.rank(spe)-0.5)
	out := m.st.Trend > lim
	if m.lin != nil && m.lspe.len() >= 2 && finite(lspe) {
		m.st.LTrend = (1-l)*m.st.LTrend + l*(m.lspe.rank(lspe)-0.5)
		out = out || m.st.LTrend > m.trendZ*max(m.trendSD, m.st.LTrendSD)
	}
	return out
}

// refreshLimits recomputes the limits from the windows; they are in force
// after the warm-up once the windows hold at least two observations.
func (m *Monitor) refreshLimits() {
	m.inForce = !m.Warm() && m.spe.len() >= 2
	if !m.inForce {
		m.speLim, m.t2Lim, m.lspeLim = 0, 0, 0
		return
	}
	m.t2Lim = m.t2.limit(m.cfg.Level)
	m.speLim = m.spe.limit(m.cfg.Level)
	m.lspeLim = 0
	if m.lspe.len() >= 2 {
		// The kernel's SPE keeps the level; T² and the linear residual
		// share the T² limit's 1 − Level (see Config.Linear).
		l := 1 - (1-m.cfg.Level)/2
		m.t2Lim = m.t2.limit(l)
		m.lspeLim = m.lspe.limit(l)
	}
}

// State returns a deep copy of the monitor's state.
func (m *Monitor) State() *State {
	s := m.st
	s.SPE, s.T2 = m.spe.values(), m.t2.values()
	s.Pending = m.pend.values()
	s.Held = append([]float64(nil), m.st.Held...)
	s.InMean = append([]float64(nil), m.st.InMean...)
	s.InM2 = append([]float64(nil), m.st.InM2...)
	if !m.cfg.Standardize {
		s.InMean, s.InM2 = nil, nil
	}
	s.LSPE, s.Linear = nil, nil
	if l := m.lin; l != nil {
		s.LSPE = m.lspe.values()
		s.Linear = &LinearState{W: l.w, Mean: append([]float64(nil), l.mean...), M2: append([]float64(nil), l.m2...),
			P: append([]float64(nil), l.p...), Since: l.since,
			E: append([]float64(nil), l.e...), V: append([]float64(nil), l.v...), S: append([]float64(nil), l.s...), N: l.n, Out: l.out}
	}
	return &s
}

// Restore replaces the state with a copy of s after checking it against
// the configuration; on error (wrapping ErrState) the monitor is unchanged.
func (m *Monitor) Restore(s *State) error {
	if s == nil {
		return fmt.Errorf("%w: nil state", ErrState)
	}
	var bad []string
	if s.Learned < 0 || s.Run < 0 || s.Clean < 0 || s.ExcN < 0 || s.ExcN > int64(len(s.Pending)) {
		bad = append(bad, fmt.Sprintf("counters out of range (learned %d, run %d, clean %d, excursion %d of %d pending)", s.Learned, s.Run, s.Clean, s.ExcN, len(s.Pending)))
	}
	if len(s.SPE) != len(s.T2) || len(s.SPE) > m.cfg.Window {
		bad = append(bad, fmt.Sprintf("limit windows of %d and %d values, want equal and ≤ %d", len(s.SPE), len(s.T2), m.cfg.Window))
	}
	for _, w := range [][]float64{s.SPE, s.T2} {
		for _, v := range w {
			if !finite(v) {
				bad = append(bad, "non-finite value in a limit window")
				break
			}
		}
	}
	if len(s.Held) > m.holdLen()*m.cfg.Dim || len(s.Held)%m.cfg.Dim != 0 || (s.Settled && len(s.Held) > 0) || !allFinite(s.Held) {
		bad = append(bad, fmt.Sprintf("%d held values, want a multiple of %d, at most %d, finite, none once settled", len(s.Held), m.cfg.Dim, m.holdLen()*m.cfg.Dim))
	}
	if len(s.Pending) > m.pend.cap() {
		bad = append(bad, fmt.Sprintf("%d pending observations, want ≤ %d", len(s.Pending), m.pend.cap()))
	}
	for i, p := range s.Pending {
		if len(p.X) != m.cfg.Dim || !finite(p.SPE) || !finite(p.T2) || !allFinite(p.X) {
			bad = append(bad, fmt.Sprintf("pending observation %d has %d values or non-finite ones, want %d finite", i, len(p.X), m.cfg.Dim))
			break
		}
	}
	for _, tr := range [][2]float64{{s.Trend, s.TrendSD}, {s.LTrend, s.LTrendSD}} {
		if !finite(tr[0]) || math.Abs(tr[0]) > 0.5 || !finite(tr[1]) || tr[1] < 0 || tr[1] > 0.5 {
			bad = append(bad, fmt.Sprintf("trend statistic %v or its spread %v out of [−½, ½] and [0, ½]", tr[0], tr[1]))
		}
	}
	if !finite(s.Tokens) || s.Tokens < 0 || s.Tokens > m.tokenCap() {
		bad = append(bad, fmt.Sprintf("alarm tokens %v out of [0, %v]", s.Tokens, m.tokenCap()))
	}
	d := 0
	if m.cfg.Standardize {
		d = m.cfg.Dim
	}
	if len(s.InMean) != d || len(s.InM2) != d {
		bad = append(bad, fmt.Sprintf("standardisation of %d and %d variables, want %d", len(s.InMean), len(s.InM2), d))
	} else if !finite(s.InW) || s.InW < 0 {
		bad = append(bad, "non-finite standardisation weight")
	} else {
		for j := range d {
			if !finite(s.InMean[j]) || !finite(s.InM2[j]) || s.InM2[j] < 0 {
				bad = append(bad, fmt.Sprintf("standardisation of variable %d is non-finite or negative", j))
				break
			}
		}
	}
	bad = append(bad, m.checkLinear(s)...)
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrState, strings.Join(bad, "; "))
	}
	m.st = *s
	m.st.LSPE, m.st.Linear = nil, nil
	m.restoreLinear(s)
	m.st.SPE, m.st.T2, m.st.Pending = nil, nil, nil
	m.st.Held = append([]float64(nil), s.Held...)
	m.pend.load(s.Pending)
	m.spe.load(s.SPE)
	m.t2.load(s.T2)
	m.st.InMean = append([]float64(nil), s.InMean...)
	m.st.InM2 = append([]float64(nil), s.InM2...)
	if d == 0 {
		m.st.InMean, m.st.InM2 = nil, nil
	}
	m.scaleW = -1
	m.refreshLimits()
	return nil
}

// Standardization returns copies of the standardisation's means and scales
// (σⱼ, or 1 for a variable that is only centred), so that x' = (x − mean)/scale;
// nil, nil without Standardize.
func (m *Monitor) Standardization() (mean, scale []float64) {
	if !m.cfg.Standardize {
		return nil, nil
	}
	if m.scaleW != m.st.InW {
		m.refreshScale()
	}
	mean = append([]float64(nil), m.st.InMean...)
	scale = make([]float64, len(m.scale))
	for j, s := range m.scale {
		scale[j] = 1 / s
	}
	return mean, scale
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func allFinite(v []float64) bool {
	for _, x := range v {
		if !finite(x) {
			return false
		}
	}
	return true
}

// Export sets the model export's preprocess section (with standardisation)
// and its monitor section (the limits in force, 0 before they are; with
// Config.Linear the linear residual's mean, components and limit once its
// model is ready) from m.
func (m *Monitor) Export(model *learners.Model) {
	if mean, scale := m.Standardization(); mean != nil {
		model.Preprocess = &learners.ModelPreprocess{Mean: mean, Scale: scale}
	}
	spe, t2, _ := m.Limits()
	c := m.Config()
	model.Monitor = &learners.ModelMonitor{Level: c.Level, Learn: c.Learn, SPELimit: spe, T2Limit: t2}
	if l := m.lin; l != nil && l.ready() {
		ml := &learners.ModelLinear{Mean: append([]float64(nil), l.mean...), Components: make([][]float64, l.k), LSPELimit: m.lspeLim}
		for i := range l.k {
			ml.Components[i] = make([]float64, l.d)
			for j := range l.d {
				ml.Components[i][j] = l.p[j*l.k+i]
			}
		}
		model.Monitor.Linear = ml
	}
}

// ewma updates the linear residual's per-variable EWMA with the residual
// just scored (the last index call) and judges it into v (LEWMA,
// LEWMALimit, an AlarmSPE above the limit). See the package comment,
// "Linear residual".
func (m *Monitor) ewma(v *Verdict) {
	st := m.lin.track(m.cfg.TrendLambda, !m.inForce || v.Alarm == AlarmNone, m.cfg.Window)
	m.lin.out = st > ewmaGate*ewmaGate
	if !m.inForce || !m.lin.judges() {
		return
	}
	v.LEWMA, v.LEWMALimit = st, ewmaLimit*ewmaLimit
	if st > v.LEWMALimit {
		v.Alarm |= AlarmSPE
	}
}

// linearHeld tells whether the linear model and its limit window learn
// nothing now: learn normal, limits in force, and the per-variable EWMA
// above its gate at the last judged observation.
func (m *Monitor) linearHeld() bool {
	return m.lin != nil && m.cfg.Learn == LearnNormal && m.inForce && m.lin.out
}
