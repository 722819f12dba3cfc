//go:build !race

package learners_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
