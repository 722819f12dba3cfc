// Package buildinfo reports what the running binary was built from: the
// main module's version, the VCS revision and the Go version, read from
// runtime/debug.ReadBuildInfo (stamped by "go build" in a git checkout).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what the binary was built from. Unknown values are "unknown".
type Info struct {
	Version   string // main module version ("(devel)" for a plain go build outside a tagged checkout)
	Revision  string // vcs.revision, with "-dirty" when vcs.modified
	Time      string // vcs.time (RFC 3339), or ""
	GoVersion string // runtime.Version()
}

// Read returns the Info of the running binary.
func Read() Info {
	info := Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && info.Revision != "unknown" {
		info.Revision += "-dirty"
	}
	return info
}
