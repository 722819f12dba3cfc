package config

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"
)

// schemaFile is the schema the repository ships (kpcastream lint --schema
// writes the same).
const schemaFile = "kpcastream.schema.json"

// TestSchemaFieldTable: the field table of doc.go and the structs the
// file is decoded into name the same fields (one source for the docs, lint
// and the schema; issue 33 item 3).
func TestSchemaFieldTable(t *testing.T) {
	docs := fieldTable()
	var leaves []string
	var walk func(rt reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		switch {
		case rt.Kind() == reflect.Struct && rt.String() != "time.Duration":
			structKeys(rt, func(key string, ft reflect.Type) bool {
				p := key
				if path != "" {
					p = path + "." + key
				}
				walk(ft, p)
				return true
			})
		case rt.Kind() == reflect.Slice && rt.Elem().Kind() == reflect.Struct:
			walk(rt.Elem(), path+"[i]")
		default:
			leaves = append(leaves, path)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	for _, l := range leaves {
		if _, ok := docs[l]; !ok {
			t.Errorf("field %s has no row in doc.go's field table", l)
		}
	}
	sort.Strings(leaves)
	for p := range docs {
		if _, found := sort.Find(len(leaves), func(i int) int { return strings.Compare(p, leaves[i]) }); !found {
			t.Errorf("doc.go's field table has a row %q that is no field", p)
		}
	}
	if len(docs) < 100 {
		t.Errorf("%d rows read from doc.go's field table: the table's layout changed?", len(docs))
	}
}

// TestSchemaShipped: the schema in the repository is the one Schema
// generates (regenerate: go run ./cmd/kpcastream lint --schema >
// config/kpcastream.schema.json).
func TestSchemaShipped(t *testing.T) {
	want, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("config/%s is not what Schema generates (doc.go or a config struct changed): go generate ./config", schemaFile)
	}
}

// compileSchema compiles the shipped schema.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource(SchemaID, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlValue decodes a YAML document as JSON would hold it.
func yamlValue(t *testing.T, name string, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSchemaValidatesExamples: every configuration of the repository that
// lint passes (the files .ci/run lints: a top-level "pipelines:", not
// under testdata named bad*/invalid*, and the ConfigMap's config.yaml)
// is valid under the schema, and a typo or a wrong choice is flagged.
func TestSchemaValidatesExamples(t *testing.T) {
	s := compileSchema(t)
	out, err := exec.Command("git", "-C", "..", "ls-files", "*.yaml", "*.yml").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	bad := regexp.MustCompile(`(^|/)testdata/(.*/)?(bad|invalid)[^/]*$`)
	n, modelines := 0, 0
	for _, f := range strings.Fields(string(out)) {
		if bad.MatchString(f) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		docs := [][]byte{b}
		if f == "deploy/k8s/configmap.yaml" {
			docs = configMapConfigs(t, b)
		}
		// A modeline names the shipped schema, relative to the file.
		if m := regexp.MustCompile(`(?m)^# yaml-language-server: \$schema=(\S+)$`).FindSubmatch(b); m != nil {
			if p := filepath.Join("..", filepath.Dir(f), string(m[1])); filepath.Clean(p) != filepath.Join("..", "config", schemaFile) {
				t.Errorf("%s: modeline names %s, not config/%s", f, m[1], schemaFile)
			}
			modelines++
		}
		for _, d := range docs {
			if !regexp.MustCompile(`(?m)^pipelines:`).Match(d) {
				continue
			}
			n++
			if err := s.Validate(yamlValue(t, f, d)); err != nil {
				t.Errorf("%s is not valid under the schema: %#v", f, err)
			}
		}
	}
	if modelines == 0 {
		t.Error("no configuration file of the repository names the schema in a yaml-language-server modeline")
	}
	if n < 3 {
		t.Errorf("%d configuration files validated: want every example", n)
	}
	for name, c := range map[string]struct{ yml, want string }{
		"typo":        {"pipelines:\n  - name: p\n    input: {subject: x}\n    learner: {dimm: 3, components: 2, kernel: {name: rbf}}\n", "dimm"},
		"top typo":    {"workerz: 2\npipelines: []\n", "workerz"},
		"choice":      {"pipelines:\n  - name: p\n    learner: {kind: pca, dim: 3, components: 2, kernel: {name: rbf}}\n", "kind"},
		"type":        {"pipelines:\n  - name: p\n    learner: {dim: four}\n", "dim"},
		"duration":    {"shutdown_timeout: soon\n", "shutdown_timeout"},
		"log level":   {"log: {level: loud}\n", "level"},
		"not a field": {"nats: {url: x, ulr: y}\n", "ulr"},
	} {
		err := s.Validate(yamlValue(t, name, []byte(c.yml)))
		if err == nil || !strings.Contains(strings.ToLower(jsonErr(err)), c.want) {
			t.Errorf("%s: %v, want a problem naming %q", name, err, c.want)
		}
	}
	// ${VAR} in place of a value, as in the README's example (in block
	// style: in a flow mapping, "{dim: ${DIM:4}}", its braces are no YAML
	// before substitution).
	if err := s.Validate(yamlValue(t, "var", []byte("workers: ${W}\npipelines:\n  - name: p\n    input: {subject: x}\n    learner:\n      dim: ${DIM:4}\n      kind: ${KIND}\n"))); err != nil {
		t.Errorf("a ${VAR} value: %v", err)
	}
}

// jsonErr is every message of a validation error.
func jsonErr(err error) string {
	var ve *jsonschema.ValidationError
	if e, ok := err.(*jsonschema.ValidationError); ok {
		ve = e
		return ve.GoString()
	}
	return err.Error()
}

// configMapConfigs returns the config.yaml of each ConfigMap in a
// Kubernetes manifest.
func configMapConfigs(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&d); err != nil {
			break
		}
		if c, ok := d.Data["config.yaml"]; ok && d.Kind == "ConfigMap" {
			out = append(out, []byte(c))
		}
	}
	return out
}
