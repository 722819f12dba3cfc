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
	gap      bool   // deliveries were lost and their first deliveries are not looked up yet
}

// NewIntake returns the intake of a consumer that starts at stream
// sequence start.
func NewIntake(start uint64) *Intake { return &Intake{start: max(start, 1)} }

// Delivery records the delivery of stream sequence stream as consumer
// sequence cons, given maxSeq, the highest stream sequence delivered
// before it (Tracker.Max). It returns the range [from, to) of stream
// sequences to look up for undelivered messages (from == to: none).
//
// Every variant of a lost delivery is covered:
//
//   - a gap is any consumer sequence above the last one plus one —
//     including before the first delivery of a consumer (its sequences
//     start at 1), where the messages lost are the first of the epoch;
//   - the first deliveries lost have stream sequences above the highest
//     delivered (first deliveries come in stream order) and at or above
//     the consumer's start, and below the next first delivery received;
//   - when the delivery that reveals the gap is a redelivery (at or below
//     maxSeq), the first deliveries lost with it lie below the next first
//     delivery, whenever it comes: the gap is remembered until then.
//
// Deliveries lost at the tail (no later delivery) need nothing: the
// tracker never passes a sequence above its highest delivered one.
func (in *Intake) Delivery(cons, stream, maxSeq uint64) (from, to uint64) {
	if cons <= in.lastCons {
		return 0, 0
	}
	if cons > in.lastCons+1 {
		in.gap = true
	}
	in.lastCons = cons
	next := max(maxSeq+1, in.start)
	if !in.gap || stream < next {
		return 0, 0 // no gap, or a redelivery: the first deliveries lost lie ahead
	}
	in.gap = false
	return next, stream
}
