package deploy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor"
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
		cmd.Stdout = &stderr // the help asked for is on stdout
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

// transform is the subject transform the processor requires of the input
// stream of a pipeline with pc.Partitions > 1 (processor.partitionTransform,
// replicated here since it is unexported): the input subject with each '*'
// written {{wildcard(i)}} and ".{{partition(N,k)}}" appended, k the wildcard
// index of the key token. ok is false for one partition (no transform).
func transform(pc processor.PipelineConfig) (src, dest string, ok bool) {
	if pc.Partitions <= 1 {
		return "", "", false
	}
	toks := strings.Split(pc.Input.Subject, ".")
	keyWild, wild := 0, 0
	for i, tok := range toks {
		if tok == "*" {
			wild++
			if i == *pc.KeyToken {
				keyWild = wild
			}
			toks[i] = fmt.Sprintf("{{wildcard(%d)}}", wild)
		}
	}
	return pc.Input.Subject, strings.Join(toks, ".") + fmt.Sprintf(".{{partition(%d,%d)}}", pc.Partitions, keyWild), true
}

// streamFile decodes deploy/streams/<name>.json strictly, with the field
// names of the nats CLI and server (those of jetstream.StreamConfig).
func streamFile(t *testing.T, name string) jetstream.StreamConfig {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(read(t, "deploy/streams/"+name+".json")))
	dec.DisallowUnknownFields()
	var sc jetstream.StreamConfig
	if err := dec.Decode(&sc); err != nil {
		t.Fatalf("deploy/streams/%s.json: %v", name, err)
	}
	return sc
}

// checkWorker checks one worker config against the stream files: R3
// snapshot buckets, an external NATS server, no stream created by the
// worker, and for each JetStream pipeline an input stream of deploy/streams
// whose subject transform is exactly the one its partition count needs.
func checkWorker(t *testing.T, where string, c *config.Config) {
	t.Helper()
	if c.Snapshots.Replicas != 3 {
		t.Errorf("%s: snapshots.replicas %d, want 3 (the checkpoint bucket with the partition records follows it)", where, c.Snapshots.Replicas)
	}
	if c.NATS.URL == "" {
		t.Errorf("%s: no NATS URL: it would start an embedded server", where)
	}
	pc := c.ProcessorConfig().WithDefaults()
	if pc.CheckpointReplicas != 0 && pc.CheckpointReplicas != 3 {
		t.Errorf("%s: checkpoint_replicas %d, want 3", where, pc.CheckpointReplicas)
	}
	if len(pc.Pipelines) == 0 {
		t.Fatalf("%s: no pipelines", where)
	}
	for _, p := range pc.Pipelines {
		if p.Input.CreateStream || p.Output.CreateStream {
			t.Errorf("%s: pipeline %s creates a stream: it would have 1 replica", where, p.Name)
		}
		if p.Input.Stream == "" {
			t.Errorf("%s: pipeline %s reads core NATS: no partitions, no replay", where, p.Name)
			continue
		}
		sc := streamFile(t, p.Input.Stream)
		if !slices.Contains(sc.Subjects, p.Input.Subject) {
			t.Errorf("%s: pipeline %s reads %s, which stream %s (subjects %v) does not capture as such", where, p.Name, p.Input.Subject, sc.Name, sc.Subjects)
		}
		src, dest, ok := transform(p)
		got := sc.SubjectTransform
		switch {
		case !ok && got != nil:
			t.Errorf("%s: pipeline %s has partitions: 1, but %s transforms %s → %s", where, p.Name, sc.Name, got.Source, got.Destination)
		case ok && got == nil:
			t.Errorf("%s: pipeline %s has partitions: %d, but %s has no subject transform; want %s → %s", where, p.Name, p.Partitions, sc.Name, src, dest)
		case ok && (got.Source != src || got.Destination != dest):
			t.Errorf("%s: pipeline %s has partitions: %d and needs the transform %s → %s; %s has %s → %s",
				where, p.Name, p.Partitions, src, dest, sc.Name, got.Source, got.Destination)
		}
		if ok && got != nil {
			m := regexp.MustCompile(`\{\{partition\((\d+),\d+\)\}\}`).FindStringSubmatch(got.Destination)
			if m == nil {
				t.Errorf("%s: the transform of %s has no {{partition(n,k)}}", where, sc.Name)
			} else if n, _ := strconv.Atoi(m[1]); n != p.Partitions {
				t.Errorf("%s: pipeline %s has partitions: %d, the transform of %s %d", where, p.Name, p.Partitions, sc.Name, n)
			}
		}
	}
}

