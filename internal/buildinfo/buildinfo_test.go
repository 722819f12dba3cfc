package buildinfo

import "testing"

func TestStamped(t *testing.T) {
	base := Info{Version: "(devel)", Revision: "unknown", GoVersion: "go1.26"}
	if got := stamped(base, "", ""); got != base {
		t.Errorf("no stamp: %+v", got)
	}
	got := stamped(base, " v1.2.3 ", "0123456789abcdef")
	if got.Version != "v1.2.3" || got.Revision != "0123456789abcdef" || got.GoVersion != "go1.26" {
		t.Errorf("stamped: %+v", got)
	}
}

// TestSemVer: the micro service's version is a semantic version whatever
// the binary was built as.
func TestSemVer(t *testing.T) {
	for _, c := range []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.2.3"}, "1.2.3"},
		{Info{Version: "v0.0.0-20261126031000-0123456789ab"}, "0.0.0-20261126031000-0123456789ab"},
		{Info{Version: "v1.2.4-0.20261126031000-0123456789ab+dirty"}, "1.2.4-0.20261126031000-0123456789ab+dirty"},
		{Info{Version: "(devel)", Revision: "0123456789abcdef0123-dirty"}, "0.0.0-devel+0123456789ab"},
		{Info{Version: "(devel)", Revision: "unknown"}, "0.0.0-devel"},
		{Info{Version: "unknown", Revision: "not/valid"}, "0.0.0-devel"},
		{Info{Version: "1.0"}, "0.0.0-devel"},
	} {
		if got := c.info.SemVer(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.info, got, c.want)
		}
		if !semVer.MatchString(c.info.SemVer()) {
			t.Errorf("%+v: %q is not a semantic version", c.info, c.info.SemVer())
		}
	}
}

func TestParseStamp(t *testing.T) {
	v, rev := parseStamp("version=v1.4.0\nrevision=0123abc\n")
	if v != "v1.4.0" || rev != "0123abc" {
		t.Errorf("%q %q", v, rev)
	}
	if v, rev := parseStamp("version=\nrevision=\n"); v != "" || rev != "" {
		t.Errorf("blank stamp: %q %q", v, rev)
	}
	if v, rev := parseStamp(""); v != "" || rev != "" {
		t.Errorf("empty stamp: %q %q", v, rev)
	}
	if v, _ := parseStamp(stamp); v != "" {
		t.Errorf("the committed stamp.txt names version %q: it must be empty (the Dockerfile writes it)", v)
	}
}
