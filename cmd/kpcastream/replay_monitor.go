package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// monitorOptions are the monitoring flags of replay: control limits,
// alarms, gated learning and running standardisation (learners/monitor).
// A replay always runs the monitor (learn always, limits at 0.99: the
// --out columns spe_limit, t2_limit and alarm); the model export gains its
// "monitor" section only when one of these flags is given, and its
// "preprocess" section with --standardize.
type monitorOptions struct {
	learn       string
	level       float64
	warmup      int
	acceptAfter int
	confirm     int
	window      int
	trend       string
	trendLambda float64
	freeze      bool
	freezeSet   bool // --freeze was given (else monitor.DefaultFreeze)
	set         bool // a monitoring flag was given
	faultColumn string
	detect      detection

	seen, learned, alarms, accepted, trended int64
}

// monitorFlagNames are the flags that ask for the model's monitor section.
var monitorFlagNames = map[string]bool{"learn": true, "level": true, "warmup": true, "accept-after": true,
	"confirm": true, "limit-window": true, "standardize": true, "freeze": true, "trend": true, "trend-lambda": true}

func monitorFlags(fs *flag.FlagSet, o *monitorOptions) {
	fs.StringVar(&o.learn, "learn", monitor.LearnAlways, "always: learn every row (then score it); normal: score first and learn only rows within the control limits, after the warm-up")
	fs.Float64Var(&o.level, "level", monitor.DefaultLevel, "level of the SPE and T² control limits, in (0,1)")
	fs.IntVar(&o.warmup, "warmup", 0, "rows learned unconditionally before the limits are in force (default 2 × budget, at least 100)")
	fs.IntVar(&o.acceptAfter, "accept-after", 0, "with --learn normal: accept a new regime after this many consecutive alarms and learn again (0 = never)")
	fs.IntVar(&o.confirm, "confirm", 0, "with --learn normal: a row within the limits is learned once this many later rows raised no alarm (default 10)")
	fs.IntVar(&o.window, "limit-window", 0, "recent normal rows whose statistics give the limits (default 10/(1 − level), at least 100)")
	fs.StringVar(&o.trend, "trend", monitor.DefaultTrend, "with --learn normal: ewma stops learning while the EWMA of the SPE's rank among the recent normal rows is above its limit (slow faults); off learns every row within the limits")
	fs.Float64Var(&o.trendLambda, "trend-lambda", 0, "with --learn normal: weight in (0,1] of the trend gate's EWMA (default 2/(confirm + 1))")
	fs.StringVar(&o.faultColumn, "fault-column", "", "column marking faulty rows (empty or 0: normal; anything else: faulty), left out of the features: print the detection by the monitor's alarms on stderr (single in-order pass of an online learner)")
	fs.BoolVar(&o.freeze, "freeze", false, "with --standardize: stop the standardisation statistics at the end of the warm-up (default: when --forget is 1; --freeze=false keeps them moving)")
}

func monitorProblems(o *replayOptions) []string {
	var p []string
	m := &o.mon
	if m.learn != monitor.LearnAlways && m.learn != monitor.LearnNormal {
		p = append(p, fmt.Sprintf("--learn must be always or normal, got %q", m.learn))
	}
	if !(m.level > 0 && m.level < 1) {
		p = append(p, fmt.Sprintf("--level must be in (0,1), got %v", m.level))
	}
	if m.warmup < 0 || m.acceptAfter < 0 || m.confirm < 0 || m.window < 0 {
		p = append(p, "--warmup, --accept-after, --confirm and --limit-window must be ≥ 0")
	}
	if (m.acceptAfter > 0 || m.confirm > 0) && m.learn != monitor.LearnNormal {
		p = append(p, "--accept-after and --confirm need --learn normal")
	}
	if m.trend != monitor.TrendEWMA && m.trend != monitor.TrendOff {
		p = append(p, fmt.Sprintf("--trend must be ewma or off, got %q", m.trend))
	}
	if !(m.trendLambda >= 0 && m.trendLambda <= 1) {
		p = append(p, fmt.Sprintf("--trend-lambda must be in (0,1], got %v", m.trendLambda))
	}
	if m.trendLambda > 0 && (m.learn != monitor.LearnNormal || m.trend == monitor.TrendOff) {
		p = append(p, "--trend-lambda needs --learn normal and --trend ewma")
	}
	if m.freezeSet && !o.label.standardize {
		p = append(p, "--freeze needs --standardize")
	}
	if o.label.column != "" && m.learn != monitor.LearnAlways {
		p = append(p, "--learn normal is not available with --label")
	}
	if m.faultColumn != "" && (o.label.column != "" || o.learner == learners.KindBatch || o.passes > 1 || o.shuffle) {
		p = append(p, "--fault-column needs one in-order pass (no --passes, --shuffle-seed) of an online learner, without --label")
	}
	if m.faultColumn != "" && slices.Contains(o.drop, m.faultColumn) {
		p = append(p, fmt.Sprintf("--fault-column %q is also in --drop", m.faultColumn))
	}
	if o.learner == learners.KindBatch && o.label.column == "" && o.label.standardize {
		p = append(p, "--standardize needs an online learner (ikpca, kha or window) or --label")
	}
	if o.learner == learners.KindBatch && m.learn != monitor.LearnAlways {
		p = append(p, "--learn normal needs an online learner (ikpca, kha or window)")
	}
	return p
}

