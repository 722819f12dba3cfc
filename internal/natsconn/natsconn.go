package natsconn

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Settings are the connection settings of one source (a configuration
// file, a context, the environment or the flags); "" is unset.
type Settings struct {
	URL      string
	Creds    string // credentials (JWT + seed) file
	NKey     string // nkey seed file
	User     string
	Password string
	Token    string
	CA       string // PEM root CAs
	Cert     string // PEM client certificate
	Key      string // PEM client key
}

// hasAuth reports whether s names any authentication.
func (s Settings) hasAuth() bool {
	return s.Creds != "" || s.NKey != "" || s.User != "" || s.Password != "" || s.Token != ""
}

// over returns s with every setting given in hi replacing s's. The
// authentication is one unit: a source that names any of creds, nkey,
// user/password or token replaces all of the lower source's, so a token in
// a context and a user given as a flag never add up to two methods.
func (s Settings) over(hi Settings) Settings {
	if hi.URL != "" {
		s.URL = hi.URL
	}
	if hi.hasAuth() {
		s.Creds, s.NKey, s.User, s.Password, s.Token = hi.Creds, hi.NKey, hi.User, hi.Password, hi.Token
	}
	if hi.CA != "" {
		s.CA = hi.CA
	}
	if hi.Cert != "" || hi.Key != "" {
		s.Cert, s.Key = hi.Cert, hi.Key
	}
	return s
}

// Validate reports contradictory settings.
func (s Settings) Validate() error {
	var errs []error
	n := 0
	for _, v := range []string{s.Creds, s.NKey, s.User, s.Token} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("nats: give at most one of creds, nkey, user/password and token"))
	}
	if s.Password != "" && s.User == "" {
		errs = append(errs, errors.New("nats: a password needs a user"))
	}
	if (s.Cert == "") != (s.Key == "") {
		errs = append(errs, errors.New("nats: tls cert and key must be given together"))
	}
	return errors.Join(errs...)
}

// Flags are the connection flags of a subcommand. Register them on a
// FlagSet, parse, then call Settings.
type Flags struct {
	fs      *flag.FlagSet
	context string
	s       Settings
}

// Register adds the connection flags to fs. urlHelp is the help text of
// --nats-url (its default differs between run and the client commands).
func Register(fs *flag.FlagSet, urlHelp string) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.context, "context", "", "nats CLI context name or file (env NATS_CONTEXT; ~/.config/nats/context/NAME.json)")
	fs.StringVar(&f.s.URL, "nats-url", "", urlHelp)
	fs.StringVar(&f.s.Creds, "creds", "", "NATS credentials file (env NATS_CREDS)")
	fs.StringVar(&f.s.NKey, "nkey", "", "NATS nkey seed file (env NATS_NKEY)")
	fs.StringVar(&f.s.User, "user", "", "NATS user name (env NATS_USER)")
	fs.StringVar(&f.s.Password, "password", "", "NATS password (env NATS_PASSWORD)")
	fs.StringVar(&f.s.Token, "token", "", "NATS token (env NATS_TOKEN)")
	fs.StringVar(&f.s.CA, "tlsca", "", "PEM file of root CAs (env NATS_CA)")
	fs.StringVar(&f.s.Cert, "tlscert", "", "PEM client certificate (env NATS_CERT)")
	fs.StringVar(&f.s.Key, "tlskey", "", "PEM client key (env NATS_KEY)")
	return f
}

// Given returns the settings given as flags and the --context flag.
func (f *Flags) Given() (Settings, string) { return f.s, f.context }

// Sources are the inputs of Resolve.
type Sources struct {
	// Flags are the settings given on the command line; Context is --context.
	Flags   Settings
	Context string
	// Getenv looks up the environment; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
	// File are the settings of the configuration file (run only).
	File Settings
	// Selected uses the context selected in context.txt when no context is
	// named by --context or NATS_CONTEXT. run leaves it off: a worker's
	// server comes from its own configuration, not from the context a user
	// last selected on the machine.
	Selected bool
}

