package replay

import (
	"fmt"
	"io"
	"time"

	"github.com/kpcastream/kpcastream/learners"
)

// progress prints a status line on stderr at most every interval.
type progress struct {
	w        io.Writer
	every    time.Duration
	start    time.Time
	last     time.Time
	eig      []float64
	interval int64
	fed      int64 // rows fed, as the last Row saw them
}

func newProgress(w io.Writer, every time.Duration) *progress {
	now := time.Now()
	return &progress{w: w, every: every, start: now, last: now}
}

// Row records the rows fed and prints the line when it is due.
func (p *progress) Row(l learners.Learner, r *Row) error {
	p.fed = r.Fed
	p.Update(r.Fed, l)
	return nil
}

func (p *progress) Update(fed int64, l learners.Learner) {
	if p.every <= 0 {
		return
	}
	p.interval++
	if p.interval < 256 {
		return
	}
	p.interval = 0
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.print(fed, l)
	}
}

func (p *progress) Done(fed int64, l learners.Learner) {
	if p.every > 0 {
		p.print(fed, l)
	}
	// The budget line is the run's summary, not progress: always printed.
	if line := budgetLine(l.Summary(p.eig)); line != "" {
		fmt.Fprintln(p.w, line)
	}
}

// budgetLine describes how well the budget fits the stream, from the
// learner's Summary; "" for a learner that does not judge it.
func budgetLine(s learners.Summary) string {
	if s.BudgetAdvice == "" {
		return ""
	}
	line := fmt.Sprintf("replay: budget %s: stored %d, outside span %.3f, dropped mass %.3f, swaps %.1f and moves %.1f per 1000 rows",
		s.BudgetAdvice, s.Stored, s.OutsideSpan, s.DroppedMass, s.SwapsPer1000, s.MovesPer1000)
	switch s.BudgetAdvice {
	case learners.AdviceTight:
		line += " (a larger --budget would be safer)"
	case learners.AdviceTooSmall:
		line += " (raise --budget)"
	}
	return line
}

func (p *progress) print(fed int64, l learners.Learner) {
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(fed) / el
	}
	s := l.Summary(p.eig)
	p.eig = s.Eigenvalues
	line := fmt.Sprintf("replay: %d rows, %.0f rows/s, stored %d", fed, rate, s.Stored)
	if s.Ready {
		line += fmt.Sprintf(", explained %.3f, top eigenvalue %.4g", s.ExplainedVariance, s.Eigenvalues[0])
	} else {
		line += ", warming up"
	}
	fmt.Fprintln(p.w, line)
}
