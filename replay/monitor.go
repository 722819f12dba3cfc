package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// monitorCounts counts what the monitor did with the rows.
type monitorCounts struct {
	seen, learned, alarms, accepted, trended int64
	// warmLearned counts the rows learned before the limits were first
	// in force; warmEnd is the row (0-based data row) from which they
	// were, −1 while not yet.
	warmLearned int64
	warmEnd     int
	judged      bool
}

// Row counts the monitor's step of the row.
func (m *monitorCounts) Row(_ learners.Learner, row *Row) error {
	r := row.Monitor
	if m.seen == 0 {
		m.warmEnd = -1
	}
	if !m.judged {
		if r.Verdict.InForce {
			m.judged, m.warmEnd = true, row.Index
		} else if r.Learned {
			m.warmLearned++
		}
	}
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
	return nil
}

// summary prints the monitor's line on stderr when monitoring was asked for.
func (m *monitorCounts) summary(w io.Writer, o *MonitorConfig, mon *monitor.Monitor) {
	fmt.Fprintln(w, "replay: "+m.line(o, mon))
}

// line is the monitor's summary in one line: rows, learned, alarmed, where
// the warm-up ended and the limits in force.
func (m *monitorCounts) line(o *MonitorConfig, mon *monitor.Monitor) string {
	spe, t2, in := mon.Limits()
	line := fmt.Sprintf("monitor (learn %s, level %v): %d rows, %d learned, %d alarmed", o.Learn, o.Level, m.seen, m.learned, m.alarms)
	if m.trended > 0 {
		line += fmt.Sprintf(", %d held by the trend gate", m.trended)
	}
	if m.accepted > 0 {
		line += fmt.Sprintf(", %d new regime(s) accepted", m.accepted)
	}
	if m.judged {
		line += fmt.Sprintf("; warm-up (rows taken as normal) ended at row %d after %d rows learned", m.warmEnd, m.warmLearned)
	}
	if in {
		line += fmt.Sprintf("; limits SPE %.4g, T² %.4g", spe, t2)
	} else {
		line += fmt.Sprintf("; limits not yet in force (warm-up: %d rows learned as normal)", m.warmLearned)
	}
	return line
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

// Row counts the row's verdict against its fault cell.
func (d *detection) Row(_ learners.Learner, rr *Row) error {
	d.add(rr.Index, faulty(rr.Cell), rr.Monitor)
	return nil
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
