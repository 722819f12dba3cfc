package fielderr

import "fmt"

// Error is one problem of a configuration.
type Error struct {
	// Scope says what reports the problem; Error writes it first
	// ("learners: invalid config", "processor", "config"); "" writes
	// nothing.
	Scope string
	// Path names the field by its YAML path relative to the validated
	// struct: "dim", "kernel.gamma", "pipelines[0].learner.kind",
	// `nats["a.b"]` for a key that is no plain name; "" for no one field.
	Path string
	// Err is the problem, without the path ("must be ≥ 1, got 0"). It may
	// wrap a sentinel (learners.ErrConfig, …): errors.Is sees it through
	// the Error.
	Err error
}

// Error is "<scope>: <path>: <problem>", leaving out an empty scope or
// path.
func (e *Error) Error() string {
	s := e.Err.Error()
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	if e.Scope != "" {
		s = e.Scope + ": " + s
	}
	return s
}

// Unwrap returns the problem.
func (e *Error) Unwrap() error { return e.Err }

// New returns the problem of the field at path, reported by scope, with
// the text format % args. A non-nil sentinel is wrapped: errors.Is(err,
// sentinel) holds, and its text is not written.
func New(scope string, sentinel error, path, format string, args ...any) *Error {
	return &Error{Scope: scope, Path: path, Err: &problem{msg: fmt.Sprintf(format, args...), sentinel: sentinel}}
}

// problem is a message that matches a sentinel without writing it.
type problem struct {
	msg      string
	sentinel error
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return p.sentinel }

// Prefix returns the problems of errs (each an *Error, nil, or errors
// joined with errors.Join at any depth) one by one, each a new *Error
// reported by scope whose path is path followed by the problem's own path
// ("learner" and "kernel.gamma" give "learner.kernel.gamma"; see Join). A
// problem that is no *Error becomes one about path itself. The *Errors of
// errs are not changed. It returns nil when there is no problem.
func Prefix(scope, path string, errs ...error) []error {
	var out []error
	for _, err := range errs {
		for _, e := range Split(err) {
			fe, ok := e.(*Error)
			if !ok {
				out = append(out, &Error{Scope: scope, Path: path, Err: e})
				continue
			}
			out = append(out, &Error{Scope: scope, Path: Join(path, fe.Path), Err: fe.Err})
		}
	}
	return out
}

// Join returns the path of field inside the struct at path: "a" and "b"
// give "a.b", "a" and "[0].b" give "a[0].b"; an empty side gives the
// other.
func Join(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	case field[0] == '[':
		return path + field
	}
	return path + "." + field
}

// Split returns the errors joined in err (with errors.Join, at any depth)
// one by one, or err alone; nil for a nil err.
func Split(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Split(e)...)
	}
	return out
}