// Env returns the settings of the environment variables NATS_URL (or
// KPCASTREAM_NATS_URL, which wins), NATS_CREDS, NATS_NKEY, NATS_USER,
// NATS_PASSWORD, NATS_TOKEN, NATS_CA, NATS_CERT and NATS_KEY.
func Env(getenv func(string) (string, bool)) Settings {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	get := func(names ...string) string {
		for _, n := range names {
			if v, ok := getenv(n); ok && v != "" {
				return v
			}
		}
		return ""
	}
	return Settings{URL: get("KPCASTREAM_NATS_URL", "NATS_URL"), Creds: get("NATS_CREDS"), NKey: get("NATS_NKEY"),
		User: get("NATS_USER"), Password: get("NATS_PASSWORD"), Token: get("NATS_TOKEN"),
		CA: get("NATS_CA"), Cert: get("NATS_CERT"), Key: get("NATS_KEY")}
}

// Resolve merges the sources: flag > environment > context > file, and
// validates the result. It returns the context used ("" for none).
func Resolve(src Sources) (Settings, string, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	name := src.Context
	if name == "" {
		name, _ = getenv("NATS_CONTEXT")
	}
	if name == "" && src.Selected {
		name = selectedContext(getenv)
	}
	s := src.File
	if name != "" {
		c, err := LoadContext(name, getenv)
		if err != nil {
			return Settings{}, "", err
		}
		s = s.over(c)
	}
	s = s.over(Env(getenv)).over(src.Flags)
	if err := s.Validate(); err != nil {
		return Settings{}, "", err
	}
	return s, name, nil
}

// configDir returns the nats CLI's configuration directory.
func configDir(getenv func(string) (string, bool)) string {
	if d, ok := getenv("XDG_CONFIG_HOME"); ok && d != "" {
		return filepath.Join(d, "nats")
	}
	home, _ := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".config", "nats")
}

