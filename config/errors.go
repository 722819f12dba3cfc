package config

import (
	"errors"
	"strings"
)

// FieldError is one problem of a configuration: the field it is about,
// named by its YAML path ("pipelines[0].learner.dim"; "" when no one field
// can be named, such as a YAML syntax error), and what is wrong with it.
// Read and Validate return every problem at once as errors joined with
// errors.Join; match one with errors.As, list them all with Problems.
type FieldError struct {
	Path string
	Err  error
}

// Error is "config: <path>: <problem>", or "config: yaml: <problem>" for a
// problem that names no field.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return "config: yaml: " + e.Err.Error()
	}
	return "config: " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns the problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Problems returns the problems joined in err (as returned by Read, Load or
// Validate) one by one, each a *FieldError when it names a field; nil for a
// nil err.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range unjoin(err) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, Problems(errors.Join(j.Unwrap()...))...)
			continue
		}
		out = append(out, e)
	}
	return out
}

// fieldErr is a FieldError whose problem is the text msg.
func fieldErr(path, msg string) *FieldError {
	return &FieldError{Path: path, Err: errors.New(msg)}
}

// splitPath splits a lower layer's message "<path>: <problem>" (as
// processor.Config.Validate writes them, after its "processor: " prefix)
// into a FieldError; the path is everything up to the first ": ".
func splitPath(msg string) *FieldError {
	path, problem, ok := strings.Cut(msg, ": ")
	if !ok || strings.ContainsAny(path, " \t") {
		return fieldErr("", msg)
	}
	return fieldErr(path, problem)
}