// sameConfig checks that every worker runs the same config, up to the NATS
// URL (--nats-url differs between compose and Kubernetes).
func sameConfig(t *testing.T, names []string, cfgs []*config.Config) {
	t.Helper()
	for i := 1; i < len(cfgs); i++ {
		a, b := *cfgs[0], *cfgs[i]
		a.NATS.URL, b.NATS.URL = "", ""
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s and %s differ: every worker must run the same config\n%+v\n%+v", names[0], names[i], a, b)
		}
	}
}

// graceNeeded is the longest graceful leave of a worker of cfg: each
// partition (in parallel) drains its consumer (shutdown_timeout T),
// finishes its queue and final snapshots (2T + snapshot_timeout) and
// releases its record (T); then the heartbeat is removed (T), the HTTP
// server stops (T) and the connection drains (T).
func graceNeeded(cfg *config.Config) time.Duration {
	pc := cfg.ProcessorConfig().WithDefaults()
	return 7*pc.ShutdownTimeout + pc.SnapshotTimeout
}

// composeConfig loads deploy/compose/kpcastream.yaml, the file the cluster
// test runs.
func composeConfig(t *testing.T) *config.Config {
	t.Helper()
	u := "nats://n1:4222"
	return loadConfig(t, "deploy/compose/kpcastream.yaml", string(read(t, "deploy/compose/kpcastream.yaml")), map[string]string{"nats-url": u})
}

// TestCompose loads the config of the kpcastream service of
// docker-compose.yml from the file it mounts, with the flags it passes, and
// checks that the service scales: no fixed host port, no per-replica
// setting.
func TestCompose(t *testing.T) {
	doc := yamlDocs(t, "deploy/docker-compose.yml")[0]
	services := get(t, doc, "services").(map[string]any)
	var workers []string
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
		workers = append(workers, name)
		if get(t, svc, "build", "dockerfile") != "Dockerfile" || get(t, svc, "build", "context") != ".." {
			t.Errorf("service %s is not built from the repository's Dockerfile", name)
		}
		// The image is stamped with the version (issue 33 row 14): the
		// Dockerfile's ARGs, each from a variable the file's header sets.
		dockerfile := string(read(t, "Dockerfile"))
		for arg, env := range map[string]string{"VERSION": "KPCA_BUILD_VERSION", "REVISION": "KPCA_BUILD_REVISION"} {
			args, _ := svc["build"].(map[string]any)["args"].(map[string]any)
			v, _ := args[arg].(string)
			if !strings.Contains(v, "${"+env) || !strings.Contains(dockerfile, "\nARG "+arg+"=") {
				t.Errorf("service %s: build arg %s is %q, want it from ${%s} (an ARG of the Dockerfile)", name, arg, v, env)
			}
			if !regexp.MustCompile(`(?m)^#\s+export .*\b` + env + `=`).Match(read(t, "deploy/docker-compose.yml")) {
				t.Errorf("deploy/docker-compose.yml's header does not set %s", env)
			}
		}
		if svc["container_name"] != nil {
			t.Errorf("service %s has a container_name: it cannot be scaled", name)
		}
		if ports, ok := svc["ports"]; ok {
			for _, p := range strs(t, ports) {
				// "9090" or "9090/tcp" (a random host port per replica), or a
				// host port range "9090-9097:9090".
				if host, _, ok := strings.Cut(strings.TrimPrefix(p, "127.0.0.1:"), ":"); ok && !strings.Contains(host, "-") {
					t.Errorf("service %s publishes %q on a fixed host port: a second replica could not start", name, p)
				}
			}
		}
		flags := parseArgs(t, name, strs(t, get(t, svc, "command")))
		var file string
		for _, v := range vols {
			if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, flags["config"]+":") || dst == flags["config"] {
				file = src
			}
		}
		if file != "./compose/kpcastream.yaml" {
			t.Fatalf("service %s mounts %q at its --config %q, want ./compose/kpcastream.yaml (the file the cluster test runs)", name, file, flags["config"])
		}
		cfg := loadConfig(t, name+" ("+file+")", string(read(t, filepath.Join("deploy", file))), flags)
		checkWorker(t, name, cfg)
		grace, err := time.ParseDuration(fmt.Sprint(get(t, svc, "stop_grace_period")))
		if err != nil {
			t.Errorf("service %s: stop_grace_period: %v", name, err)
		} else if need := graceNeeded(cfg); grace <= need {
			t.Errorf("service %s: stop_grace_period %v ≤ the longest graceful leave %v", name, grace, need)
		}
	}
	if nats != 3 {
		t.Errorf("%d nats services, want 3", nats)
	}
	if len(workers) != 1 {
		t.Errorf("worker services %v: want one, scaled with --scale", workers)
	}
	if s := string(read(t, "deploy/nats/nats.conf")); regexp.MustCompile(`(?m)^\s*mappings\b`).MatchString(s) {
		t.Error("deploy/nats/nats.conf maps subjects: the input stream's transform partitions the keys, a server mapping would rewrite the publish subjects")
	}
	if _, err := os.Stat(filepath.Join(root, "deploy/compose/kpcastream-p0.yaml")); err == nil {
		t.Error("deploy/compose/kpcastream-p0.yaml is back: workers need no per-partition config")
	}
}

