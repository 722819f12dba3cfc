package learners

// Scratch is working memory that a learner needs only while one of its
// calls runs (Learn, Transform, Score, Sync, …): kernel rows, coordinates,
// the subspace iteration's blocks, the eigensolver's workspace. Nothing in
// it survives a call, so one Scratch can serve every learner of a worker
// that runs one key at a time, and a key kept in memory then holds its
// state alone (issue 30: for ikpca d=16 k=2 B=16 the scratch was 7 KB of a
// 21 KB learner).
//
// A Scratch grows to the largest learner it serves (ScratchBytes) and
// never shrinks. It is not safe for concurrent use: the learners that
// share one must all be called from one goroutine, one call at a time (a
// worker and its keys). Results do not depend on whether a learner shares
// a Scratch, nor with whom: bit for bit the same.
type Scratch struct {
	buf []float64
}

// NewScratch returns an empty Scratch.
func NewScratch() *Scratch { return &Scratch{} }

// Bytes is the memory the Scratch holds now (its array as the Go
// allocator rounded it).
func (s *Scratch) Bytes() int { return 8 * cap(s.buf) }

// floats returns n float64s of working memory (their contents are
// whatever the last call left), growing the Scratch when it is smaller.
func (s *Scratch) floats(n int) []float64 {
	if cap(s.buf) < n {
		// append gives the array's capacity as allocated (its size
		// class, or whole pages for a large one), so Bytes is the heap.
		s.buf = append([]float64(nil), make([]float64, n)...)
	}
	return s.buf[:n]
}

// scratchUser is a learner that can take its working memory from a
// shared Scratch.
type scratchUser interface {
	useScratch(ws *Scratch)
	scratchLen() int
}

// ShareScratch makes l take its working memory from ws from now on, and
// reports whether it does: an IKPCA does (its own working memory is then
// garbage, and its MemoryBytes no longer counts it); other kinds keep
// theirs and ignore ws. l must from then on be called from the goroutine
// that uses ws. A nil ws does nothing.
func ShareScratch(l Learner, ws *Scratch) bool {
	u, ok := l.(scratchUser)
	if !ok || ws == nil {
		return false
	}
	u.useScratch(ws)
	return true
}

// ScratchBytes is the working memory a learner of cfg takes from a shared
// Scratch, in bytes as allocated (0 for a kind that keeps its own, see
// ShareScratch): what a Scratch serving such learners grows to.
func ScratchBytes(cfg Config) (int, error) {
	l, err := New(cfg)
	if err != nil {
		return 0, err
	}
	if u, ok := l.(scratchUser); ok {
		var ws Scratch
		ws.floats(u.scratchLen())
		return ws.Bytes(), nil
	}
	return 0, nil
}
