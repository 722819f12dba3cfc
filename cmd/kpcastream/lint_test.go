package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// configsInRepo returns every configuration file of the repository meant
// to be valid (relative to this package), with the ConfigMap's embedded
// config.yaml written out to a temporary file.
func configsInRepo(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	files = append(files, "../../deploy/compose/kpcastream.yaml")
	cm, err := os.ReadFile("../../deploy/k8s/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(cm), "  config.yaml: |\n")
	if !ok {
		t.Fatal("deploy/k8s/configmap.yaml has no config.yaml")
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		if line != "\n" && line != "" && !strings.HasPrefix(line, "    ") {
			break
		}
		out.WriteString(strings.TrimPrefix(line, "    "))
	}
	f := filepath.Join(t.TempDir(), "configmap-config.yaml")
	if err := os.WriteFile(f, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(files, f)
}

// TestLintRepoConfigs lints every configuration of the repository.
func TestLintRepoConfigs(t *testing.T) {
	for _, f := range configsInRepo(t) {
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), []string{"lint", "--config", f}, &out, &errOut); code != 0 {
			t.Errorf("lint %s: exit %d\n%s%s", f, code, out.String(), errOut.String())
			continue
		}
		if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], ": ok: ") {
			t.Errorf("lint %s: want one summary line, got %q", f, out.String())
		}
	}
}

const badConfig = `workers: many
log: {level: loud}
nats: {url: "nats://user:s3cret@host:4222"}
pipelines:
  - name: p
    input: {subject: "in.*"}
    learner: {dim: four, components: 2, budget: 1, kernel: {name: rbf, gamma: 0.5}}
    max_keys: -1
`