// TestKubernetes loads the config of the ConfigMap with the flags of the
// Deployment, checks that it is the compose config, checks the probes, the
// grace period, the disruption budget, and the memory limit against the
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
	if len(files) != 1 {
		t.Errorf("ConfigMap kpcastream-config has files %v: want one, read by every pod", keys(files))
	}
	var dep, svc, pdb map[string]any
	for _, d := range yamlDocs(t, "deploy/k8s/kpcastream.yaml") {
		switch d["kind"] {
		case "Deployment", "StatefulSet":
			if dep != nil {
				t.Fatal("deploy/k8s/kpcastream.yaml: more than one workload")
			}
			dep = d
		case "Service":
			svc = d
		case "PodDisruptionBudget":
			pdb = d
		}
	}
	if dep == nil || svc == nil {
		t.Fatal("deploy/k8s/kpcastream.yaml: want a Deployment (or StatefulSet) and a Service")
	}
	labels := get(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
	matches := func(sel any) bool {
		for k, v := range sel.(map[string]any) {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	if !matches(get(t, dep, "spec", "selector", "matchLabels")) || !matches(get(t, svc, "spec", "selector")) {
		t.Error("the workload's selector or the Service's does not match the pod labels")
	}
	if pdb != nil && !matches(get(t, pdb, "spec", "selector", "matchLabels")) {
		t.Error("the PodDisruptionBudget's selector does not match the pod labels")
	}
	replicas := get(t, dep, "spec", "replicas").(int)
	spec := get(t, dep, "spec", "template", "spec").(map[string]any)
	c := get(t, spec, "containers", 0).(map[string]any)
	args := strs(t, get(t, c, "args"))
	if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "$(") }) {
		t.Errorf("workload args %v depend on the pod: every pod must run the same config", args)
	}
	flags := parseArgs(t, "workload", args)
	mount := get(t, c, "volumeMounts", 0, "mountPath").(string)
	dir, file := filepath.Split(flags["config"])
	if filepath.Clean(dir) != mount {
		t.Fatalf("--config %s is not in the ConfigMap mount %s", flags["config"], mount)
	}
	src, ok := files[file].(string)
	if !ok {
		t.Fatalf("pods read %s, which the ConfigMap lacks (it has %v)", file, keys(files))
	}
	cfg := loadConfig(t, "ConfigMap "+file, src, flags)
	checkWorker(t, "k8s", cfg)
	sameConfig(t, []string{"deploy/compose/kpcastream.yaml", "ConfigMap " + file}, []*config.Config{composeConfig(t), cfg})
	pc := cfg.ProcessorConfig().WithDefaults()
	for _, p := range pc.Pipelines {
		if replicas > p.Partitions {
			t.Errorf("%d replicas for %d partitions of pipeline %s: %d pods would idle", replicas, p.Partitions, p.Name, replicas-p.Partitions)
		}
	}

	// Probes, ports and the grace period.
	port := strings.TrimPrefix(cfg.HTTP.MetricsAddr, ":")
	if get(t, c, "livenessProbe", "httpGet", "path") != "/healthz" || get(t, c, "readinessProbe", "httpGet", "path") != "/readyz" {
		t.Error("liveness must probe /healthz and readiness /readyz")
	}
	if p := get(t, c, "ports", 0, "containerPort"); fmt.Sprint(p) != port {
		t.Errorf("containerPort %v, want the metrics port %s", p, port)
	}
	if p := get(t, svc, "spec", "ports", 0, "port"); fmt.Sprint(p) != port {
		t.Errorf("Service port %v, want the metrics port %s", p, port)
	}
	grace := time.Duration(get(t, spec, "terminationGracePeriodSeconds").(int)) * time.Second
	if need := graceNeeded(cfg); grace <= need || grace <= 4*pc.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v ≤ the longest graceful leave %v", grace, need)
	}

	// Memory: base + live keys + snapshot copies in flight, for one pod
	// owning every partition (podMemoryNeed).
	limit := quantity(t, get(t, c, "resources", "limits", "memory").(string))
	request := quantity(t, get(t, c, "resources", "requests", "memory").(string))
	need := podMemoryNeed(t, pc)
	t.Logf("a pod owning every partition needs ≈ %.1f MiB; request %.0f MiB, limit %.0f MiB", float64(need)/(1<<20), float64(request)/(1<<20), float64(limit)/(1<<20))
	if limit < need || request < need {
		t.Errorf("memory request %d / limit %d B below the formula's %d B", request, limit, need)
	}
	if limit < request {
		t.Errorf("memory limit %d below request %d", limit, request)
	}
	for _, e := range get(t, c, "env").([]any) {
		m := e.(map[string]any)
		if m["name"] == "GOMEMLIMIT" {
			if v := quantity(t, strings.TrimSuffix(fmt.Sprint(m["value"]), "B")); v >= limit || v < need {
				t.Errorf("GOMEMLIMIT %v not in [need %d, limit %d)", m["value"], need, limit)
			}
		}
	}
	if s := string(read(t, "deploy/k8s/nats-values.yaml")); strings.Contains(s, "mappings") {
		t.Error("deploy/k8s/nats-values.yaml maps subjects: the input stream's transform partitions the keys")
	}

	// A change of the ConfigMap rolls the pods: the pod template carries
	// the config's checksum, so editing one without the other fails here
	// and applying both changes the template (a rolling update).
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(src)))
	ann, _ := get(t, dep, "spec", "template", "metadata", "annotations").(map[string]any)[configChecksum].(string)
	if ann != sum {
		t.Errorf("deploy/k8s/kpcastream.yaml: pod template annotation %s is %q, want %q (the sha256 of the ConfigMap's %s): "+
			"without it an edited ConfigMap does not roll the pods; set it to the new value", configChecksum, ann, sum, file)
	}
	for _, f := range []string{"deploy/k8s/kpcastream.yaml", "deploy/k8s/streams-job.yaml"} {
		for _, img := range images(yamlDocs(t, f)) {
			checkPinned(t, f, img)
		}
	}
}

