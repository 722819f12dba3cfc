package snapshot

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/kpcastream/kpcastream/internal/fielderr"
)

var kvKeyRe = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

// validKVKey applies the rules of nats.go for KV keys.
func validKVKey(k string) bool {
	return kvKeyRe.MatchString(k) && !strings.HasPrefix(k, ".") && !strings.HasSuffix(k, ".") && !strings.Contains(k, "..")
}

func TestEncodeKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"vib.sensor-7", "vib.sensor-7"},
		{"a/b_c", "a/b_c"},
		{"a b", "a=20b"},
		{"a=b", "a=3Db"},
		{"a..b", "a=2E=2Eb"},
		{".a.", "=2Ea=2E"},
		{"ü", "=C3=BC"},
		{"*", "=2A"},
		{">", "=3E"},
		{"x.y.z", "x.y.z"},
	}
	for _, tt := range tests {
		got, err := EncodeKey(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("EncodeKey(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := EncodeKey(""); err == nil {
		t.Errorf("EncodeKey(\"\") succeeded")
	}
}

func FuzzEncodeKey(f *testing.F) {
	for _, s := range []string{"a", "a.b", "..", "=", "a=3D", "\xff", "p.sensor 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		k, err := EncodeKey(key)
		if key == "" {
			if err == nil {
				t.Fatalf("empty key accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !validKVKey(k) {
			t.Fatalf("EncodeKey(%q) = %q is not a valid KV key", key, k)
		}
		back, err := DecodeKey(k)
		if err != nil || back != key {
			t.Fatalf("DecodeKey(EncodeKey(%q)) = %q, %v", key, back, err)
		}
	})
}

func TestDecodeKeyErrors(t *testing.T) {
	for _, s := range []string{"a=", "a=4", "a=zz", "=3d"} {
		if _, err := DecodeKey(s); err == nil {
			t.Errorf("DecodeKey(%q) succeeded", s)
		}
	}
}

func TestJoinKey(t *testing.T) {
	if got := JoinKey("vib", "sensor.1"); got != "vib.sensor.1" {
		t.Errorf("JoinKey = %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	err := Config{Bucket: "a.b", ObjectBucket: "x y", Replicas: 7, MaxInline: -1, History: 65}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	// Each problem names its field by its YAML name, as config's file
	// (snapshots.<field>) does.
	var paths []string
	for _, e := range fielderr.Split(err) {
		var fe *fielderr.Error
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is not a *fielderr.Error", e, e)
		}
		if !strings.HasPrefix(e.Error(), "snapshot: "+fe.Path+": ") {
			t.Errorf("problem %q does not start with snapshot: %s: ", e, fe.Path)
		}
		paths = append(paths, fe.Path)
	}
	if got, want := strings.Join(paths, " "), "bucket object_bucket replicas max_inline history"; got != want {
		t.Errorf("paths %q, want %q", got, want)
	}
}
