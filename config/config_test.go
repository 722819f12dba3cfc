package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/classify"
	"github.com/kpcastream/kpcastream/processor"
)

func noEnv(string) (string, bool) { return "", false }

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load("../examples/kpcastream.yaml", noEnv, Overrides{})
	if err != nil {
		t.Fatalf("Load(example): %v", err)
	}
	pc := c.ProcessorConfig()
	if len(pc.Pipelines) != 1 {
		t.Fatalf("pipelines: got %d, want 1", len(pc.Pipelines))
	}
	p := pc.Pipelines[0].WithDefaults()
	if p.Name != "sensors" || p.Input.Stream != "SENSORS" || p.Input.Subject != "sensors.*.features" {
		t.Errorf("pipeline: got %+v", p.Input)
	}
	if *p.KeyToken != 1 {
		t.Errorf("key token: got %d, want 1 (the '*' of sensors.*.features)", *p.KeyToken)
	}
	if p.Learner.Dim != 4 || p.Learner.Components != 2 || p.Learner.Budget != 64 || p.Learner.Kernel.Name != "rbf" || p.Learner.Kernel.Gamma != 0.5 {
		t.Errorf("learner: got %+v", p.Learner)
	}
	if p.Output.Duplicates != 10*time.Minute || p.Snapshot.Every != 30*time.Second {
		t.Errorf("durations: got duplicates %v, every %v", p.Output.Duplicates, p.Snapshot.Every)
	}
	if c.Processor.Workers != 2 || c.Snapshots.Bucket != "kpcastream-snapshots" {
		t.Errorf("root: got workers %d, snapshots %+v", c.Processor.Workers, c.Snapshots)
	}
}

const minimal = `
pipelines:
  - name: p
    input: {subject: "in.*"}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`

func TestPrecedence(t *testing.T) {
	file := "nats: {url: nats://file:4222}\nhttp: {metrics_addr: ':1'}\ndata_dir: /file\n" + minimal
	env := map[string]string{"NATS_URL": "nats://env:4222", "KPCASTREAM_DATA_DIR": "/env"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	flagURL := "nats://flag:4222"
	c, err := Read(strings.NewReader(file), getenv, Overrides{NATSURL: &flagURL})
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.URL != flagURL {
		t.Errorf("nats.url: got %q, want the flag %q", c.NATS.URL, flagURL)
	}
	if c.DataDir != "/env" {
		t.Errorf("data_dir: got %q, want the env value /env", c.DataDir)
	}
	if c.HTTP.MetricsAddr != ":1" {
		t.Errorf("metrics_addr: got %q, want the file value :1", c.HTTP.MetricsAddr)
	}
	if c.Log.Level != DefaultLogLevel || c.Embedded.Port != DefaultEmbeddedPort {
		t.Errorf("defaults: got level %q port %d", c.Log.Level, c.Embedded.Port)
	}
	if c.Embedded.StoreDir != "/env" {
		t.Errorf("store dir: got %q, want /env (the server stores in /env/jetstream)", c.Embedded.StoreDir)
	}
}

func TestUnknownFieldRejected(t *testing.T) {
	_, err := Read(strings.NewReader("workerz: 3\n"+minimal), noEnv, Overrides{})
	if err == nil || !strings.Contains(err.Error(), "workerz") {
		t.Fatalf("got %v, want an error naming the unknown field workerz", err)
	}
}

func TestErrorsReportedAtOnce(t *testing.T) {
	file := `
log: {format: xml}
nats: {password: secret}
snapshots: {replicas: 9}
pipelines:
  - name: "bad name"
    input: {subject: "a..b", create_stream: true}
    learner: {kind: nope, dim: 0, components: 5, budget: 3, kernel: {name: rbf, gamma: -1}}
    output: {encoding: avro, subject: "out.{key}.>"}
    snapshot: {on_corrupt_snapshot: ignore}
  - name: "q"
    input: {subject: "x.y"}
    key_token: 1
    learner: {dim: 2, components: 1, kernel: {name: linear}}
`
	_, err := Read(strings.NewReader(file), noEnv, Overrides{})
	if err == nil {
		t.Fatal("got nil, want errors")
	}
	want := []string{
		"log.format",
		"nats.user",
		"snapshots.replicas",
		"pipelines[0].name",
		"pipelines[0].input.subject",
		"pipelines[0].input.create_stream",
		"pipelines[0].learner.kind",
		"pipelines[0].learner.dim",
		"pipelines[0].learner.components: must be ≤ budget",
		"pipelines[0].learner.kernel",
		"pipelines[0].output.encoding",
		"pipelines[0].output.subject",
		"pipelines[0].snapshot.on_corrupt_snapshot",
		"pipelines[1].key_token",
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not mention %q; got:\n%s", w, msg)
		}
	}
	t.Logf("errors:\n%s", msg)
	if n := strings.Count(msg, "\n") + 1; n < len(want) {
		t.Errorf("got %d errors, want at least %d:\n%s", n, len(want), msg)
	}
}

