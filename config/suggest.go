package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// unknownField words the YAML decoder's "line N: field K not found in type
// T" for the field at path (as errorPath named it; "" when it could not):
// the Go type becomes the mapping's YAML path, with the closest known field
// (`unknown field "ulr"; did you mean "url"?`) and the mapping's known
// fields.
func unknownField(line, key, path string) string {
	parent, fields := "", []string(nil)
	if path != "" {
		parent = parentPath(path)
		fields = knownFields(parent)
	}
	if len(fields) == 0 {
		return fmt.Sprintf("line %s: unknown field %q", line, key)
	}
	where := parent
	if where == "" {
		where = "the top level"
	}
	if s := closest(key, fields); s != "" {
		return fmt.Sprintf("line %s: unknown field %q; did you mean %q? (%s has %s)", line, key, s, where, strings.Join(fields, ", "))
	}
	return fmt.Sprintf("line %s: unknown field %q (%s has %s)", line, key, where, strings.Join(fields, ", "))
}

// parentPath is the path of the mapping that holds the field at path:
// "nats" for "nats.ulr", "pipelines[0]" for "pipelines[0].nme", "" for a
// top-level field, `x` for `x["a.b"]`.
func parentPath(path string) string {
	segs := splitPath(path)
	if len(segs) == 0 {
		return ""
	}
	last := segs[len(segs)-1]
	p := strings.TrimSuffix(path, last)
	return strings.TrimSuffix(p, ".")
}

// splitPath splits a YAML path into its segments as written: "nats",
// ".url" (a name after a dot), "[0]", `["a.b"]`. A malformed path gives
// nil.
func splitPath(path string) []string {
	var segs []string
	for i := 0; i < len(path); {
		start := i
		switch path[i] {
		case '[':
			if i+1 < len(path) && path[i+1] == '"' {
				q, err := strconv.QuotedPrefix(path[i+1:])
				if err != nil || i+1+len(q) >= len(path) || path[i+1+len(q)] != ']' {
					return nil
				}
				i += len(q) + 2
			} else {
				end := strings.IndexByte(path[i:], ']')
				if end < 0 {
					return nil
				}
				i += end + 1
			}
		default:
			if path[i] == '.' {
				i++
			}
			for i < len(path) && path[i] != '.' && path[i] != '[' {
				i++
			}
		}
		segs = append(segs, path[start:i])
	}
	return segs
}

// knownFields returns the YAML keys of the mapping at path in a Config
// ("" the top level, "nats", "pipelines[0].learner"), in the order the
// structs declare them; nil when path names no struct.
func knownFields(path string) []string {
	t := reflect.TypeFor[Config]()
	for _, seg := range splitPath(path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case strings.HasPrefix(seg, "["):
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array && t.Kind() != reflect.Map {
				return nil
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := fieldByKey(t, strings.TrimPrefix(seg, "."))
			if !ok {
				return nil
			}
			t = f
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	structKeys(t, func(key string, _ reflect.Type) bool {
		keys = append(keys, key)
		return true
	})
	return keys
}

// fieldByKey returns the type of the field of struct t whose YAML key is key.
func fieldByKey(t reflect.Type, key string) (reflect.Type, bool) {
	var found reflect.Type
	structKeys(t, func(k string, ft reflect.Type) bool {
		if k == key {
			found = ft
			return false
		}
		return true
	})
	return found, found != nil
}

// structKeys calls f with each YAML key of struct t and its field's type,
// as go.yaml.in/yaml/v3 names them (the tag's name, else the lower-cased
// field name; ",inline" fields' keys in place; "-" and unexported fields
// skipped), until f returns false.
func structKeys(t reflect.Type, f func(key string, ft reflect.Type) bool) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !structKeys(ft, f) {
				return false
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		if !f(name, sf.Type) {
			return false
		}
	}
	return true
}

// closest returns the known field nearest to key by edit distance, when it
// is near enough to be a typo (at most 1 edit for keys up to 4 bytes, 2 up
// to 8, 3 beyond; or one starts the other, as "dimension" and "dim", or
// key ends it, as "addr" and "metrics_addr"), else "". Ties go to the first
// declared.
func closest(key string, known []string) string {
	best, bestD := "", -1
	limit := 3
	switch {
	case len(key) <= 4:
		limit = 1
	case len(key) <= 8:
		limit = 2
	}
	lower := strings.ToLower(key)
	for _, k := range known {
		d := editDistance(lower, k)
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = k, d
		}
	}
	if best != "" {
		return best
	}
	for _, k := range known {
		if len(lower) >= 3 && (strings.HasPrefix(k, lower) || strings.HasSuffix(k, lower)) ||
			len(k) >= 3 && strings.HasPrefix(lower, k) {
			return k
		}
	}
	return ""
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment: an adjacent transposition counts 1) between a and b, by bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
