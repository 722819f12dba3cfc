package config

import (
	"errors"

	"github.com/kpcastream/kpcastream/internal/fielderr"
)

// FieldError is one problem of a configuration: the field it is about,
// named by its YAML path ("pipelines[0].learner.dim"; "" when no one field
// can be named, such as a YAML syntax error), and what is wrong with it.
// Read and Validate return every problem at once as errors joined with
// errors.Join; match one with errors.As, list them all with Problems.
//
// It is the type every layer validates into (learners, snapshot,
// processor: see internal/fielderr), each naming fields relative to its
// own struct; config puts them under their place in the file. Its text is
// "config: <path>: <problem>", or "config: yaml: <problem>" for a problem
// of the YAML that names no field. Problems of a learner's settings match
// learners.ErrConfig with errors.Is, a classifier's classify.ErrConfig.
type FieldError = fielderr.Error

// scope starts the text of config's problems.
const scope = "config"

// Problems returns the problems joined in err (as returned by Read, Load or
// Validate) one by one, each a *FieldError when it names a field; nil for a
// nil err.
func Problems(err error) []error { return fielderr.Split(err) }

// decodeErr is a problem of the YAML with the decoder's text msg, about
// the field at path ("" for none: "config: yaml: <msg>").
func decodeErr(path, msg string) *FieldError {
	if path == "" {
		return &FieldError{Scope: scope + ": yaml", Err: errors.New(msg)}
	}
	return &FieldError{Scope: scope, Path: path, Err: errors.New(msg)}
}
