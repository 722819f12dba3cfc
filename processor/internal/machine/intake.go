package machine

// Intake follows the deliveries of one partition's consumer and tells a
// gap: a consumer (delivery) sequence above the last one plus one —
// including a first delivery above 1 — means deliveries were lost in
// transit (with a connection, a server). The server delivers them again
// only after ack_wait, and among them may be first deliveries of any
// stream sequence above the highest delivered so far, even beyond the
// delivery that reveals the gap (that one may itself be the redelivery of
// an earlier lost one): no look-up bounded by what has arrived can find
// them all. So at a gap the partition hands nothing more over and is
// taken again under a new epoch, whose consumer starts at the checkpoint —
// which never passed a sequence that was not delivered (Tracker: at most
// the highest delivered plus one) — and delivers everything from there in
// order; replays are skipped by sequence and their outputs dropped by
// Nats-Msg-Id. No I/O.
type Intake struct {
	lastCons uint64 // highest consumer (delivery) sequence received
}

// NewIntake returns the intake of a new consumer.
func NewIntake() *Intake { return &Intake{} }

// Delivery records delivery cons (the consumer sequence) and reports
// whether deliveries before it were lost (a gap), and whether it is new
// (an old or repeated consumer sequence is not: drop it).
func (in *Intake) Delivery(cons uint64) (gap, fresh bool) {
	if cons <= in.lastCons {
		return false, false
	}
	gap = cons > in.lastCons+1
	in.lastCons = cons
	return gap, true
}
