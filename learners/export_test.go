package learners

// The external tests (package learners_test) reach the Lanczos solver,
// unexported since nothing outside the package uses it, through these.
var LanczosTop = lanczosTop

type LanczosOptions = lanczosOptions

// SetMoveGapArea sets the area of centroid's move gap (moveGapArea by
// default; a huge value gives the gap of 2 at every size, the schedule
// before the gap grew with m²).
func SetMoveGapArea(l *IKPCA, a int64) { l.gapArea = a }

// SetMoveBurst sets the centroid policy's burst of moves (moveBurstSize by default).
func SetMoveBurst(l *IKPCA, n int64) { l.moveBurst = n }