// configChecksum is the pod template annotation holding the sha256 of the
// ConfigMap's config.yaml (deploy/README.md, Kubernetes).
const configChecksum = "kpcastream.io/config-sha256"

// images returns every "image" value in the decoded documents.
func images(docs []map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "image" {
					out = append(out, s)
				} else {
					walk(e)
				}
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, d := range docs {
		walk(d)
	}
	slices.Sort(out)
	return out
}

// checkPinned fails for an image without a tag or with a moving one
// (latest), except kpcastream's own, which the deployment builds.
func checkPinned(t *testing.T, where, img string) {
	t.Helper()
	name, tag, ok := strings.Cut(img[strings.LastIndex(img, "/")+1:], ":")
	if strings.HasPrefix(name, "kpcastream") {
		return // built from ../Dockerfile
	}
	if !ok || tag == "" || tag == "latest" || tag == "edge" || tag == "nightly" {
		t.Errorf("%s: image %q is not pinned to a version tag", where, img)
	}
}

// podMemoryNeed is the memory of one pod owning every partition: base +
// live keys + snapshot copies in flight. Per partition the processor
// runs max(1, ⌈workers/N⌉) worker goroutines, each holding its share of
// memory_budget in keys (in memory, and the local tier's bookkeeping of
// those on disk), at least one, and 8 snapshot copies
// (processor.workersPerPartition, memoryOf, jobSlots).
func podMemoryNeed(t *testing.T, pc processor.Config) int64 {
	t.Helper()
	need := int64(64 << 20)
	for _, p := range pc.Pipelines {
		perKey := learnerBytes(t, p.Learner)
		n := int64(p.Partitions)
		wpp := max(1, (int64(pc.Workers)+n-1)/n)
		// memory_budget bounds the keys in memory with the local tier's
		// bookkeeping of the others (processor.MemoryPlan); a worker
		// holds at least one key whatever the budget.
		live := max(p.MemoryBudget, n*wpp*perKey)
		need += live + n*wpp*8*perKey
	}
	return need
}

