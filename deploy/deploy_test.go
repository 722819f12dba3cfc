package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/learners"
)

// root is the repository root, relative to this package.
const root = ".."

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, rel string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(read(t, rel)))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		docs = append(docs, d)
	}
}

// get walks a decoded YAML value along path (map keys, or list indexes as
// ints) and fails the test when the path does not exist.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for i, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok || m[p] == nil {
				t.Fatalf("no %v in %v", path[:i+1], path)
			}
			v = m[p]
		case int:
			l, ok := v.([]any)
			if !ok || p >= len(l) {
				t.Fatalf("no %v in %v", path[:i+1], path)
			}
			v = l[p]
		}
	}
	return v
}

func strs(t *testing.T, v any) []string {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	out := make([]string, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			t.Fatalf("%v: element %d is not a string", v, i)
		}
		out[i] = s
	}
	return out
}

var (
	flagsOnce sync.Once
	runFlags  map[string]bool
	flagsErr  error
)

// runFlagSet builds the binary and returns the flags that "kpcastream run -h"
// lists: the run command's real flag set.
func runFlagSet(t *testing.T) map[string]bool {
	t.Helper()
	flagsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kpcastream-deploy-test")
		if err != nil {
			flagsErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "kpcastream")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/kpcastream")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			flagsErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		var stderr bytes.Buffer
		cmd = exec.Command(bin, "run", "-h")
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			flagsErr = fmt.Errorf("kpcastream run -h: %v\n%s", err, stderr.Bytes())
			return
		}
		runFlags = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(stderr.String(), -1) {
			runFlags[m[1]] = true
		}
		if !runFlags["config"] {
			flagsErr = fmt.Errorf("kpcastream run -h lists no -config flag:\n%s", stderr.Bytes())
		}
	})
	if flagsErr != nil {
		t.Fatal(flagsErr)
	}
	return runFlags
}

// parseArgs checks that every flag in args exists on "kpcastream run" and
// returns the flags with their values (all of run's flags take a value).
func parseArgs(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	flags := runFlagSet(t)
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q is not a flag (run takes no positional arguments)", where, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: flag %q does not exist on kpcastream run (it has %v)", where, a, keys(flags))
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				t.Errorf("%s: flag %q has no value", where, a)
				continue
			}
			i++
			val = args[i]
		}
		out[name] = val
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// loadConfig loads a config the way "kpcastream run" does, with the
// --nats-url override when given and no environment.
func loadConfig(t *testing.T, where, src string, flags map[string]string) *config.Config {
	t.Helper()
	var ov config.Overrides
	if u, ok := flags["nats-url"]; ok {
		ov.NATSURL = &u
	}
	if f, ok := flags["log-format"]; ok {
		ov.LogFormat = &f
	}
	if a, ok := flags["metrics-addr"]; ok {
		ov.MetricsAddr = &a
	}
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := config.Read(strings.NewReader(src), noEnv, ov)
	if err != nil {
		t.Fatalf("%s: config does not load:\n%v", where, err)
	}
	return cfg
}