func TestNoPipelines(t *testing.T) {
	_, err := Read(strings.NewReader("workers: 1\n"), noEnv, Overrides{})
	if err == nil || !strings.Contains(err.Error(), "pipelines: at least one") {
		t.Fatalf("got %v", err)
	}
}

func TestKeyTokenExplicit(t *testing.T) {
	c, err := Read(strings.NewReader(`
pipelines:
  - name: p
    input: {subject: "a.*.b.*"}
    key_token: 3
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`), noEnv, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.ProcessorConfig().Pipelines[0].WithDefaults()
	if *p.KeyToken != 3 {
		t.Errorf("key_token: got %d, want 3", *p.KeyToken)
	}
	var _ processor.PipelineConfig = p
}

func TestStreamLimitsAndReplicas(t *testing.T) {
	c, err := Read(strings.NewReader(`
checkpoint_replicas: 3
pipelines:
  - name: p
    input: {stream: IN, subject: "a.*", create_stream: true, replicas: 3, max_age: 168h, max_bytes: 1073741824}
    output: {stream: OUT, create_stream: true, replicas: 2, max_age: 1h, duplicates: 15m}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`), noEnv, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	pc := c.ProcessorConfig()
	if pc.CheckpointReplicas != 3 {
		t.Errorf("checkpoint_replicas: got %d, want 3", pc.CheckpointReplicas)
	}
	in, out := pc.Pipelines[0].Input, pc.Pipelines[0].Output
	if in.Replicas != 3 || in.MaxAge != 168*time.Hour || in.MaxBytes != 1<<30 {
		t.Errorf("input: got replicas %d, max_age %v, max_bytes %d; want 3, 168h, 1 GiB", in.Replicas, in.MaxAge, in.MaxBytes)
	}
	if out.Replicas != 2 || out.MaxAge != time.Hour || out.MaxBytes != 0 {
		t.Errorf("output: got replicas %d, max_age %v, max_bytes %d; want 2, 1h, 0", out.Replicas, out.MaxAge, out.MaxBytes)
	}

	_, err = Read(strings.NewReader(`
checkpoint_replicas: 6
lease_ttl: 1ms
on_lease_held: steal
pipelines:
  - name: p
    input: {stream: IN, subject: "a.*", replicas: 7, max_age: -1s, max_bytes: -5}
    output: {replicas: -1, max_age: 1m, duplicates: 2m}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`), noEnv, Overrides{})
	if err == nil {
		t.Fatal("got nil, want errors")
	}
	for _, w := range []string{"checkpoint_replicas", "lease_ttl", "on_lease_held", "pipelines[0].input.replicas", "pipelines[0].input.max_age",
		"pipelines[0].input.max_bytes", "pipelines[0].output.replicas", "pipelines[0].output.max_age: must be ≥ output.duplicates"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q; got:\n%v", w, err)
		}
	}
}

func TestBatchLearnerRejectedInPipelines(t *testing.T) {
	yml := `
pipelines:
  - name: p
    input: {subject: "a.*.b"}
    learner: {kind: batch, dim: 2, components: 1, kernel: {name: rbf}}
`
	_, err := Read(strings.NewReader(yml), func(string) (string, bool) { return "", false }, Overrides{})
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].learner.kind: batch fits offline only") {
		t.Fatalf("Read = %v, want an error naming pipelines[0].learner.kind", err)
	}
}

