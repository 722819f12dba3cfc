package learners

// The external tests (package learners_test) reach the Lanczos solver,
// unexported since nothing outside the package uses it, through these.
var LanczosTop = lanczosTop

type LanczosOptions = lanczosOptions
