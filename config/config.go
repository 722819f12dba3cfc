package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Defaults of the root Config.
const (
	DefaultEmbeddedHost = "127.0.0.1"
	DefaultEmbeddedPort = 4222
	DefaultDataDir      = "kpcastream-data"
	DefaultMetricsAddr  = "127.0.0.1:9090"
	DefaultLogLevel     = "info"
)

// Config is the root configuration of "kpcastream run". See the package
// comment for the YAML layout and every field's unit and default.
type Config struct {
	// NATS says how to connect to an existing NATS server or cluster.
	NATS NATS `yaml:"nats"`
	// Embedded configures the embedded nats-server started when NATS.URL is empty.
	Embedded Embedded `yaml:"embedded"`
	// DataDir holds the embedded server's JetStream store. Default "kpcastream-data".
	DataDir string `yaml:"data_dir"`
	// Log configures logging.
	Log Log `yaml:"log"`
	// HTTP configures the /metrics, /healthz and /readyz listener.
	HTTP HTTP `yaml:"http"`
	// Snapshots configures where learner snapshots are stored.
	Snapshots snapshot.Config `yaml:"snapshots"`
	// ProcessMemory is a target for the resident memory (RSS) of the
	// kpcastream process, in bytes (issue 30); 0, the default: none.
	// "kpcastream run" keeps Go's soft memory limit at it less the file
	// pages the process has resident (the binary, the local tier's mapped
	// reads), unless GOMEMLIMIT is set, and Validate refuses pipelines
	// whose memory_budget sum to more than (ProcessMemory − 32 MiB −
	// 64 MiB) / 2 (processor.Config.ProcessMemory). It counts what the
	// process holds: with the embedded server, the server's memory too,
	// which no budget sizes — set it with an external server.
	ProcessMemory int64 `yaml:"process_memory"`
	// Processor holds the processor-wide settings (workers, queue_size, …),
	// written at the top level of the file.
	Processor processor.Config `yaml:",inline"`
	// Pipelines are the pipelines to run, each with its learner
	// (pipelines[i].learner is a learners.Config).
	Pipelines []processor.PipelineConfig `yaml:"pipelines"`
}

// NATS holds the connection settings for an external NATS server.
type NATS struct {
	// URL is a comma-separated list of server URLs; empty starts an
	// embedded server. Env NATS_URL or KPCASTREAM_NATS_URL; flag --nats-url.
	URL string `yaml:"url"`
	// Name is the client connection name. Default "kpcastream".
	Name string `yaml:"name"`
	// Creds is a credentials (JWT + seed) file. Env NATS_CREDS.
	Creds string `yaml:"creds"`
	// NKey is an nkey seed file. Env NATS_NKEY.
	NKey string `yaml:"nkey"`
	// User and Password authenticate by user name. Env NATS_USER, NATS_PASSWORD.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// Token authenticates by token. Env NATS_TOKEN.
	Token string `yaml:"token"`
	// TLS configures TLS.
	TLS TLS `yaml:"tls"`
	// ReconnectWait is the delay between reconnect attempts; the client
	// reconnects forever. Default 2s.
	ReconnectWait time.Duration `yaml:"reconnect_wait"`
}

