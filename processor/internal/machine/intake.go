package machine

// Intake follows the deliveries of one partition's consumer and finds the
// first deliveries lost in transit: a gap in the consumer's delivery
// sequence means deliveries were lost (with a connection, a server); those
// of them that were first deliveries (not redeliveries, which the tracker
// already holds) have stream sequences above the highest one delivered so
// far, and come back only after ack_wait. The partition looks them up in
// the stream and holds each (Tracker.Missing) before it hands over the
// delivery that revealed the gap, so that neither the checkpoint nor a
// key's last applied sequence passes them. No I/O: the caller looks up.
type Intake struct {
	start    uint64 // the consumer's first stream sequence
	lastCons uint64 // highest consumer (delivery) sequence received
}

// NewIntake returns the intake of a consumer that starts at stream
// sequence start.
func NewIntake(start uint64) *Intake { return &Intake{start: max(start, 1)} }

// Delivery records the delivery of stream sequence stream as consumer
// sequence cons, given maxSeq, the highest stream sequence delivered
// before it (Tracker.Max). It returns the range [from, to) of stream
// sequences to look up for undelivered messages (from == to: none).
func (in *Intake) Delivery(cons, stream, maxSeq uint64) (from, to uint64) {
	if cons <= in.lastCons {
		return 0, 0
	}
	next := maxSeq + 1
	if in.lastCons != 0 && cons > in.lastCons+1 && stream > next && next > 1 {
		from, to = next, stream
	}
	in.lastCons = cons
	return from, to
}
