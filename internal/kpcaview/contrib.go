package kpcaview

// Contribution is a variable's contribution to an alarm (an output's
// contrib field: learners/monitor's reconstruction-based contribution).
type Contribution struct {
	Var   int     `json:"var"`
	Value float64 `json:"value"`
}

// ContribOf appends to dst the contributions of an output's contrib
// field, each given by its variable and value, and returns it.
func ContribOf[C any](dst []Contribution, cs []C, f func(C) (int, float64)) []Contribution {
	dst = dst[:0]
	for _, c := range cs {
		v, x := f(c)
		dst = append(dst, Contribution{Var: v, Value: x})
	}
	return dst
}

// maxContribVars bounds the variables the contributions panel tallies
// (memory 16 bytes per variable and key); a variable beyond it counts in
// Other.
const maxContribVars = 4096

// contribTally counts, over a key's alarmed observations that named their
// variables, how often each variable ranked first and in the top three,
// and keeps the newest alarm's list.
type contribTally struct {
	alarms      int64
	first, top3 []int64 // by variable, grown to the largest seen
	other       int64   // top-3 mentions of variables ≥ maxContribVars
	lastX       int64
	lastSeq     uint64
	last        []Contribution
}

func (t *contribTally) add(o *Observation) {
	if len(o.Contrib) == 0 {
		return
	}
	t.alarms++
	for i, c := range o.Contrib[:min(3, len(o.Contrib))] {
		if c.Var < 0 || c.Var >= maxContribVars {
			t.other++
			continue
		}
		for len(t.top3) <= c.Var {
			t.first, t.top3 = append(t.first, 0), append(t.top3, 0)
		}
		t.top3[c.Var]++
		if i == 0 {
			t.first[c.Var]++
		}
	}
	t.lastX, t.lastSeq = o.X, o.Seq
	t.last = append(t.last[:0], o.Contrib...)
}

// ContribView is the contributions panel's data: over Alarms alarmed
// observations with contributions, First[j] and Top3[j] count those that
// ranked variable j first and in their top three (Other: top-3 mentions
// of variables beyond the tally's bound); Last is the newest alarm's list,
// at LastX (row or Unix ms) and LastSeq.
type ContribView struct {
	Alarms  int64          `json:"alarms"`
	First   []int64        `json:"first"`
	Top3    []int64        `json:"top3"`
	Other   int64          `json:"other,omitempty"`
	LastX   int64          `json:"last_x"`
	LastSeq uint64         `json:"last_seq"`
	Last    []Contribution `json:"last"`
}

// view returns a copy of the tally, nil when no alarm named its variables.
func (t *contribTally) view() *ContribView {
	if t.alarms == 0 {
		return nil
	}
	return &ContribView{Alarms: t.alarms, First: append([]int64(nil), t.first...), Top3: append([]int64(nil), t.top3...),
		Other: t.other, LastX: t.lastX, LastSeq: t.lastSeq, Last: append([]Contribution(nil), t.last...)}
}
