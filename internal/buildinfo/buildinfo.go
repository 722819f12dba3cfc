package buildinfo

import (
	_ "embed"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

//go:embed stamp.txt
var stamp string

// parseStamp returns the version and revision lines of a stamp file
// (blank values, unknown keys and comments are ignored).
func parseStamp(s string) (version, revision string) {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version":
			version = strings.TrimSpace(v)
		case "revision":
			revision = strings.TrimSpace(v)
		}
	}
	return version, revision
}

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
	v, rev := parseStamp(stamp)
	return stamped(info, v, rev)
}

// stamped is info with the stamped values v and rev where they are set.
func stamped(info Info, v, rev string) Info {
	if v = strings.TrimSpace(v); v != "" {
		info.Version = v
	}
	if rev = strings.TrimSpace(rev); rev != "" {
		info.Revision = rev
	}
	return info
}

// semVer is the regular expression semver.org suggests (as the NATS micro
// package validates a service's version).
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// SemVer is Version as a semantic version, for the NATS micro service
// (which accepts nothing else): "v1.2.3" and Go's pseudo-versions lose
// their "v"; a version that is not one ("(devel)", "unknown") becomes
// "0.0.0-devel", with the revision's first 12 characters as build metadata
// when it is known ("0.0.0-devel+0123456789ab").
func (i Info) SemVer() string {
	if v := strings.TrimPrefix(i.Version, "v"); semVer.MatchString(v) {
		return v
	}
	rev := i.Revision
	if rev == "unknown" {
		rev = ""
	}
	rev = strings.TrimSuffix(rev, "-dirty")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" || !semVer.MatchString("0.0.0+"+rev) {
		return "0.0.0-devel"
	}
	return "0.0.0-devel+" + rev
}