// TestLintReportsEveryProblem: a YAML type error and the validation
// problems of the rest of the file, one line each naming the field's YAML
// path, exit 1; the same from run --dry-run, which starts nothing.
func TestLintReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(f, []byte(badConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"workers", "pipelines[0].learner.dim", "log.level", "pipelines[0].learner.components", "pipelines[0].max_keys"}
	lineRE := regexp.MustCompile(`^` + regexp.QuoteMeta(f) + `: config: (\S+): `)
	for _, args := range [][]string{{"lint", "--config", f}, {"run", "--dry-run", "--config", f, "--data-dir", filepath.Join(dir, "data")}} {
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), args, &out, &errOut); code != 1 {
			t.Errorf("%v: exit %d, want 1\n%s%s", args, code, out.String(), errOut.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var paths []string
		for _, l := range lines {
			m := lineRE.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("%v: line %q does not name a field", args, l)
				continue
			}
			paths = append(paths, m[1])
		}
		if strings.Join(paths, " ") != strings.Join(want, " ") {
			t.Errorf("%v: fields %q, want %q\n%s", args, paths, want, out.String())
		}
		if !strings.Contains(errOut.String(), "5 problems") {
			t.Errorf("%v: stderr %q, want the count", args, errOut.String())
		}
		if strings.Contains(out.String()+errOut.String(), "s3cret") {
			t.Errorf("%v: the password is printed", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("run --dry-run created its data directory (%v): it must start nothing", err)
	}
}

// TestDryRunValid: run --dry-run of a valid file prints the summary, with
// the flags applied and a URL's password hidden, and starts nothing.
func TestDryRunValid(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"run", "--dry-run", "--config", "../../examples/kpcastream.yaml", "--data-dir", filepath.Join(dir, "data"),
		"--nats-url", "nats://me:s3cret@nats.example:4222", "--metrics-addr", "127.0.0.1:1"}
	if code := runMain(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	s := out.String()
	for _, w := range []string{": ok: 1 pipeline (sensors: ikpca d=4 k=2 B=64", "NATS nats://me:xxxxx@nats.example:4222", "metrics 127.0.0.1:1"} {
		if !strings.Contains(s, w) {
			t.Errorf("summary %q lacks %q", s, w)
		}
	}
	if strings.Contains(s+errOut.String(), "s3cret") {
		t.Error("the password is printed")
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("run --dry-run created its data directory (%v)", err)
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runMain(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !regexp.MustCompile(`^kpcastream \S+ \(revision \S+(, \S+)?, go\d[^)]*\)\n$`).MatchString(out.String()) {
		t.Errorf("version: %q", out.String())
	}
}

// TestClientConfigRunOnlyVariable: a client command reads a --config file
// whose ${PORT} only "run" uses (http.metrics_addr) without PORT set
// (issue 33 row 9); run and lint still name it.
func TestClientConfigRunOnlyVariable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "alpha.yaml")
	yml := `http: {metrics_addr: "127.0.0.1:${KPCA_TEST_UNSET_PORT}"}
pipelines:
  - name: alpha
    input: {stream: ALPHA, subject: "alpha.*.features"}
    learner: {dim: 4, components: 2, kernel: {name: rbf}}
`
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &clientFlags{config: file}
	cfg, err := c.load()
	if err != nil {
		t.Fatalf("client load: %v", err)
	}
	if p, err := c.pipelineOf(cfg); err != nil || p.Input.Subject != "alpha.*.features" {
		t.Errorf("pipeline: %v %v", p, err)
	}
	code, out, errOut := runCmd(t, "lint", "--config", file)
	if code != 1 || !strings.Contains(out+errOut, "KPCA_TEST_UNSET_PORT is not set") {
		t.Errorf("lint: %d %s%s, want the unset variable named", code, out, errOut)
	}
}

// TestWidthHint: publish's hint on a row of the wrong width counts its
// columns in English, not "column(s)" (issue 33 row 15).
func TestWidthHint(t *testing.T) {
	for _, c := range []struct {
		got, want int
		hint      string
	}{
		{5, 4, "leave 1 column out with --drop (or name the id with --id-column)"},
		{6, 4, "leave 2 columns out with --drop (or name the id with --id-column)"},
		{3, 4, "1 column missing"},
		{1, 4, "3 columns missing"},
	} {
		if h := widthHint(c.got, c.want); h != c.hint {
			t.Errorf("widthHint(%d, %d) = %q, want %q", c.got, c.want, h, c.hint)
		}
	}
}

// TestLintShards: lint names a sharded pipeline's streams and the server
// mapping they need, and refuses more shards than partitions.
func TestLintShards(t *testing.T) {
	dir := t.TempDir()
	cfg := `nats: {url: "nats://127.0.0.1:4222"}
pipelines:
  - name: sensors
    partitions: 8
    input: {stream: SENSORS, subject: sensors.*.features, shards: SHARDS, create_stream: true}
    learner: {kind: ikpca, dim: 4, components: 2, kernel: {name: rbf}}
    output: {subject: "kpca.out.{pipeline}.{shard}.{key}", stream: KPCA_OUT, create_stream: true}
`
	for _, c := range []struct {
		shards string
		code   int
		want   string
	}{
		{"3", 0, `8 partitions over 3 shard streams SENSORS-0…SENSORS-2, which need the server subject mapping "sensors.*.features": "sensors.{{wildcard(1)}}.features.{{partition(8,1)}}"`},
		{"9", 1, "pipelines[0].input.shards: must be ≤ partitions (8)"},
	} {
		f := filepath.Join(dir, "s"+c.shards+".yaml")
		if err := os.WriteFile(f, []byte(strings.Replace(cfg, "SHARDS", c.shards, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), []string{"lint", "--config", f}, &out, &errOut); code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("shards %s: exit %d (want %d), output %q; want it to contain %q", c.shards, code, c.code, out.String(), c.want)
		}
	}
}

// TestLintProcessMemory: lint prints how process_memory divides, and
// refuses budgets that do not fit under it at h = 1 with the field and
// the numbers (exit 1); run --dry-run refuses the same file.
func TestLintProcessMemory(t *testing.T) {
	dir := t.TempDir()
	cfg := `NATS
process_memory: TARGET
workers: 2
pipelines:
  - name: sensors
    input: {stream: SENSORS, subject: sensors.*.features}
    learner: {kind: ikpca, dim: 16, components: 2, budget: 16, kernel: {name: rbf}}
    memory_budget: 1342177280
`
	for _, c := range []struct {
		name, nats, target string
		code               int
		want               []string
	}{
		// (2656 MiB − 96 MiB) / 2 = 1280 MiB: fits exactly.
		{"fits", `nats: {url: "nats://127.0.0.1:4222"}`, "2785017856", 0, []string{
			"ok: ", "; process_memory 2.6 GiB: memory_budget 1.2 GiB of at most 1.2 GiB (h = 1), Go's soft limit 2.6 GiB less the file pages resident",
			"at least 1.9 GiB"}},
		{"embedded", "", "2785017856", 0, []string{"process_memory 2.6 GiB", "the embedded server's memory counts in the process too"}},
		// 2 GiB: (2048 − 96) / 2 = 976 MiB < 1280 MiB.
		{"over", `nats: {url: "nats://127.0.0.1:4222"}`, "2147483648", 1, []string{
			"config: process_memory: 2.0 GiB (2147483648 B) leaves at most 976.0 MiB for the pipelines' memory_budget",
			"they hold 1.2 GiB (sensors 1.2 GiB): raise process_memory to at least 2.6 GiB (2785017856 B) or lower memory_budget"}},
	} {
		f := filepath.Join(dir, c.name+".yaml")
		body := strings.NewReplacer("NATS", c.nats, "TARGET", c.target).Replace(cfg)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args := [][]string{{"lint", "--config", f}}
		if c.code != 0 {
			args = append(args, []string{"run", "--dry-run", "--config", f, "--data-dir", filepath.Join(dir, "data")})
		}
		for _, a := range args {
			var out, errOut bytes.Buffer
			code := runMain(context.Background(), a, &out, &errOut)
			if code != c.code {
				t.Errorf("%s %v: exit %d, want %d\n%s%s", c.name, a, code, c.code, out.String(), errOut.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("%s %v: output %q does not say %q", c.name, a, out.String(), w)
				}
			}
		}
		if c.name == "embedded" {
			continue
		}
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), []string{"lint", "--config", f}, &out, &errOut); strings.Contains(out.String(), "embedded server's memory") {
			t.Errorf("%s: exit %d, the embedded server's warning with nats.url set: %q", c.name, code, out.String())
		}
	}
}
