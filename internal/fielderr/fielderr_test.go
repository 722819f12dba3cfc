package fielderr

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

var errSentinel = errors.New("pkg: invalid config")

func TestErrorText(t *testing.T) {
	for _, tt := range []struct {
		e    *Error
		want string
	}{
		{New("pkg: invalid config", errSentinel, "dim", "must be ≥ 1, got %d", 0), "pkg: invalid config: dim: must be ≥ 1, got 0"},
		{New("", nil, "dim", "bad"), "dim: bad"},
		{New("config", nil, "", "bad"), "config: bad"},
		{&Error{Err: errors.New("bad")}, "bad"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	e := New("pkg: invalid config", errSentinel, "dim", "bad")
	if !errors.Is(e, errSentinel) {
		t.Error("errors.Is(e, sentinel) = false")
	}
	if e.Err.Error() != "bad" {
		t.Errorf("Err = %q, want the problem alone", e.Err)
	}
	if errors.Is(New("pkg", nil, "dim", "bad"), errSentinel) {
		t.Error("a problem without a sentinel matches one")
	}
}

func TestJoin(t *testing.T) {
	for _, tt := range [][3]string{
		{"", "", ""}, {"a", "", "a"}, {"", "b", "b"}, {"a", "b.c", "a.b.c"}, {"a", "[0].b", "a[0].b"}, {"a", `["x.y"]`, `a["x.y"]`},
	} {
		if got := Join(tt[0], tt[1]); got != tt[2] {
			t.Errorf("Join(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
}

// Prefix re-paths and re-scopes every problem of nested joins, keeps the
// sentinel, leaves the inner errors as they were and wraps a foreign error.
func TestPrefix(t *testing.T) {
	inner := New("learners", errSentinel, "gamma", "must be > 0")
	err := errors.Join(
		New("learners", errSentinel, "dim", "must be ≥ 1"),
		errors.Join(Prefix("learners", "kernel", inner)...),
		nil,
		fmt.Errorf("plain"),
	)
	got := Prefix("processor", "pipelines[0].learner", err, nil)
	var texts []string
	for _, e := range got {
		texts = append(texts, e.Error())
	}
	want := []string{
		"processor: pipelines[0].learner.dim: must be ≥ 1",
		"processor: pipelines[0].learner.kernel.gamma: must be > 0",
		"processor: pipelines[0].learner: plain",
	}
	if !slices.Equal(texts, want) {
		t.Errorf("Prefix:\n got %q\nwant %q", texts, want)
	}
	for _, e := range got[:2] {
		if !errors.Is(e, errSentinel) {
			t.Errorf("%v lost its sentinel", e)
		}
	}
	if inner.Path != "gamma" || inner.Scope != "learners" {
		t.Errorf("Prefix changed its input: %+v", inner)
	}
	var fe *Error
	if !errors.As(got[1], &fe) || fe.Path != "pipelines[0].learner.kernel.gamma" || fe.Err.Error() != "must be > 0" {
		t.Errorf("errors.As: %+v", fe)
	}
	if Prefix("x", "y", nil) != nil || Prefix("x", "y") != nil {
		t.Error("Prefix of no problem is not nil")
	}
}

func TestSplit(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	if got := Split(errors.Join(a, errors.Join(b, c))); !slices.Equal(got, []error{a, b, c}) {
		t.Errorf("Split = %v", got)
	}
	if got := Split(a); !slices.Equal(got, []error{a}) {
		t.Errorf("Split(a) = %v", got)
	}
	if Split(nil) != nil {
		t.Error("Split(nil) != nil")
	}
}