// partitions returns the partition count of the subject mapping in s.
func partitions(t *testing.T, where, s string) int {
	t.Helper()
	m := regexp.MustCompile(`"sensors\.\*\.features":\s*"sensors\.\{\{partition\((\d+),\s*1\)\}\}\.\{\{wildcard\(1\)\}\}\.features"`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s: no partition mapping for sensors.*.features", where)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// checkWorkers checks that the worker configs cover the n partitions of the
// mapping once each, with distinct pipeline names and durables, against
// R3 streams and R3 snapshot buckets.
func checkWorkers(t *testing.T, where string, cfgs []*config.Config, n int) {
	t.Helper()
	if len(cfgs) != n {
		t.Fatalf("%s: %d workers for %d partitions", where, len(cfgs), n)
	}
	subjects := map[string]bool{}
	names := map[string]bool{}
	for i, c := range cfgs {
		if c.Snapshots.Replicas != 3 {
			t.Errorf("%s: worker %d: snapshots.replicas %d, want 3", where, i, c.Snapshots.Replicas)
		}
		if c.NATS.URL == "" {
			t.Errorf("%s: worker %d: no NATS URL: it would start an embedded server", where, i)
		}
		for _, p := range c.ProcessorConfig().WithDefaults().Pipelines {
			if p.Input.CreateStream || p.Output.CreateStream {
				t.Errorf("%s: pipeline %s creates a stream: it would have 1 replica", where, p.Name)
			}
			if names[p.Name] || names[p.Input.Durable] {
				t.Errorf("%s: pipeline name or durable of %s used twice", where, p.Name)
			}
			names[p.Name], names[p.Input.Durable] = true, true
			subjects[p.Input.Subject] = true
		}
	}
	for p := range n {
		if s := fmt.Sprintf("sensors.%d.*.features", p); !subjects[s] {
			t.Errorf("%s: no worker consumes partition %d (%s); subjects %v", where, p, s, keys(subjects))
		}
	}
	if len(subjects) != n {
		t.Errorf("%s: subjects %v, want exactly the %d partitions", where, keys(subjects), n)
	}
}

// TestCompose loads the config of each kpcastream service of
// docker-compose.yml from the file it mounts, with the flags it passes.
func TestCompose(t *testing.T) {
	doc := yamlDocs(t, "deploy/docker-compose.yml")[0]
	services := get(t, doc, "services").(map[string]any)
	var cfgs []*config.Config
	nats := 0
	for _, name := range keys(services) {
		svc := services[name].(map[string]any)
		vols := strs(t, get(t, svc, "volumes"))
		for _, v := range vols {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(root, "deploy", src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
		if svc["build"] == nil {
			if img, _ := svc["image"].(string); strings.HasPrefix(img, "nats:") {
				nats++
				cmd := strs(t, get(t, svc, "command"))
				if !slices.Contains(cmd, "/etc/nats/kpcastream.conf") || !slices.Contains(vols, "./nats/nats.conf:/etc/nats/kpcastream.conf:ro") {
					t.Errorf("nats service %s does not run deploy/nats/nats.conf: %v", name, cmd)
				}
			}
			continue
		}
		if get(t, svc, "build", "dockerfile") != "Dockerfile" || get(t, svc, "build", "context") != ".." {
			t.Errorf("service %s is not built from the repository's Dockerfile", name)
		}
		flags := parseArgs(t, name, strs(t, get(t, svc, "command")))
		var file string
		for _, v := range vols {
			if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, flags["config"]+":") || dst == flags["config"] {
				file = src
			}
		}
		if file == "" {
			t.Fatalf("service %s: no volume mounts its --config %q", name, flags["config"])
		}
		cfgs = append(cfgs, loadConfig(t, name+" ("+file+")", string(read(t, filepath.Join("deploy", file))), flags))
	}
	if nats != 3 {
		t.Errorf("%d nats services, want 3", nats)
	}
	checkWorkers(t, "docker-compose.yml", cfgs, partitions(t, "deploy/nats/nats.conf", string(read(t, "deploy/nats/nats.conf"))))
}

// TestKubernetes loads every config of the ConfigMap with the flags of the
// StatefulSet, checks the probes, and checks the memory limit against the
// learners' memory formula.
func TestKubernetes(t *testing.T) {
	var files map[string]any
	for _, d := range yamlDocs(t, "deploy/k8s/configmap.yaml") {
		if d["kind"] == "ConfigMap" && get(t, d, "metadata", "name") == "kpcastream-config" {
			files = get(t, d, "data").(map[string]any)
		}
	}
	if files == nil {
		t.Fatal("deploy/k8s/configmap.yaml: no ConfigMap kpcastream-config")
	}
	var sts map[string]any
	var svc map[string]any
	for _, d := range yamlDocs(t, "deploy/k8s/kpcastream.yaml") {
		switch d["kind"] {
		case "StatefulSet":
			sts = d
		case "Service":
			svc = d
		}
	}
	if sts == nil || svc == nil {
		t.Fatal("deploy/k8s/kpcastream.yaml: want a StatefulSet and a Service")
	}
	replicas := get(t, sts, "spec", "replicas").(int)
	c := get(t, sts, "spec", "template", "spec", "containers", 0).(map[string]any)
	flags := parseArgs(t, "StatefulSet", strs(t, get(t, c, "args")))
	if !slices.ContainsFunc(get(t, c, "env").([]any), func(e any) bool {
		m := e.(map[string]any)
		return m["name"] == "POD_NAME" && get(t, m, "valueFrom", "fieldRef", "fieldPath") == "metadata.name"
	}) {
		t.Error("StatefulSet: no POD_NAME from metadata.name for $(POD_NAME)")
	}
	mount := get(t, c, "volumeMounts", 0, "mountPath").(string)

	var cfgs []*config.Config
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", get(t, sts, "metadata", "name"), i)
		path := strings.ReplaceAll(flags["config"], "$(POD_NAME)", pod)
		dir, file := filepath.Split(path)
		if filepath.Clean(dir) != mount {
			t.Fatalf("pod %s: --config %s is not in the ConfigMap mount %s", pod, path, mount)
		}
		src, ok := files[file].(string)
		if !ok {
			t.Fatalf("pod %s reads %s, which the ConfigMap lacks (it has %v)", pod, file, keys(files))
		}
		cfgs = append(cfgs, loadConfig(t, "ConfigMap "+file, src, flags))
	}
	if len(files) != replicas {
		t.Errorf("ConfigMap has %d files for %d replicas", len(files), replicas)
	}
	checkWorkers(t, "k8s", cfgs, partitions(t, "deploy/k8s/nats-values.yaml", string(read(t, "deploy/k8s/nats-values.yaml"))))

	// Probes and ports.
	port := strings.TrimPrefix(cfgs[0].HTTP.MetricsAddr, ":")
	if get(t, c, "livenessProbe", "httpGet", "path") != "/healthz" || get(t, c, "readinessProbe", "httpGet", "path") != "/readyz" {
		t.Error("StatefulSet: liveness must probe /healthz and readiness /readyz")
	}
	if p := get(t, c, "ports", 0, "containerPort"); fmt.Sprint(p) != port {
		t.Errorf("containerPort %v, want the metrics port %s", p, port)
	}
	if p := get(t, svc, "spec", "ports", 0, "port"); fmt.Sprint(p) != port {
		t.Errorf("Service port %v, want the metrics port %s", p, port)
	}

	// Memory: base + live learners + snapshot copies in flight.
	limit := quantity(t, get(t, c, "resources", "limits", "memory").(string))
	request := quantity(t, get(t, c, "resources", "requests", "memory").(string))
	for i, cfg := range cfgs {
		need := int64(64 << 20)
		pc := cfg.ProcessorConfig().WithDefaults()
		for _, p := range pc.Pipelines {
			perKey := learnerBytes(t, p.Learner)
			need += int64(p.MaxKeys)*perKey + int64(pc.Workers)*8*perKey
		}
		t.Logf("worker %d: needs ≈ %.1f MiB; request %.0f MiB, limit %.0f MiB", i, float64(need)/(1<<20), float64(request)/(1<<20), float64(limit)/(1<<20))
		if limit < need || request < need {
			t.Errorf("worker %d: memory request %d / limit %d B below the formula's %d B", i, request, limit, need)
		}
	}
	if limit < request {
		t.Errorf("memory limit %d below request %d", limit, request)
	}
}

// learnerBytes returns the memory of one learner of cfg: the larger of the
// learner's own MemoryBytes and the ikpca formula
// 8·(B·d + 5·B² + B·(2p + 2k + 6)), p = min(B, k + max(k, 8)).
func learnerBytes(t *testing.T, cfg learners.Config) int64 {
	t.Helper()
	l, err := learners.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	switch m := l.(type) {
	case interface{ MemoryBytes() int }:
		n = int64(m.MemoryBytes())
	default:
		t.Fatalf("learner %s has no MemoryBytes", cfg.Learner)
	}
	c := cfg.WithDefaults()
	b, d, k := int64(c.Budget), int64(c.Dim), int64(c.Components)
	p := min(b, k+max(k, 8))
	return max(n, 8*(b*d+5*b*b+b*(2*p+2*k+6)))
}

// quantity parses a Kubernetes memory quantity with a binary suffix.
func quantity(t *testing.T, s string) int64 {
	t.Helper()
	for suf, mul := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if v, ok := strings.CutSuffix(s, suf); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", s, err)
			}
			return n * mul
		}
	}
	t.Fatalf("quantity %q: want Ki, Mi or Gi", s)
	return 0
}