// monitor returns the replay's monitor for the learner configuration cfg.
func (m *monitorOptions) monitor(cfg learners.Config, standardize bool) (*monitor.Monitor, error) {
	freeze := m.freeze
	if !m.freezeSet {
		freeze = standardize && monitor.DefaultFreeze(cfg.Forget)
	}
	c := monitor.Config{Level: m.level, Learn: m.learn, Warmup: m.warmup, AcceptAfter: m.acceptAfter,
		Confirm: m.confirm, Window: m.window, Trend: m.trend, TrendLambda: m.trendLambda, Forget: cfg.Forget, Standardize: standardize, Freeze: freeze, Dim: cfg.Dim}
	mon, err := monitor.New(c.WithDefaults(cfg.Budget))
	if err != nil {
		return nil, fmt.Errorf("monitor settings: %w", err)
	}
	return mon, nil
}

func (m *monitorOptions) count(r monitor.Result) {
	m.seen++
	if r.Learned {
		m.learned++
	}
	if r.Verdict.Alarm != monitor.AlarmNone {
		m.alarms++
	}
	if r.Accepted {
		m.accepted++
	}
	if r.Verdict.Trend {
		m.trended++
	}
}

// decorate returns the function that adds the monitor and preprocess
// sections to a model export (nil when there is nothing to add).
func (m *monitorOptions) decorate(mon *monitor.Monitor) func(*learners.Model) {
	if mon == nil || !m.set {
		return nil
	}
	return mon.Export
}

// summary prints the monitor's line on stderr when monitoring was asked for.
func (m *monitorOptions) summary(w io.Writer, mon *monitor.Monitor) {
	if mon == nil || !m.set {
		return
	}
	spe, t2, in := mon.Limits()
	line := fmt.Sprintf("replay: monitor (learn %s, level %v): %d rows, %d learned, %d alarmed", m.learn, m.level, m.seen, m.learned, m.alarms)
	if m.trended > 0 {
		line += fmt.Sprintf(", %d held by the trend gate", m.trended)
	}
	if m.accepted > 0 {
		line += fmt.Sprintf(", %d new regime(s) accepted", m.accepted)
	}
	if in {
		line += fmt.Sprintf("; limits SPE %.4g, T² %.4g", spe, t2)
	} else {
		line += "; limits not yet in force (warm-up)"
	}
	fmt.Fprintln(w, line)
}

// faulty tells whether a --fault-column cell marks a faulty row: anything
// but empty or a number equal to 0.
func faulty(cell string) bool {
	c := strings.TrimSpace(cell)
	if c == "" {
		return false
	}
	if v, err := strconv.ParseFloat(c, 64); err == nil {
		return v != 0
	}
	return true
}

// detection counts the monitor's alarms against a fault column, over the
// rows judged with limits in force.
type detection struct {
	faulty, faultySPE, faultyAny int64
	normal, normalAny            int64
	unjudged                     int64
	started                      bool
	firstFault, firstAlarm       int // row indices, −1 when none yet
}

func (d *detection) add(row int, fault bool, r monitor.Result) {
	if !d.started {
		d.started, d.firstFault, d.firstAlarm = true, -1, -1
	}
	if fault && d.firstFault < 0 {
		d.firstFault = row
	}
	v := r.Verdict
	if !v.InForce {
		d.unjudged++
		return
	}
	alarm := v.Alarm != monitor.AlarmNone
	if fault {
		d.faulty++
		if v.Alarm&monitor.AlarmSPE != 0 {
			d.faultySPE++
		}
		if alarm {
			d.faultyAny++
			if d.firstAlarm < 0 {
				d.firstAlarm = row
			}
		}
		return
	}
	d.normal++
	if alarm {
		d.normalAny++
	}
}

func (d *detection) print(w io.Writer, column string) {
	fmt.Fprintln(w, "replay: "+d.line(column))
}

// line is the detection in one line: faulty and normal rows judged and
// alarmed, and the delay of the first alarm.
func (d *detection) line(column string) string {
	pct := func(a, b int64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
	}
	line := fmt.Sprintf("detection against column %s: %d faulty rows judged, %s alarmed by SPE, %s by either limit; %d normal rows judged, %s alarmed",
		column, d.faulty, pct(d.faultySPE, d.faulty), pct(d.faultyAny, d.faulty), d.normal, pct(d.normalAny, d.normal))
	if d.firstAlarm >= 0 {
		line += fmt.Sprintf("; first alarm %d rows after the first faulty row", d.firstAlarm-d.firstFault)
	}
	if d.unjudged > 0 {
		line += fmt.Sprintf(" (%d rows before the limits were in force not counted)", d.unjudged)
	}
	return line
}
