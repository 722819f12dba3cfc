package config

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// expand substitutes the environment variable references of a
// configuration file in its raw text, before the YAML is parsed:
//
//   - ${VAR} is the value of VAR; VAR unset is an error naming it and its
//     line (a variable set to "" gives "").
//   - ${VAR:default} is the value of VAR, or default when VAR is unset or
//     empty; default is any text without "}" (it may be empty: ${VAR:}).
//   - $${ is a literal "${" (nothing is substituted inside it: $${VAR}
//     reads ${VAR}); a "$" anywhere else is itself.
//   - VAR is a name of letters, digits and underscores, not starting with a
//     digit. Any other "${" (no closing "}", another name) is an error.
//   - Lines that are YAML comments (their first non-blank character is
//     "#") are left as they are: a commented-out line may name a variable
//     that is not set.
//
// The value is inserted as it is, so it is read as YAML: quote a reference
// whose value may hold YAML syntax (": ", " #", a leading "*" or "&"), as in
// password: "${NATS_PASSWORD}". Every problem is returned, each a
// *FieldError naming the line (no field can be named before parsing).
func expand(data []byte, lookup func(string) (string, bool)) ([]byte, []error) {
	if !strings.Contains(string(data), "${") {
		return data, nil
	}
	var (
		out  strings.Builder
		errs []error
	)
	out.Grow(len(data))
	for n, line := range strings.SplitAfter(string(data), "\n") {
		if t := strings.TrimLeft(line, " \t"); strings.HasPrefix(t, "#") || !strings.Contains(line, "${") {
			out.WriteString(line)
			continue
		}
		for {
			i := strings.Index(line, "${")
			if i < 0 {
				out.WriteString(line)
				break
			}
			if i > 0 && line[i-1] == '$' { // $${: a literal ${
				out.WriteString(line[:i-1])
				out.WriteString("${")
				line = line[i+2:]
				continue
			}
			out.WriteString(line[:i])
			rest := line[i+2:]
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				errs = append(errs, expandErr(n+1, "%q has no closing }: write ${VAR} or ${VAR:default}, or $${ for a literal ${", clip(line[i:])))
				out.WriteString(line[i:])
				break
			}
			ref := rest[:end]
			name, def, hasDef := strings.Cut(ref, ":")
			line = rest[end+1:]
			if !varName(name) {
				errs = append(errs, expandErr(n+1, "${%s}: %q is not a variable name (letters, digits and _, not starting with a digit); write $${ for a literal ${", ref, name))
				continue
			}
			v, ok := lookup(name)
			switch {
			case hasDef && (!ok || v == ""):
				v = def
			case !ok:
				errs = append(errs, expandErr(n+1, "${%s}: environment variable %s is not set (give it a value, or a default: ${%s:default})", name, name, name))
				continue
			}
			out.WriteString(v)
		}
	}
	return []byte(out.String()), errs
}

// expandErr is a problem of a ${…} reference on a line of the file.
func expandErr(line int, format string, args ...any) *FieldError {
	return &FieldError{Scope: scope + ": substitution", Err: fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))}
}

// varName reports whether s is an environment variable name.
func varName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// clip shortens s to one line of at most 40 bytes for a message.
func clip(s string) string {
	r := []rune(strings.TrimRight(s, "\r\n"))
	if len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return string(r)
}

// unsetMark stands for an unset variable in expandUnused's trial expansion.
const unsetMark = "KPCASTREAM_UNSET_VARIABLE"

// expandUnused is expand, except that when unused is not nil and every
// unset variable is referenced only in the values of fields unused reports,
// those references read as "" and are no error. Otherwise (an unset
// variable in a field the caller reads, in a key, or a file that is not
// YAML) it is expand, every problem reported.
func expandUnused(data []byte, lookup func(string) (string, bool), unused func(string) bool) ([]byte, []error) {
	out, errs := expand(data, lookup)
	if len(errs) == 0 || unused == nil {
		return out, errs
	}
	marked, merrs := expand(data, func(name string) (string, bool) {
		if v, ok := lookup(name); ok {
			return v, ok
		}
		return unsetMark, true
	})
	if len(merrs) > 0 { // other problems than unset variables
		return out, errs
	}
	var doc yaml.Node
	if yaml.Unmarshal(marked, &doc) != nil || !marksUnused(&doc, "", unused) {
		return out, errs
	}
	return []byte(strings.ReplaceAll(string(marked), unsetMark, "")), nil
}

// marksUnused reports whether every unsetMark in the tree of n (at YAML
// path path) is in the value of a field unused reports.
func marksUnused(n *yaml.Node, path string, unused func(string) bool) bool {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if !marksUnused(c, path, unused) {
				return false
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if strings.Contains(k.Value, unsetMark) {
				return false
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if !marksUnused(n.Content[i+1], p, unused) {
				return false
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if !marksUnused(c, path+"["+strconv.Itoa(i)+"]", unused) {
				return false
			}
		}
	default:
		if strings.Contains(n.Value, unsetMark) && !unused(path) {
			return false
		}
	}
	return true
}