// TLS holds TLS file paths.
type TLS struct {
	// CA is a PEM file of root CAs. Env NATS_CA.
	CA string `yaml:"ca"`
	// Cert and Key are a PEM client certificate and key. Env NATS_CERT, NATS_KEY.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Embedded configures the embedded nats-server.
type Embedded struct {
	// Host is the listen address. Default 127.0.0.1.
	Host string `yaml:"host"`
	// Port is the client port; -1 picks a free port. Default 4222. Env
	// KPCASTREAM_EMBEDDED_PORT.
	Port int `yaml:"port"`
	// StoreDir is the directory the embedded nats-server keeps its JetStream
	// store in, as nats-server's own store_dir: the store is its "jetstream"
	// subdirectory. Default <data_dir> (the store is <data_dir>/jetstream).
	StoreDir string `yaml:"store_dir"`
}

// Log configures the zap logger.
type Log struct {
	// Format is "json", "console", or empty: JSON unless stderr is a terminal.
	// Env KPCASTREAM_LOG_FORMAT; flag --log-format.
	Format string `yaml:"format"`
	// Level is debug, info, warn or error. Default info. Env KPCASTREAM_LOG_LEVEL.
	Level string `yaml:"level"`
}

// HTTP configures the metrics and health listener.
type HTTP struct {
	// MetricsAddr is the listen address of /metrics, /healthz and /readyz;
	// "off" disables it. Default "127.0.0.1:9090" (loopback, like the
	// embedded server; ":9090" serves every interface, as deploy/ and the
	// container image do). Env KPCASTREAM_METRICS_ADDR;
	// flag --metrics-addr.
	MetricsAddr string `yaml:"metrics_addr"`
}

// Overrides are command-line flags; a nil field was not given.
type Overrides struct {
	NATSURL     *string
	MetricsAddr *string
	DataDir     *string
	LogFormat   *string
	// Env, when not nil, looks up the variables of the file's ${VAR}
	// references instead of Read's getenv (the commands hide the NATS_*
	// variables from getenv, not from an explicit ${NATS_URL}).
	Env func(string) (string, bool)
	// Unused, when not nil, names the fields (by YAML path, such as
	// "http.metrics_addr") the caller does not read: a ${VAR} whose
	// variable is unset is read as "" there instead of an error. The client
	// commands do not fail on a variable only "run" uses.
	Unused func(path string) bool
}

// Load reads the YAML file at path (strict: unknown fields are errors),
// substituting its ${VAR} and ${VAR:default} references first (see
// expand), then applies the environment (looked up with getenv; nil means
// os.LookupEnv) and the flag overrides, applies defaults and validates.
// Precedence: flags > env > file > defaults. Every validation problem is
// reported at once.
func Load(path string, getenv func(string) (string, bool), ov Overrides) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return Read(f, getenv, ov)
}

