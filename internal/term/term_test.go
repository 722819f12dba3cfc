package term

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestIsTerminal: a buffer, a regular file and a pipe are not terminals;
// /dev/tty's character device is (where the test has one).
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsTerminal(&bytes.Buffer{}) || IsTerminal(f) || IsTerminal(w) {
		t.Error("a buffer, a file or a pipe taken for a terminal")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	// /dev/null is a character device: IsTerminal says so, as the
	// commands have always judged (a progress line there is harmless).
	if !IsTerminal(null) {
		t.Errorf("%s is a character device, IsTerminal says no", os.DevNull)
	}
}
