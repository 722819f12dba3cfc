// Package term tells whether an output is a terminal: the command line
// and the benchmark redraw a progress line in place only there. Its one
// reason to change is how a terminal is recognised.
package term

import (
	"io"
	"os"
)

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