// TestStreams decodes deploy/streams strictly and checks the retention
// rules of deploy/README.md against the worker configs: limits retention,
// R3, and windows longer than a snapshot period plus a checkpoint period
// plus an ack wait.
func TestStreams(t *testing.T) {
	streams := map[string]jetstream.StreamConfig{}
	for _, name := range []string{"SENSORS", "KPCA_OUT"} {
		dec := json.NewDecoder(bytes.NewReader(read(t, "deploy/streams/"+name+".json")))
		dec.DisallowUnknownFields()
		var sc jetstream.StreamConfig
		if err := dec.Decode(&sc); err != nil {
			t.Fatalf("deploy/streams/%s.json: %v", name, err)
		}
		if sc.Name != name || sc.Replicas != 3 || sc.Retention != jetstream.LimitsPolicy || sc.Storage != jetstream.FileStorage {
			t.Errorf("%s: name %q replicas %d retention %v storage %v; want %s, 3, limits, file", name, sc.Name, sc.Replicas, sc.Retention, sc.Storage, name)
		}
		if sc.Duplicates <= 0 || sc.Duplicates > sc.MaxAge {
			t.Errorf("%s: duplicate window %v must be in (0, max_age %v]", name, sc.Duplicates, sc.MaxAge)
		}
		streams[name] = sc
	}
	cfg := loadConfig(t, "kpcastream-p0.yaml", string(read(t, "deploy/compose/kpcastream-p0.yaml")), nil)
	pc := cfg.ProcessorConfig().WithDefaults()
	for _, p := range pc.Pipelines {
		// The longest a key's first unsnapshotted message waits for its
		// snapshot, plus the checkpoint write, plus a redelivery.
		span := p.Snapshot.Every + pc.CheckpointEvery + p.Input.AckWait
		if in := streams["SENSORS"]; in.MaxAge < 100*span {
			t.Errorf("SENSORS max_age %v leaves little room for outages beyond the replay span %v", in.MaxAge, span)
		}
		if out := streams["KPCA_OUT"]; out.Duplicates < 2*span {
			t.Errorf("KPCA_OUT duplicate window %v shorter than twice the replay span %v: replayed outputs would be published again", out.Duplicates, span)
		}
	}
}