// composeBytes parses a compose byte value: a number with b, k, m or g
// (binary units, either case, an optional trailing b: "208m", "2gb").
func composeBytes(t *testing.T, s string) int64 {
	t.Helper()
	v := strings.TrimSuffix(strings.ToLower(s), "b")
	mul := int64(1)
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k':
			mul, v = 1<<10, v[:n-1]
		case 'm':
			mul, v = 1<<20, v[:n-1]
		case 'g':
			mul, v = 1<<30, v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("compose byte value %q: %v", s, err)
	}
	return n * mul
}

// goMemLimit parses a GOMEMLIMIT value (a number with B, KiB, MiB or GiB).
func goMemLimit(t *testing.T, s string) int64 {
	t.Helper()
	return quantity(t, strings.TrimSuffix(s, "B"))
}

// TestComposeResources: every service's image is pinned to a version tag,
// and the workers and the NATS nodes run with a memory limit and a
// GOMEMLIMIT below it; the workers' limit covers the memory formula of a
// worker owning every partition (as the Kubernetes Deployment's).
func TestComposeResources(t *testing.T) {
	doc := yamlDocs(t, "deploy/docker-compose.yml")[0]
	services := get(t, doc, "services").(map[string]any)
	for _, img := range images([]map[string]any{doc}) {
		checkPinned(t, "deploy/docker-compose.yml", img)
	}
	need := podMemoryNeed(t, composeConfig(t).ProcessorConfig().WithDefaults())
	for _, name := range keys(services) {
		svc := services[name].(map[string]any)
		img, _ := svc["image"].(string)
		worker := svc["build"] != nil
		if !worker && !strings.HasPrefix(img, "nats:") {
			continue // one-shot tools (nats-init)
		}
		limit := composeBytes(t, fmt.Sprint(get(t, svc, "deploy", "resources", "limits", "memory")))
		env, _ := get(t, svc, "environment").(map[string]any)
		gml, ok := env["GOMEMLIMIT"].(string)
		if !ok {
			t.Errorf("service %s: no GOMEMLIMIT in its environment", name)
			continue
		}
		v := goMemLimit(t, gml)
		if v >= limit || v < limit*8/10 {
			t.Errorf("service %s: GOMEMLIMIT %s not in [80%%, 100%%) of its memory limit %d B", name, gml, limit)
		}
		if worker && (limit < need || v < need) {
			t.Errorf("service %s: memory limit %d B / GOMEMLIMIT %s below a worker's need of %d B (deploy/k8s/kpcastream.yaml's formula)", name, limit, gml, need)
		}
		t.Logf("service %s: memory limit %.0f MiB, GOMEMLIMIT %s (a worker needs ≈ %.1f MiB)", name, float64(limit)/(1<<20), gml, float64(need)/(1<<20))
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
// rules of deploy/README.md against the worker config: limits retention,
// R3, and windows longer than a snapshot period plus a checkpoint period
// plus an ack wait.
func TestStreams(t *testing.T) {
	streams := map[string]jetstream.StreamConfig{}
	for _, name := range []string{"SENSORS", "KPCA_OUT", "KPCA_DLQ"} {
		sc := streamFile(t, name)
		if sc.Name != name || sc.Replicas != 3 || sc.Retention != jetstream.LimitsPolicy || sc.Storage != jetstream.FileStorage {
			t.Errorf("%s: name %q replicas %d retention %v storage %v; want %s, 3, limits, file", name, sc.Name, sc.Replicas, sc.Retention, sc.Storage, name)
		}
		if sc.Duplicates <= 0 || sc.Duplicates > sc.MaxAge {
			t.Errorf("%s: duplicate window %v must be in (0, max_age %v]", name, sc.Duplicates, sc.MaxAge)
		}
		streams[name] = sc
	}
	pc := composeConfig(t).ProcessorConfig().WithDefaults()
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
		// The workers' default output.key_in_flight publishes through
		// ordered lanes, which need a stream that allows batches and keeps
		// the prefix of a batch (discard old).
		if out := streams["KPCA_OUT"]; p.Output.KeyInFlight > 1 && (!out.AllowBatchPublish || out.Discard != jetstream.DiscardOld) {
			t.Errorf("KPCA_OUT allow_batched %v discard %v: pipeline %s's key_in_flight %d would fall back to one output in flight per key", out.AllowBatchPublish, out.Discard, p.Name, p.Output.KeyInFlight)
		}
		// The dead letters are stored: KPCA_DLQ captures the pipeline's
		// dead-letter subject, and the workers do not create a stream of
		// their own (it would overlap).
		dl := streams["KPCA_DLQ"]
		subj := strings.ReplaceAll(strings.ReplaceAll(p.DeadLetter, "{pipeline}", p.Name), "{key}", "x")
		if !slices.ContainsFunc(dl.Subjects, func(f string) bool {
			return f == subj || strings.HasSuffix(f, ">") && strings.HasPrefix(subj, strings.TrimSuffix(f, ">"))
		}) {
			t.Errorf("KPCA_DLQ subjects %v do not capture pipeline %s's dead letters %s", dl.Subjects, p.Name, subj)
		}
		if p.DeadLetters.StreamName(p.Name) != "KPCA_DLQ" || *p.DeadLetters.CreateStream {
			t.Errorf("pipeline %s: dead_letters %+v, want stream KPCA_DLQ, create_stream false", p.Name, p.DeadLetters)
		}
		if dl.MaxAge <= 0 || dl.MaxBytes <= 0 {
			t.Errorf("KPCA_DLQ without limits: max_age %v, max_bytes %d", dl.MaxAge, dl.MaxBytes)
		}
	}
}

// fnv32a is FNV-1a (32 bits), the hash of nats-server's {{partition(n,…)}}
// transform.
func fnv32a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// TestSensorsTransform creates SENSORS from its file on an embedded
// nats-server (one replica, no byte limit) and publishes to
// sensors.<key>.features: the server must accept the transform and store
// each message as sensors.<key>.features.<fnv32a(key) mod N>, the subject
// partition p of the workers' consumers filters on
// (sensors.*.features.<p>), with the key token where key_token says.
func TestSensorsTransform(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sc := streamFile(t, "SENSORS")
	sc.Replicas, sc.MaxBytes = 1, -1
	st, err := js.CreateStream(ctx, sc)
	if err != nil {
		t.Fatalf("create SENSORS from deploy/streams/SENSORS.json: %v", err)
	}
	if got := st.CachedInfo().Config.SubjectTransform; got == nil || *got != *sc.SubjectTransform {
		t.Fatalf("server kept the transform %+v, file has %+v", got, sc.SubjectTransform)
	}
	var p processor.PipelineConfig
	for _, q := range composeConfig(t).ProcessorConfig().WithDefaults().Pipelines {
		if q.Input.Stream == "SENSORS" {
			p = q
		}
	}
	if p.Partitions < 2 {
		t.Fatalf("no pipeline with partitions reads SENSORS")
	}
	count := map[string]int{}
	for i := range 200 {
		key := fmt.Sprintf("sensor-%d", i)
		ack, err := js.Publish(ctx, "sensors."+key+".features", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		toks := strings.Split(m.Subject, ".")
		part := strconv.Itoa(int(fnv32a(key) % uint32(p.Partitions)))
		want := "sensors." + key + ".features." + part
		if m.Subject != want || toks[*p.KeyToken] != key {
			t.Fatalf("sensors.%s.features stored as %s, want %s (key token %d)", key, m.Subject, want, *p.KeyToken)
		}
		count[part]++
	}
	if len(count) != p.Partitions {
		t.Errorf("200 keys fell into %d of %d partitions", len(count), p.Partitions)
	}
	// Partition n's consumer filters on the input subject with n appended
	// (processor.newPartition): it sees exactly that partition's messages.
	for n := range p.Partitions {
		part := strconv.Itoa(n)
		cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "p" + part, FilterSubject: p.Input.Subject + "." + part, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatalf("consumer of partition %d: %v", n, err)
		}
		if got := cons.CachedInfo().NumPending; got != uint64(count[part]) {
			t.Errorf("partition %d's consumer has %d messages pending, want %d", n, got, count[part])
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
	_, port, _ := strings.Cut(config.DefaultMetricsAddr, ":")
	for _, want := range []string{
		// The binary listens on loopback by default; the image on every
		// interface, the port it exposes.
		"ENV KPCASTREAM_METRICS_ADDR=:" + port,
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