// YAML decoding errors name the field by its path (the decoder gives only a
// line), and the file must hold exactly one document. Found by FuzzRead:
// trailing text after the first document ("{}0") used to be ignored.
func TestYAMLErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"type error", "pipelines:\n  - name: p\n    input: {subject: in.*}\n    learner: {dim: x, components: 2, kernel: {name: rbf}}\n",
			`config: pipelines[0].learner.dim: line 4: "x" is not an integer`},
		// In the file's terms, not the decoder's Go types (issue 33 row 15).
		{"list for a number", "pipelines:\n  - name: p\n    learner:\n      dim: [1]\n", "config: pipelines[0].learner.dim: line 4: a list, want an integer"},
		{"bool", "pipelines:\n  - name: p\n    input: {create_stream: maybe}\n", `config: pipelines[0].input.create_stream: line 3: "maybe" is not true or false`},
		{"unknown nested field", "pipelines:\n  - name: p\n    learner:\n      dimm: 3\n",
			`config: pipelines[0].learner.dimm: line 4: unknown field "dimm"; did you mean "dim"? (pipelines[0].learner has kind, dim, components, budget, kernel, forget, admission, eviction, swap_ratio, tolerance, coherence, jitter, learning_rate, decay, rule, beta, gain, dictionary, refresh, seed)`},
		{"second key on a line", "nats: {url: x, bogus: 1}\n", `config: nats.bogus: line 1: unknown field "bogus" (nats has url, name, creds, nkey, user, password, token, tls, reconnect_wait)`},
		{"duplicate key", "workers: 1\nworkers: 2\n", `config: workers: line 2: mapping key "workers" already defined at line 1`},
		{"odd key", "nats: {\"a.b\": 1}\n", `config: nats["a.b"]: line 1: unknown field "a.b" (nats has url, name, creds, nkey, user, password, token, tls, reconnect_wait)`},
		{"duration", "shutdown_timeout: soon\n", `config: shutdown_timeout: line 1: "soon" is not a duration (such as 500ms, 2s or 1m30s)`},
		{"not a mapping", "- 1\n", "config: yaml: line 1: a list, want a mapping of fields (nats:, pipelines:, …)"},
		{"second document", "workers: 1\n---\nworkers: 2\n", "config: yaml: line 2: a second document; the file must hold one"},
		{"trailing text", "{}0", "config: yaml: did not find expected <document start>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The decoder's problem comes first; validation of what could
			// be decoded may add others (a missing pipeline, …).
			_, err := Read(strings.NewReader(tt.in), noEnv, Overrides{})
			if p := Problems(err); len(p) == 0 || p[0].Error() != tt.want {
				t.Errorf("Read(%q):\n got %v\nwant first %s", tt.in, err, tt.want)
			}
		})
	}
}

// TestTypeErrorDoesNotStopValidation checks that a YAML type error is
// reported with every validation problem of the rest of the file, each a
// *FieldError naming its YAML path, and that a field the decoder could not
// read is reported once (by the decoder), not again as "must be ≥ 1".
func TestTypeErrorDoesNotStopValidation(t *testing.T) {
	file := `
workers: many
log: {level: loud}
pipelines:
  - name: p
    input: {subject: "in.*"}
    learner: {dim: four, components: 2, budget: 1, kernel: {name: rbf, gamma: 0.5}}
    max_keys: -1
`
	_, err := Read(strings.NewReader(file), noEnv, Overrides{})
	var paths []string
	for _, e := range Problems(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is not a *FieldError", e, e)
		}
		if strings.Contains(fe.Error(), "\n") {
			t.Errorf("problem %q spans lines", fe.Error())
		}
		paths = append(paths, fe.Path)
	}
	want := []string{"workers", "pipelines[0].learner.dim", "log.level", "pipelines[0].learner.components", "pipelines[0].max_keys"}
	if !slices.Equal(paths, want) {
		t.Errorf("paths %q, want %q\n%v", paths, want, err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "workers" || !strings.Contains(fe.Err.Error(), "is not an integer") {
		t.Errorf("errors.As on the joined error: %+v", fe)
	}
}

// TestSafeDefaults: /metrics, /healthz and /readyz listen on loopback
// unless told otherwise, like the embedded server; the embedded store is
// <data_dir> (nats-server adds jetstream/).
func TestSafeDefaults(t *testing.T) {
	c, err := Read(strings.NewReader(minimal), noEnv, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.MetricsAddr != "127.0.0.1:9090" || c.Embedded.Host != "127.0.0.1" {
		t.Errorf("metrics_addr %q, embedded host %q: want loopback", c.HTTP.MetricsAddr, c.Embedded.Host)
	}
	if c.Embedded.StoreDir != c.DataDir {
		t.Errorf("store_dir %q, want data_dir %q", c.Embedded.StoreDir, c.DataDir)
	}
}

// The classifier stage loads from YAML (numeric class names as written)
// and its problems name the field.
func TestClassifierConfig(t *testing.T) {
	c, err := Read(strings.NewReader(`
pipelines:
  - name: p
    input: {subject: "a.*"}
    learner: {dim: 3, components: 2, budget: 20, kernel: {name: rbf}}
    classifier: {classes: [0, 1, cat], ridge: 0.5, window: 10}
`), noEnv, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	cl := c.ProcessorConfig().Pipelines[0].Classifier
	if cl == nil || strings.Join(cl.Classes, ",") != "0,1,cat" || cl.Ridge != 0.5 || cl.Window != 10 {
		t.Fatalf("classifier: got %+v", cl)
	}
	_, err = Read(strings.NewReader(`
pipelines:
  - name: p
    input: {subject: "a.*"}
    learner: {kind: window, dim: 3, components: 2, kernel: {name: rbf}}
    classifier: {classes: [a], forget: 3}
`), noEnv, Overrides{})
	for _, want := range []string{"pipelines[0].classifier.classes: need at least 2 classes", "pipelines[0].classifier.forget", "needs the ikpca or kha learner"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error naming %q", err, want)
		}
	}
}

// fieldAt returns the type of the field at a problem's YAML path inside
// type t (following yaml tags, inline structs, slice indices and pointers),
// or false when the path names no field: every layer's Validate must name
// its fields by the names the file uses.
func fieldAt(t reflect.Type, path string) (reflect.Type, bool) {
	for path != "" {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if path[0] == '[' {
			end := strings.IndexByte(path, ']')
			if t.Kind() != reflect.Slice || end < 0 {
				return nil, false
			}
			t, path = t.Elem(), strings.TrimPrefix(path[end+1:], ".")
			continue
		}
		end := strings.IndexAny(path, ".[")
		if end < 0 {
			end = len(path)
		}
		key := path[:end]
		path = strings.TrimPrefix(path[end:], ".")
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		ft, ok := yamlField(t, key)
		if !ok {
			return nil, false
		}
		t = ft
	}
	return t, true
}

// yamlField returns the type of the field of struct t with YAML key key.
func yamlField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if ft, ok := yamlField(f.Type, key); ok {
				return ft, true
			}
			continue
		}
		if name == key && name != "-" {
			return f.Type, true
		}
	}
	return nil, false
}

