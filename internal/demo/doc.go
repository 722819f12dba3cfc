// Package demo is kpcastream demo: an embedded NATS server, workers of
// one pipeline (run by the command's own serve), a drifting synthetic
// stream published at a fixed rate (an ellipse whose plane changes every
// DriftEvery; with Classify two labelled rings and a classifier stage)
// and a status line per interval read from the outputs and the service
// endpoints. Its one reason to change is what the demo shows a newcomer.
// The command parses flags into Options and calls Run. Run starts
// goroutines and stops them all before it returns.
package demo
