package machine

// Dead letters stored, remembered (issue 28, sim seed 144421 on older
// code). An input whose dead letter is stored is terminated: the server
// does not send it again once the termination reaches it — but a copy
// may come before that, when the dead letter was retried past ack_wait,
// or its termination was lost with the connection. Such a copy is
// settled at once (acked, "skipped"): no second dead letter, and above
// all no load of its key. A copy taken like a new input could not be
// told apart from a message to apply: its key's state never holds a
// rejected message (LastSeq stays below it), so a copy nak'ed — its
// key's load failed, or it waited behind a block — blocked the key on a
// message the server, which terminated it, never sends again, and no
// reload cleared that block: the key's later messages waited BlockTTL.
//
// Every way a copy is taken goes through takenLetter (delivered, refused at
// decoding or not, or from the backlog after its key's load), before
// any wait, load or dead letter; a copy that comes while the dead
// letter is in flight waits for it (the machine takes no input then),
// and finds it stored or not. Not stored (DeadLetterFailed), the input
// was given back and its copies are taken as any input. No other
// settled input is a variant: an acknowledged one was applied (its key's
// LastSeq holds it, in memory and in the snapshot saved before the key
// is unloaded) or skipped (LastSeq was past it), so a copy of it is
// skipped, and a block on it cleared as soon as the key is loaded.
//
// Memory: the last Config.Letters stored dead letters (≤ 0:
// defaultLetters), oldest forgotten first. A copy of a dead letter
// forgotten is taken as before — dead-lettered again, or, if its key's
// load fails, waited for up to BlockTTL.

const defaultLetters = 1024

// letters is the ring of stored dead letters, by sequence.
type letters struct {
	limit int
	bySeq map[uint64]string // sequence → key
	order []uint64          // ring, oldest at next once full
	next  int
}

// add remembers that input seq of key was dead-lettered.
func (l *letters) add(key string, seq uint64) {
	if l.bySeq == nil {
		l.limit = max(l.limit, 1)
		l.bySeq = map[uint64]string{}
	}
	if _, ok := l.bySeq[seq]; ok {
		l.bySeq[seq] = key
		return
	}
	if len(l.order) < l.limit {
		l.order = append(l.order, seq)
	} else {
		delete(l.bySeq, l.order[l.next])
		l.order[l.next] = seq
		l.next = (l.next + 1) % l.limit
	}
	l.bySeq[seq] = key
}

// stored reports whether input seq of key was dead-lettered.
func (l *letters) stored(key string, seq uint64) bool {
	k, ok := l.bySeq[seq]
	return ok && k == key
}

// takenLetter settles a copy of an input whose dead letter is stored, and
// reports whether c was one. A fenced machine gives it back (ack does).
func (m *Machine[M, O]) takenLetter(key string, msg M, seq uint64) bool {
	if m.core.track == nil || !m.lettered.stored(key, seq) {
		return false
	}
	m.ack(key, msg, seq, ResultSkipped)
	m.copies++
	return true
}

// LetterCopies reports how many copies of inputs whose dead letter was
// stored were settled at once.
func (m *Machine[M, O]) LetterCopies() int { return m.copies }