// TestDockerfile checks the Dockerfile against the binary: the build
// command of .ci/run, a non-root distroless runtime, the metrics port, the
// run entrypoint and the documented config path.
func TestDockerfile(t *testing.T) {
	df := string(read(t, "Dockerfile"))
	ci := string(read(t, ".ci/run"))
	build := regexp.MustCompile(`(?m)^(?:RUN )?(CGO_ENABLED=0 go build .*) -o \S+ (\./cmd/kpcastream)$`)
	d, c := build.FindStringSubmatch(df), build.FindStringSubmatch(ci)
	if d == nil || c == nil {
		t.Fatalf("no static build command: Dockerfile %v, .ci/run %v", d, c)
	}
	if d[1] != c[1] || d[2] != c[2] {
		t.Errorf("build commands differ:\nDockerfile: %s\n.ci/run:    %s", d[0], c[0])
	}
	if want := `CGO_ENABLED=0 go build -trimpath -ldflags="-s -w"`; d[1] != want {
		t.Errorf("Dockerfile builds with %q, want %q", d[1], want)
	}
	port := strings.TrimPrefix(config.DefaultMetricsAddr, ":")
	for _, want := range []string{
		"FROM golang:1.26-bookworm AS build",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER nonroot:nonroot",
		"EXPOSE " + port,
		`ENTRYPOINT ["/kpcastream", "run"]`,
		`CMD ["--config", "/etc/kpcastream/config.yaml"]`,
	} {
		if !strings.Contains(df, "\n"+want+"\n") {
			t.Errorf("Dockerfile lacks the line %q", want)
		}
	}
	// The default CMD's flags exist on run.
	parseArgs(t, "Dockerfile CMD", []string{"--config", "/etc/kpcastream/config.yaml"})
}

// TestEnvVars checks that every KPCASTREAM_* variable named in the
// deployment files is read by the config loader: setting it changes the
// loaded config (or makes it invalid).
func TestEnvVars(t *testing.T) {
	const minimal = "pipelines: [{name: p, input: {subject: a.*}, learner: {dim: 2, components: 1, kernel: {name: rbf}}}]"
	base := loadConfig(t, "minimal", minimal, nil)
	seen := map[string]bool{}
	for _, f := range []string{"deploy/k8s/kpcastream.yaml", "deploy/docker-compose.yml", "deploy/README.md", "Dockerfile"} {
		for _, v := range regexp.MustCompile(`KPCASTREAM_[A-Z_]+`).FindAllString(string(read(t, f)), -1) {
			if seen[v] {
				continue
			}
			seen[v] = true
			env := func(name string) (string, bool) {
				if name == v {
					return "probe-value", true
				}
				return "", false
			}
			got, err := config.Read(strings.NewReader(minimal), env, config.Overrides{})
			if err == nil && fmt.Sprint(*got) == fmt.Sprint(*base) {
				t.Errorf("%s names %s, which the config loader ignores", f, v)
			}
		}
	}
}