// TestProblemPathsAreFields: every validation problem of a file with a
// problem in each layer (root, snapshots, processor, pipeline, learner,
// kernel, classifier) is a *FieldError whose path is a field of the file,
// and the learner's and classifier's problems still match their packages'
// sentinels.
func TestProblemPathsAreFields(t *testing.T) {
	file := `
workers: -1
log: {level: loud}
snapshots: {bucket: "a b", object_bucket: "c.d", replicas: 9, max_inline: -1, history: 65}
pipelines:
  - name: p
    input: {subject: "in.*", replicas: 9}
    learner: {kind: nope, dim: 0, components: 5, budget: 3, kernel: {name: poly, gamma: 1, degree: 40}, forget: 2, swap_ratio: 0.5}
    classifier: {classes: [a, a], ridge: -1, window: -1}
    dead_letters: {replicas: 7}
  - name: q
    input: {subject: "in.*"}
    learner: {dim: 2, components: 1, budget: 20000, kernel: {name: sigmoid, gamma: -1}}
    classifier: {classes: [a, b]}
`
	_, err := Read(strings.NewReader(file), noEnv, Overrides{})
	var paths []string
	var learnerProblems, classifierProblems int
	for _, e := range Problems(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is not a *FieldError", e, e)
		}
		if want := "config: " + fe.Path + ": " + fe.Err.Error(); e.Error() != want {
			t.Errorf("text %q, want %q", e.Error(), want)
		}
		paths = append(paths, fe.Path)
		if _, ok := fieldAt(reflect.TypeFor[Config](), fe.Path); !ok && fe.Path != "pipelines[1].classifier.dim" {
			t.Errorf("problem %q: %q is no field of the file", e, fe.Path)
		}
		if strings.Contains(fe.Path, ".learner.") != errors.Is(e, learners.ErrConfig) {
			t.Errorf("problem %q: errors.Is(learners.ErrConfig) = %v", e, errors.Is(e, learners.ErrConfig))
		}
		if errors.Is(e, learners.ErrConfig) {
			learnerProblems++
		}
		if errors.Is(e, classify.ErrConfig) {
			classifierProblems++
		}
	}
	want := []string{
		"log.level",
		"snapshots.bucket", "snapshots.object_bucket", "snapshots.replicas", "snapshots.max_inline", "snapshots.history",
		"workers",
		"pipelines[0].input.replicas",
		"pipelines[0].learner.kind", "pipelines[0].learner.dim", "pipelines[0].learner.components", "pipelines[0].learner.kernel.degree",
		"pipelines[0].learner.forget", "pipelines[0].learner.swap_ratio",
		"pipelines[0].dead_letters.replicas",
		"pipelines[0].classifier.classes", "pipelines[0].classifier.window", "pipelines[0].classifier.classes", "pipelines[0].classifier.ridge",
		"pipelines[1].learner.kernel.gamma",
		// The classifier's dimension is the learner's budget, and bounded
		// (classify.Config.Dim): no field of its own.
		"pipelines[1].classifier.dim",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("paths\n%q\nwant\n%q\n%v", paths, want, err)
	}
	if learnerProblems != 7 || classifierProblems != 2 {
		t.Errorf("%d problems match learners.ErrConfig, %d classify.ErrConfig; want 7 and 2", learnerProblems, classifierProblems)
	}
}