// selectedContext returns the context named in context.txt, or "".
func selectedContext(getenv func(string) (string, bool)) string {
	b, err := os.ReadFile(filepath.Join(configDir(getenv), "context.txt"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// contextFile is the part of a nats CLI context file that we use.
type contextFile struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	Token    string `json:"token"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
	NSC      string `json:"nsc"`
}

var contextNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// LoadContext reads the nats CLI context name: a name, looked up in the
// context directory, or a path to a .json file.
func LoadContext(name string, getenv func(string) (string, bool)) (Settings, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	path := name
	if !strings.HasSuffix(name, ".json") || !strings.ContainsRune(name, os.PathSeparator) {
		if !contextNameRE.MatchString(name) || name == "." || name == ".." {
			return Settings{}, fmt.Errorf("nats context %q: not a context name", name)
		}
		path = filepath.Join(configDir(getenv), "context", name+".json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Settings{}, fmt.Errorf("nats context %q: %w", name, err)
	}
	var c contextFile
	if err := json.Unmarshal(b, &c); err != nil {
		return Settings{}, fmt.Errorf("nats context %q: %s: %w", name, path, err)
	}
	s := Settings{URL: c.URL, User: c.User, Password: c.Password, Token: c.Token, Cert: c.Cert, Key: c.Key, CA: c.CA}
	for _, f := range []struct {
		field string
		v     string
		dst   *string
	}{{"creds", c.Creds, &s.Creds}, {"nkey", c.NKey, &s.NKey}} {
		p, err := credPath(f.v)
		if err != nil {
			return Settings{}, fmt.Errorf("nats context %q: %s: %w", name, f.field, err)
		}
		*f.dst = p
	}
	if c.NSC != "" && s.Creds == "" {
		return Settings{}, fmt.Errorf("nats context %q: the nsc field is not supported; give creds a file path", name)
	}
	return s, nil
}

// credPath returns the file path of a context's creds or nkey value: a
// bare path or a file:// URI. Other URI schemes (nsc, op, env, data) are
// refused by name rather than misread as paths.
func credPath(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if p, ok := strings.CutPrefix(v, "file://"); ok {
		return p, nil
	}
	for _, scheme := range []string{"nsc://", "op://", "env://", "data:"} {
		if strings.HasPrefix(v, scheme) {
			return "", fmt.Errorf("credential URI scheme %q is not supported; give a file path", strings.TrimRight(scheme, ":/"))
		}
	}
	return v, nil
}

// Options are the nats.Options of s: authentication and TLS.
func (s Settings) Options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case s.Creds != "":
		opts = append(opts, nats.UserCredentials(s.Creds))
	case s.NKey != "":
		o, err := nats.NkeyOptionFromSeed(s.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey: %w", err)
		}
		opts = append(opts, o)
	case s.User != "":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	case s.Token != "":
		opts = append(opts, nats.Token(s.Token))
	}
	if s.CA != "" {
		opts = append(opts, nats.RootCAs(s.CA))
	}
	if s.Cert != "" {
		opts = append(opts, nats.ClientCert(s.Cert, s.Key))
	}
	return opts, nil
}

// Conn configures Connect.
type Conn struct {
	// Name is the client connection name.
	Name string
	// DefaultURL is dialled when the settings give no URL. Default
	// nats://127.0.0.1:4222.
	DefaultURL string
	// Forever reconnects forever every ReconnectWait (workers); otherwise
	// nats.go's defaults apply (client commands).
	Forever       bool
	ReconnectWait time.Duration
	// Logger receives disconnect, reconnect and asynchronous errors, with
	// every URL and error redacted. nil logs nothing.
	Logger *zap.Logger
}

// Connect dials the server of s. The error, and every line logged about
// the connection, names the server with its secrets redacted.
func Connect(s Settings, c Conn, extra ...nats.Option) (*nats.Conn, error) {
	u := s.URL
	if u == "" {
		u = c.DefaultURL
	}
	if u == "" {
		u = nats.DefaultURL
	}
	log := c.Logger
	if log == nil {
		log = zap.NewNop()
	}
	opts, err := s.Options()
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		nats.Name(c.Name),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", zap.String("error", RedactText(err.Error())))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", zap.String("subject", subj), zap.String("error", RedactText(err.Error())))
		}),
	)
	if c.Forever {
		opts = append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false))
		if c.ReconnectWait > 0 {
			opts = append(opts, nats.ReconnectWait(c.ReconnectWait))
		}
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect(u, opts...)
	if err != nil {
		return nil, &ConnectError{URL: Redact(u), Err: err}
	}
	return nc, nil
}

// ConnectError is a failed connect; Error names the redacted URL and the
// redacted cause.
type ConnectError struct {
	URL string
	Err error
}

func (e *ConnectError) Error() string {
	return "connect " + e.URL + ": " + RedactText(e.Err.Error())
}

func (e *ConnectError) Unwrap() error { return e.Err }

// Redacted is the text that replaces a secret.
const Redacted = "xxxxx"

// Redact returns the comma-separated server URLs u with every password
// (user:PASSWORD@) and token (TOKEN@) replaced by Redacted. Something that
// does not parse as a URL is redacted as text (RedactText).
func Redact(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		pu, err := url.Parse(p)
		if err != nil || pu.User == nil {
			parts[i] = RedactText(p)
			continue
		}
		if _, ok := pu.User.Password(); ok {
			pu.User = url.UserPassword(pu.User.Username(), Redacted)
		} else {
			pu.User = url.User(Redacted)
		}
		parts[i] = pu.String()
	}
	return strings.Join(parts, ",")
}

// userinfoRE matches the user information of a URL inside any text.
var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^@/\s"',]*)@`)

// RedactText returns s with the user information of every URL in it
// redacted: "nats://u:p@h" becomes "nats://u:xxxxx@h", "nats://t@h"
// becomes "nats://xxxxx@h".
func RedactText(s string) string {
	return userinfoRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfoRE.FindStringSubmatch(m)
		user, _, hasPass := strings.Cut(sub[2], ":")
		if hasPass {
			return sub[1] + user + ":" + Redacted + "@"
		}
		return sub[1] + Redacted + "@"
	})
}
