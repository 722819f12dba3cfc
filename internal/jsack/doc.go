// Package jsack parses the reply subject of a JetStream delivery
// ($JS.ACK.…) without allocating. It stands alone so that its fuzz target
// links nats.go only (a test binary that links nats-server fuzzes ten
// times slower: every execution scans its coverage counters).
//
// Its one reason to change is the layout of a JetStream delivery's reply
// subject.
package jsack
