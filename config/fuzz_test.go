package config

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlKeys returns the YAML keys of struct type t, with inline structs flattened.
func yamlKeys(t reflect.Type, keys map[string]bool) map[string]bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			yamlKeys(f.Type, keys)
		case name != "":
			keys[name] = true
		}
	}
	return keys
}

var aboutKey = regexp.MustCompile(`(?s)unknown field ("(?:[^"\\]|\\.)*")|mapping key ("(?:[^"\\]|\\.)*") already defined`)

// namesField reports whether msg names a field: "config: <path>: …" with
// the path starting with a known top-level key, or ending with the
// unknown or duplicate key that the error is about (as a name or a quoted
// ["key"]).
func namesField(msg string, top map[string]bool) bool {
	rest := strings.TrimPrefix(msg, "config: ")
	for k := range top {
		if len(rest) > len(k) && rest[:len(k)] == k && strings.ContainsRune(".[:", rune(rest[len(k)])) {
			return true
		}
	}
	m := aboutKey.FindStringSubmatch(msg)
	i := strings.Index(rest, ": line ")
	if m == nil || i < 0 {
		return false
	}
	key, _ := strconv.Unquote(m[1] + m[2])
	return strings.HasSuffix(rest[:i], key) || strings.HasSuffix(rest[:i], "["+strconv.Quote(key)+"]")
}

// checkFinite fails if v holds a NaN or ±Inf float anywhere.
func checkFinite(t *testing.T, data []byte, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("input %q: accepted %s = %v", data, path, f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			checkFinite(t, data, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkFinite(t, data, v.Index(i), path+"[]")
		}
	case reflect.Pointer:
		if !v.IsNil() {
			checkFinite(t, data, v.Elem(), path)
		}
	}
}

// FuzzRead: config.Read never panics; every error it reports (one per
// problem) starts with "config: " and names either a YAML line (a syntax
// error or a bad ${VAR} reference) or a field by its path from a top-level key; a config it accepts
// validates, holds no NaN or ±Inf, and written back as YAML reads back to
// the same config (the canonical form is a fixed point).
func FuzzRead(f *testing.F) {
	if b, err := os.ReadFile("../examples/kpcastream.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		minimal,
		"workers: 3\nqueue_size: 8\nnats: {url: 'nats://h:4222', reconnect_wait: 3s}\n" + minimal,
		"workerz: 3\n" + minimal,
		"pipelines:\n  - name: p\n    input: {subject: in.*}\n    learner: {dim: x, components: 2, kernel: {name: rbf, gamma: .nan}}\n",
		"a: &a [*a]\n",
		"---\nworkers: 1\n---\nworkers: 2\n",
		"log: {level: loud}\nembedded: {port: 70000}\n",
		"workers: ${W:2}\ndata_dir: \"a$${b}$$${c}\"\n" + minimal,
		"nats: {url: \"${UNSET}\"}\n# ${IN_COMMENT}\nlog: {level: ${L\n",
		"",
	} {
		f.Add([]byte(s))
	}
	top := yamlKeys(reflect.TypeFor[Config](), map[string]bool{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Read(bytes.NewReader(data), noEnv, Overrides{})
		if err != nil {
			if c != nil {
				t.Fatalf("input %q: config returned with error %v", data, err)
			}
			for _, e := range Problems(err) {
				msg := e.Error()
				if strings.HasPrefix(msg, "config: yaml: ") || regexp.MustCompile(`^config: substitution: line \d+: `).MatchString(msg) {
					continue
				}
				if !namesField(msg, top) {
					t.Fatalf("input %q: error %q names neither a YAML line, a known field nor the unknown one", data, msg)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("input %q: accepted, but Validate says %v", data, err)
		}
		checkFinite(t, data, reflect.ValueOf(*c), "config")
		b1, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("input %q: marshal: %v", data, err)
		}
		// A file's "${" is a variable reference: a writer escapes it.
		c2, err := Read(bytes.NewReader(bytes.ReplaceAll(b1, []byte("${"), []byte("$${"))), noEnv, Overrides{})
		if err != nil {
			t.Fatalf("input %q: written back as\n%s\ndoes not read: %v", data, b1, err)
		}
		b2, _ := yaml.Marshal(c2)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("input %q: not a fixed point:\n%s\n%s", data, b1, b2)
		}
	})
}
