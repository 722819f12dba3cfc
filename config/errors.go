package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

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

// reTypeMsg reads a YAML type error: its line, the YAML tag and value
// found, and the Go type wanted.
var reTypeMsg = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")

// typeMessage says a YAML type error in the file's terms ("line 6: \"four\"
// is not an integer"), not the decoder's ("cannot unmarshal !!str `four`
// into int"); other messages are returned as they are.
func typeMessage(msg string) string {
	m := reTypeMsg.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want, ok := goTypes[m[4]]
	if !ok {
		return msg
	}
	found := map[string]string{"!!str": "text", "!!int": "an integer", "!!float": "a number", "!!bool": "true or false",
		"!!map": "a mapping (fields)", "!!seq": "a list", "!!null": "empty", "!!timestamp": "a date", "!!binary": "binary"}[m[2]]
	if found == "" {
		found = m[2]
	}
	if m[3] != "" {
		return fmt.Sprintf("line %s: %q is not %s", m[1], m[3], want)
	}
	return fmt.Sprintf("line %s: %s, want %s", m[1], found, want)
}

// goTypes words each Go type of the file's fields (by reflect's name of
// it, as the YAML decoder writes it) as a YAML value.
var goTypes = func() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if _, seen := out[t.String()]; seen {
			return
		}
		switch {
		case t == reflect.TypeOf(time.Duration(0)):
			out[t.String()] = "a duration (such as 500ms, 2s or 1m30s)"
			return
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[t.String()] = "an integer"
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[t.String()] = "a whole number ≥ 0"
		case reflect.Float32, reflect.Float64:
			out[t.String()] = "a number"
		case reflect.Bool:
			out[t.String()] = "true or false"
		case reflect.String:
			out[t.String()] = "text"
		case reflect.Slice, reflect.Array:
			out[t.String()] = "a list"
			walk(t.Elem())
		case reflect.Map:
			out[t.String()] = "a mapping"
			walk(t.Elem())
		case reflect.Pointer:
			walk(t.Elem())
			out[t.String()] = out[t.Elem().String()]
		case reflect.Struct:
			out[t.String()] = "a mapping of fields"
			for i := 0; i < t.NumField(); i++ {
				if f := t.Field(i); f.IsExported() && !strings.HasPrefix(f.Tag.Get("yaml"), "-") {
					walk(f.Type)
				}
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	out["config.Config"] = "a mapping of fields (nats:, pipelines:, …)"
	return out
}()
