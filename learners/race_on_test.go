//go:build race

package learners_test

// raceEnabled: the race detector slows the learners ~10×; the figure
// tests run a reduced grid under it (CI's go test -race ./...).
const raceEnabled = true