// Read is Load from a reader. A YAML type error or unknown field does not
// stop it: the rest of the file is decoded and validated, and every problem
// is returned at once, each a *FieldError (see Problems); a problem of a
// field the YAML could not decode, or of a field inside it, is reported
// once, by the decoder (`kernel: x` is not also "kernel.name: required").
func Read(r io.Reader, getenv func(string) (string, bool), ov Overrides) (*Config, error) {
	var c Config
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if getenv == nil {
		getenv = os.LookupEnv
	}
	lookup := ov.Env
	if lookup == nil {
		lookup = getenv
	}
	data, subErrs := expandUnused(data, lookup, ov.Unused)
	if len(subErrs) > 0 {
		return nil, errors.Join(subErrs...)
	}
	decErrs, complete := decodeYAML(data, &c)
	if !complete {
		return nil, errors.Join(decErrs...)
	}
	errs := append(decErrs, c.applyEnv(getenv)...)
	c.applyOverrides(ov)
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		var undecoded []string
		for _, e := range decErrs {
			var fe *FieldError
			if errors.As(e, &fe) && fe.Path != "" {
				undecoded = append(undecoded, fe.Path)
			}
		}
		for _, e := range Problems(err) {
			var fe *FieldError
			if errors.As(e, &fe) && slices.ContainsFunc(undecoded, func(u string) bool { return within(fe.Path, u) }) {
				continue // the decoder's error says what is wrong with it
			}
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

// within reports whether the field at path is the one at outer or inside it
// ("a.b" and "a[0]" are within "a", "ab" is not).
func within(path, outer string) bool {
	if !strings.HasPrefix(path, outer) {
		return false
	}
	rest := path[len(outer):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// applyEnv sets the fields that environment variables override; a value
// that does not parse is returned as a problem of its field.
func (c *Config) applyEnv(getenv func(string) (string, bool)) []error {
	set := func(dst *string, names ...string) {
		for _, n := range names {
			if v, ok := getenv(n); ok && v != "" {
				*dst = v
				return
			}
		}
	}
	set(&c.NATS.URL, "KPCASTREAM_NATS_URL", "NATS_URL")
	set(&c.NATS.Creds, "NATS_CREDS")
	set(&c.NATS.NKey, "NATS_NKEY")
	set(&c.NATS.User, "NATS_USER")
	set(&c.NATS.Password, "NATS_PASSWORD")
	set(&c.NATS.Token, "NATS_TOKEN")
	set(&c.NATS.TLS.CA, "NATS_CA")
	set(&c.NATS.TLS.Cert, "NATS_CERT")
	set(&c.NATS.TLS.Key, "NATS_KEY")
	set(&c.HTTP.MetricsAddr, "KPCASTREAM_METRICS_ADDR")
	set(&c.DataDir, "KPCASTREAM_DATA_DIR")
	set(&c.Log.Format, "KPCASTREAM_LOG_FORMAT")
	set(&c.Log.Level, "KPCASTREAM_LOG_LEVEL")
	if v, ok := getenv("KPCASTREAM_EMBEDDED_PORT"); ok && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return []error{fielderr.New(scope, nil, "embedded.port", "env KPCASTREAM_EMBEDDED_PORT=%q is not a port number", v)}
		}
		c.Embedded.Port = n
	}
	return nil
}

func (c *Config) applyOverrides(ov Overrides) {
	for _, o := range []struct {
		dst *string
		v   *string
	}{{&c.NATS.URL, ov.NATSURL}, {&c.HTTP.MetricsAddr, ov.MetricsAddr}, {&c.DataDir, ov.DataDir}, {&c.Log.Format, ov.LogFormat}} {
		if o.v != nil {
			*o.dst = *o.v
		}
	}
}

// WithDefaults returns c with every unset optional field set to its default.
func (c Config) WithDefaults() Config {
	if c.NATS.Name == "" {
		c.NATS.Name = "kpcastream"
	}
	if c.NATS.ReconnectWait == 0 {
		c.NATS.ReconnectWait = 2 * time.Second
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Embedded.Host == "" {
		c.Embedded.Host = DefaultEmbeddedHost
	}
	if c.Embedded.Port == 0 {
		c.Embedded.Port = DefaultEmbeddedPort
	}
	if c.Embedded.StoreDir == "" {
		c.Embedded.StoreDir = c.DataDir
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.HTTP.MetricsAddr == "" {
		c.HTTP.MetricsAddr = DefaultMetricsAddr
	}
	return c
}

// ProcessorConfig returns the processor.Config with (a copy of the slice
// of) its pipelines.
func (c *Config) ProcessorConfig() processor.Config {
	pc := c.Processor
	pc.Pipelines = slices.Clone(c.Pipelines)
	// The local tier (issue 30) lives under data_dir unless the file says
	// local_dir: none.
	switch pc.LocalDir {
	case "":
		pc.LocalDir = filepath.Join(cmp.Or(c.DataDir, DefaultDataDir), "local")
	case processor.LocalNone:
		pc.LocalDir = ""
	}
	return pc
}

// ProcessMemoryPlan is how process_memory divides for c's pipelines
// (Target 0 when it is not set).
func (c *Config) ProcessMemoryPlan() processor.ProcessMemory {
	return c.ProcessorConfig().ProcessMemory(max(c.ProcessMemory, 0))
}

// Validate reports every problem of c at once, each naming its field by
// its YAML path.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fielderr.New(scope, nil, field, format, args...))
	}
	if c.NATS.URL != "" {
		if err := checkNATSURL(c.NATS.URL); err != nil {
			bad("nats.url", "%v", err)
		}
	}
	if c.NATS.ReconnectWait < 0 {
		bad("nats.reconnect_wait", "must be > 0, got %v", c.NATS.ReconnectWait)
	}
	if (c.NATS.TLS.Cert == "") != (c.NATS.TLS.Key == "") {
		bad("nats.tls", "cert and key must be given together")
	}
	if c.NATS.Password != "" && c.NATS.User == "" {
		bad("nats.user", "required with nats.password")
	}
	auth := 0
	for _, s := range []string{c.NATS.Creds, c.NATS.NKey, c.NATS.User, c.NATS.Token} {
		if s != "" {
			auth++
		}
	}
	if auth > 1 {
		bad("nats", "give at most one of creds, nkey, user/password and token")
	}
	if c.Embedded.Port < -1 || c.Embedded.Port > 65535 {
		bad("embedded.port", "must be in [-1, 65535], got %d", c.Embedded.Port)
	}
	switch c.Log.Format {
	case "", "json", "console":
	default:
		bad("log.format", "must be json or console, got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	errs = append(errs, fielderr.Prefix(scope, "snapshots", c.Snapshots.Validate())...)
	if c.ProcessMemory < 0 {
		bad("process_memory", "must be ≥ 0 bytes (0: none), got %d", c.ProcessMemory)
	} else if err := c.ProcessMemoryPlan().Err(); err != nil {
		bad("process_memory", "%v", err)
	}
	for i, p := range c.Pipelines {
		if p.Learner.Learner == learners.KindBatch {
			// The batch learner projects only after an explicit Fit.
			bad(fmt.Sprintf("pipelines[%d].learner.kind", i), "batch fits offline only (kpcastream replay --learner batch); use ikpca, kha or window in a pipeline")
		}
	}
	// processor.Config names its fields (and its learners' and
	// classifiers') by their YAML paths from the top of this file.
	errs = append(errs, fielderr.Prefix(scope, "", c.ProcessorConfig().Validate())...)
	return errors.Join(errs...)
}

// decodeYAML decodes the single YAML document in data into c, strictly:
// unknown fields and a second document are errors. A type error or an
// unknown field is reported per field as a *FieldError named by its YAML
// path (pipelines[0].learner.dim: "line 7: cannot unmarshal …"), and the
// rest of the document is still decoded (complete is true: c holds every
// field that could be decoded); a syntax error, a document that is not a
// mapping or a second document stops decoding (complete is false).
func decodeYAML(data []byte, c *Config) (errs []error, complete bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(c)
	if errors.Is(err, io.EOF) {
		return nil, true // an empty file: defaults only
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var root yaml.Node
		_ = yaml.Unmarshal(data, &root) // parsed once already, so it parses
		fields := map[int][]lineField{}
		lineFields(&root, "", fields)
		for _, msg := range te.Errors {
			path := errorPath(msg, fields)
			if m := reUnknown.FindStringSubmatch(msg); m != nil {
				// Named by its YAML path, not the decoder's Go type.
				msg = unknownField(m[1], m[2], path)
			} else {
				msg = typeMessage(msg)
			}
			errs = append(errs, decodeErr(path, msg))
		}
		complete = len(root.Content) == 1 && root.Content[0].Kind == yaml.MappingNode
		if !complete {
			return errs, false
		}
	} else if err != nil {
		return []error{fmt.Errorf("config: %w", err)}, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return append(errs, fmt.Errorf("config: %w", err)), false // trailing text that is no YAML
		}
		return append(errs, decodeErr("", fmt.Sprintf("line %d: a second document; the file must hold one", extra.Line))), false
	}
	return errs, true
}

// lineField is a key (or sequence element) of the YAML tree with the
// line it starts on.
type lineField struct {
	path  string // "nats.url", "pipelines[0].learner", `x["we.ird"]`
	key   string // the key as written ("" for a sequence element)
	value string // the value when it is a scalar
	kind  yaml.Kind
}

// lineFields records, for each line of n, the fields starting on it,
// outermost first.
func lineFields(n *yaml.Node, path string, fields map[int][]lineField) {
	switch n.Kind {
	case yaml.DocumentNode:
		// Only a mapping has fields; anything else is wrong as a whole.
		if len(n.Content) == 1 && n.Content[0].Kind == yaml.MappingNode {
			lineFields(n.Content[0], path, fields)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				// A complex key names no field: mark its line, so that an
				// error there is not pinned on a neighbour.
				fields[k.Line] = append(fields[k.Line], lineField{})
				continue
			}
			p := path + "[" + strconv.Quote(k.Value) + "]" // a key that is no plain name, quoted
			if plainKey(k.Value) {
				p = k.Value
				if path != "" {
					p = path + "." + k.Value
				}
			}
			if k.Value == "<<" { // merge key: fields of the merged map belong to this one
				p = path
			}
			f := lineField{path: p, key: k.Value, kind: v.Kind}
			if v.Kind == yaml.ScalarNode {
				f.value = v.Value
			}
			fields[k.Line] = append(fields[k.Line], f)
			if v.Line != k.Line {
				fields[v.Line] = append(fields[v.Line], f)
			}
			lineFields(v, p, fields)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			f := lineField{path: p}
			if c.Kind == yaml.ScalarNode {
				f.value = c.Value
			}
			fields[c.Line] = append(fields[c.Line], f)
			lineFields(c, p, fields)
		}
	}
}

var (
	reUnknown   = regexp.MustCompile(`(?s)^line (\d+): field (.*) not found in type`)
	reDuplicate = regexp.MustCompile(`(?s)^line (\d+): mapping key ("(?:[^"\\]|\\.)*") already defined`)
	reType      = regexp.MustCompile("^line (\\d+): cannot unmarshal (\\S+)(?: `(.*)`)? into")
)

// errorPath names the field a YAML decoding error (which gives only a
// line) is about: the key that an unknown-field or duplicate-key error
// names, the one field on the line whose value a type error quotes, or
// else the outermost field on the line when all the others are inside it.
// It returns "" when that does not pin one field.
func errorPath(msg string, fields map[int][]lineField) string {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil || len(fields[line]) == 0 {
		return ""
	}
	on := fields[line]
	find := func(match func(lineField) bool) string {
		var path string
		for _, f := range on {
			if f.path != "" && match(f) {
				if path != "" && path != f.path {
					return "" // ambiguous
				}
				path = f.path
			}
		}
		return path
	}
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		if p := find(func(f lineField) bool { return f.key == m[2] }); p != "" {
			return p
		}
	}
	if m := reDuplicate.FindStringSubmatch(msg); m != nil {
		if key, err := strconv.Unquote(m[2]); err == nil {
			if p := find(func(f lineField) bool { return f.key == key }); p != "" {
				return p
			}
		}
	}
	if m := reType.FindStringSubmatch(msg); m != nil && m[3] != "" {
		short, trunc := strings.CutSuffix(m[3], "...")
		if p := find(func(f lineField) bool {
			return f.value == short || trunc && len(f.value) > 10 && strings.HasPrefix(f.value, short)
		}); p != "" {
			return p
		}
	} else if m != nil && (m[2] == "!!seq" || m[2] == "!!map") {
		// A list or a mapping where a value is wanted: the one field on
		// the line whose value is one (dim: [1] is learner.dim, not the
		// learner whose mapping starts on the line).
		kind := map[string]yaml.Kind{"!!seq": yaml.SequenceNode, "!!map": yaml.MappingNode}[m[2]]
		var path string
		n := 0
		for _, f := range on {
			if f.path != "" && f.kind == kind && f.key != "" {
				path = f.path
				n++
			}
		}
		if n == 1 {
			return path
		}
	}
	// The outermost field, if everything else on the line is inside it.
	for _, f := range on {
		if f.path == "" || !strings.HasPrefix(f.path, on[0].path) {
			return ""
		}
	}
	return on[0].path
}

// plainKey reports whether a YAML key can be written unquoted in a path.
func plainKey(k string) bool {
	for i, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}
