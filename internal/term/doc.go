// Package term tells whether an output is a terminal: the command line
// and the benchmark redraw a progress line in place only there. Its one
// reason to change is how a terminal is recognised.
package term