// TestUndecodedFieldReportedOnce: a field the YAML could not decode is
// reported by the decoder alone, not again by the validation of the
// fields inside it (left at zero).
func TestUndecodedFieldReportedOnce(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     []string
	}{
		{"kernel", "pipelines:\n  - name: p\n    input: {subject: a.*}\n    learner: {dim: 3, components: 2, kernel: x}\n",
			[]string{"pipelines[0].learner.kernel"}},
		{"learner", "pipelines:\n  - name: p\n    input: {subject: a.*}\n    learner: 5\n    max_keys: -1\n",
			[]string{"pipelines[0].learner", "pipelines[0].max_keys"}},
		{"input", "pipelines:\n  - name: p\n    input: [a]\n    learner: {dim: 3, components: 2, kernel: {name: rbf}}\n",
			[]string{"pipelines[0].input"}},
		{"a field, not its neighbour", "pipelines:\n  - name: p\n    input: {subject: a.*}\n    learner: {dim: 3, components: 0, componentz: 2, kernel: {name: rbf}}\n",
			[]string{"pipelines[0].learner.componentz", "pipelines[0].learner.components"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.in), noEnv, Overrides{})
			var paths []string
			for _, e := range Problems(err) {
				var fe *FieldError
				if errors.As(e, &fe) {
					paths = append(paths, fe.Path)
				}
			}
			if !slices.Equal(paths, tt.want) {
				t.Errorf("paths %q, want %q\n%v", paths, tt.want, err)
			}
		})
	}
}

// TestProcessMemory: process_memory is read in bytes, refused when it is
// negative or when the pipelines' memory_budget do not fit under it at
// h = 1 (the error names the field and the numbers), and accepted at
// exactly the least it names.
func TestProcessMemory(t *testing.T) {
	const two = `
workers: 2
pipelines:
  - name: a
    input: {subject: "a.*", stream: A}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
    memory_budget: 1342177280
  - name: b
    input: {subject: "b.*", stream: B}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`
	// 1280 MiB + 256 MiB (b's default): (3 GiB − 96 MiB) / 2 = 1488 MiB < 1536 MiB.
	_, err := Read(strings.NewReader("process_memory: 3221225472\n"+two), noEnv, Overrides{})
	if err == nil {
		t.Fatal("process_memory 3 GiB for 1536 MiB of memory_budget: no error")
	}
	problems := Problems(err)
	if len(problems) != 1 {
		t.Fatalf("%d problems, want 1: %v", len(problems), err)
	}
	var fe *FieldError
	if !errors.As(problems[0], &fe) || fe.Path != "process_memory" {
		t.Fatalf("problem %v: want one of the field process_memory", problems[0])
	}
	for _, want := range []string{"at most 1.5 GiB", "a 1.2 GiB + b 256.0 MiB", "at least 3.1 GiB (3321888768 B)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	c, err := Read(strings.NewReader("process_memory: 3321888768\n"+two), noEnv, Overrides{})
	if err != nil {
		t.Fatalf("process_memory at the least the refusal names: %v", err)
	}
	m := c.ProcessMemoryPlan()
	if m.Target != 3321888768 || m.Budgets != 1536<<20 || m.Ceiling != m.Budgets {
		t.Errorf("plan %+v: want target 3168 MiB, budgets and ceiling 1536 MiB", m)
	}
	if _, err := Read(strings.NewReader("process_memory: -1\n"+two), noEnv, Overrides{}); err == nil ||
		!strings.Contains(err.Error(), "process_memory: must be ≥ 0") {
		t.Errorf("process_memory -1: %v, want a refusal", err)
	}
	c, err = Read(strings.NewReader(two), noEnv, Overrides{})
	if err != nil || c.ProcessMemory != 0 || c.ProcessMemoryPlan().Err() != nil {
		t.Errorf("no process_memory: %v, %+v; want none and no error", err, c)
	}
}
