//go:build !linux

package e2e

import "time"

// sleepPrecise sleeps for d (time.Sleep: off Linux the simulated round
// trip may come out longer than asked; the bench prints the one it saw).
func sleepPrecise(d time.Duration) { time.Sleep(d) }
