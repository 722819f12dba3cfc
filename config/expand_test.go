package config

import (
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestSubstitution: ${VAR} and ${VAR:default} are replaced in the raw file
// before it is parsed; $${ is a literal ${; comment lines are left alone.
func TestSubstitution(t *testing.T) {
	env := envOf(map[string]string{"MY_NATS": "nats://n1:4222,nats://n2:4222", "EMPTY": "", "WORKERS": "3", "SUBJ": "in.*"})
	file := `# a commented-out line may name an unset variable: ${NOT_SET}
nats: {url: "${MY_NATS}", name: "a$${literal}b"}
workers: ${WORKERS}
queue_size: ${QUEUE:16}
data_dir: "${EMPTY:fallback}"
log: {level: "${LEVEL:}info"}
pipelines:
  - name: p
    input: {subject: "${SUBJ}"}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`
	c, err := Read(strings.NewReader(file), env, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ got, want any }{
		{c.NATS.URL, "nats://n1:4222,nats://n2:4222"},
		{c.NATS.Name, "a${literal}b"},
		{c.Processor.Workers, 3},
		{c.Processor.QueueSize, 16},
		{c.DataDir, "fallback"},
		{c.Log.Level, "info"},
		{c.Pipelines[0].Input.Subject, "in.*"},
	} {
		if g.got != g.want {
			t.Errorf("got %v, want %v", g.got, g.want)
		}
	}
	// Overrides.Env looks the references up instead of getenv.
	c, err = Read(strings.NewReader("nats: {url: \"${NATS_URL}\"}\n"+minimal), noEnv, Overrides{Env: envOf(map[string]string{"NATS_URL": "tls://h:4443"})})
	if err != nil || c.NATS.URL != "tls://h:4443" {
		t.Errorf("Overrides.Env: %v %v", c, err)
	}
}

// TestSubstitutionErrors: every bad reference is reported at once with its
// line, an unset variable without a default by name.
func TestSubstitutionErrors(t *testing.T) {
	file := "nats: {url: \"${MY_NATS}\"}\nworkers: ${1X}\nlog: {level: ${LEVEL\n" + minimal
	_, err := Read(strings.NewReader(file), noEnv, Overrides{})
	if err == nil {
		t.Fatal("accepted")
	}
	want := []string{
		"config: substitution: line 1: ${MY_NATS}: environment variable MY_NATS is not set (give it a value, or a default: ${MY_NATS:default})",
		`config: substitution: line 2: ${1X}: "1X" is not a variable name`,
		`config: substitution: line 3: "${LEVEL" has no closing }`,
	}
	probs := Problems(err)
	if len(probs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(probs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(probs[i].Error(), w) {
			t.Errorf("problem %d: %q, want it to start with %q", i, probs[i].Error(), w)
		}
	}
}

// TestNATSURLValidated: nats.url is a comma-separated list of nats, tls,
// ws or wss URLs with a host (issue 23, item 5: "not a url at all" passed).
func TestNATSURLValidated(t *testing.T) {
	for _, ok := range []string{"nats://127.0.0.1:4222", "tls://h.example.com:4443", "ws://h:80", "wss://h", "h:4222", "nats://u:p@h:4222",
		"nats://n1:4222, nats://n2:4222", "nats://[::1]:4222", "nats://h:4222/"} {
		if err := checkNATSURL(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, c := range []struct{ url, want string }{
		{"not a url at all", `"not a url at all" is not a URL`},
		{"http://h:4222", `scheme "http" is not one of nats, tls, ws, wss`},
		{"nats://h:99999", `port "99999" is not in 1..65535`},
		{"nats://h:x", `is not a URL`},
		{"nats://:4222", "has no host"},
		{"nats://h:4222,", "URL 2 of the list: an empty URL"},
		{"nats://h:4222/path", "no path"},
		{"nats://kp:s3cret@h:99999", `"nats://kp:xxxxx@h:99999": port`},
	} {
		err := checkNATSURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want %q", c.url, err, c.want)
		}
	}
	_, err := Read(strings.NewReader("nats: {url: \"not a url at all\"}\n"+minimal), noEnv, Overrides{})
	if err == nil || !strings.Contains(err.Error(), `config: nats.url: "not a url at all" is not a URL`) {
		t.Errorf("Read: %v", err)
	}
}

// TestUnknownFieldSuggests: an unknown field is named by its YAML path and
// the closest known field is suggested (issue 23, item 5: "field ulr not
// found in type config.NATS").
func TestUnknownFieldSuggests(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"nats: {ulr: \"nats://h:4222\"}\n", `config: nats.ulr: line 1: unknown field "ulr"; did you mean "url"? (nats has url, name,`},
		{"wrokers: 2\n", `config: wrokers: line 1: unknown field "wrokers"; did you mean "workers"? (the top level has nats, embedded,`},
		{"pipelines:\n  - name: p\n    learner: {dimension: 3}\n", `config: pipelines[0].learner.dimension: line 3: unknown field "dimension"; did you mean "dim"?`},
		{"http: {metrics: x}\n", `config: http.metrics: line 1: unknown field "metrics"; did you mean "metrics_addr"?`},
		{"nats: {zzzzzz: 1}\n", `config: nats.zzzzzz: line 1: unknown field "zzzzzz" (nats has url,`},
	} {
		_, err := Read(strings.NewReader(c.yaml), noEnv, Overrides{})
		if err == nil || !strings.HasPrefix(Problems(err)[0].Error(), c.want) {
			t.Errorf("%q: %v\nwant first %s", c.yaml, err, c.want)
		}
	}
	if got := knownFields("pipelines[0].input"); len(got) == 0 || got[0] != "stream" && got[0] != "subject" {
		t.Errorf("knownFields(pipelines[0].input) = %v", got)
	}
	if got := knownFields("nats.url"); got != nil {
		t.Errorf("knownFields of a string field: %v", got)
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"ulr", "url", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"same", "same", 0}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// TestEmbeddedPortEnv: KPCASTREAM_EMBEDDED_PORT moves the embedded server
// (so that a second worker or a test need not edit the file); a value that
// is not a number is a problem of embedded.port.
func TestEmbeddedPortEnv(t *testing.T) {
	c, err := Read(strings.NewReader("embedded: {port: 4222}\n"+minimal), envOf(map[string]string{"KPCASTREAM_EMBEDDED_PORT": "14222"}), Overrides{})
	if err != nil || c.Embedded.Port != 14222 {
		t.Fatalf("%v %v", c, err)
	}
	_, err = Read(strings.NewReader(minimal), envOf(map[string]string{"KPCASTREAM_EMBEDDED_PORT": "x"}), Overrides{})
	if err == nil || !strings.Contains(err.Error(), `config: embedded.port: env KPCASTREAM_EMBEDDED_PORT="x" is not a port number`) {
		t.Errorf("bad env port: %v", err)
	}
}

// TestSubstitutionUnused: with Overrides.Unused, an unset variable only in
// fields the caller does not read is "" (a client command and ${PORT} in
// http.metrics_addr, issue 33 row 9); in a field it reads it is still the
// error naming it.
func TestSubstitutionUnused(t *testing.T) {
	env := envOf(map[string]string{})
	file := `http: {metrics_addr: "127.0.0.1:${PORT}"}
log:
  level: ${LEVEL}
pipelines:
  - name: p
    input: {subject: "in.*"}
    learner: {dim: 3, components: 2, kernel: {name: rbf}}
`
	unused := func(p string) bool { return strings.HasPrefix(p, "http.") || strings.HasPrefix(p, "log.") }
	if _, err := Read(strings.NewReader(file), env, Overrides{}); err == nil || !strings.Contains(err.Error(), "${PORT}: environment variable PORT is not set") {
		t.Errorf("without Unused: %v, want PORT not set", err)
	}
	c, err := Read(strings.NewReader(file), env, Overrides{Unused: unused})
	if err != nil {
		t.Fatalf("with Unused: %v", err)
	}
	if c.Pipelines[0].Input.Subject != "in.*" || c.Log.Level != DefaultLogLevel {
		t.Errorf("with Unused: subject %q, log level %q", c.Pipelines[0].Input.Subject, c.Log.Level)
	}
	used := strings.Replace(file, `"in.*"`, `"${SUBJ}"`, 1)
	if _, err := Read(strings.NewReader(used), env, Overrides{Unused: unused}); err == nil || !strings.Contains(err.Error(), "line 6: ${SUBJ}: environment variable SUBJ is not set") || !strings.Contains(err.Error(), "PORT") {
		t.Errorf("an unset variable in a field read: %v, want every unset variable named", err)
	}
}
