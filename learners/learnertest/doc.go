// Package learnertest is the conformance suite every learners.Learner runs
// from its tests, plus helpers to find and read the shared evaluation data.
//
// Check feeds a learner a deterministic stream and verifies the contract of
// the learners package: determinism, purity of Transform and Score, inputs
// left unchanged, sentinel errors for bad input with the state untouched,
// ErrNotReady before warm-up, State/Restore round trips, rejection of
// corrupted states, zero allocations on the hot path, bounded memory, and a
// Model export that reproduces Transform.
//
// Its one reason to change is the contract every learner must meet and the
// shared evaluation data.
package learnertest
