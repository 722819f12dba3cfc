package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/natsconn"
	pubport "github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/processor"
)

// clientFlags are the flags shared by the client commands (publish, tail,
// dlq, snapshot): the NATS connection (natsconn) and, optionally, the
// configuration file and pipeline they act on.
type clientFlags struct {
	nats     *natsconn.Flags
	config   string
	pipeline string
}

// registerClient adds the connection flags, --config and --pipeline to fs.
func registerClient(fs *flag.FlagSet) *clientFlags {
	c := &clientFlags{nats: natsconn.Register(fs, "NATS server URLs (env NATS_URL; default: the --config file's server, else nats://127.0.0.1:4222)")}
	fs.StringVar(&c.config, "config", "", "the workers' configuration file: its pipelines and its NATS settings")
	fs.StringVar(&c.pipeline, "pipeline", "", "pipeline of --config (default: its only pipeline)")
	return c
}

// load reads --config (nil without one).
func (c *clientFlags) load() (*config.Config, error) {
	if c.config == "" {
		return nil, nil
	}
	return config.Load(c.config, withoutNATSEnv, config.Overrides{Env: os.LookupEnv})
}

// pipelineOf returns the pipeline named by --pipeline in cfg (its only
// one when --pipeline is not given).
func (c *clientFlags) pipelineOf(cfg *config.Config) (*processor.PipelineConfig, error) {
	if cfg == nil {
		return nil, fmt.Errorf("give --config FILE (and --pipeline P)")
	}
	var names []string
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		if p.Name == c.pipeline || c.pipeline == "" && len(cfg.Pipelines) == 1 {
			return p, nil
		}
		names = append(names, p.Name)
	}
	if c.pipeline == "" {
		return nil, fmt.Errorf("%s has %d pipelines (%s): give --pipeline", c.config, len(names), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("%s has no pipeline %q (it has %s)", c.config, c.pipeline, strings.Join(names, ", "))
}

// connect resolves the connection settings (flag > env > context >
// --config file; the context selected with "nats context select" is used
// when none is named) and connects. With a --config file whose server is
// the embedded one, the default URL is that server's address.
func (c *clientFlags) connect(cfg *config.Config, name string) (*nats.Conn, error) {
	flags, ctxName := c.nats.Given()
	src := natsconn.Sources{Flags: flags, Context: ctxName, Selected: true}
	def := nats.DefaultURL
	if cfg != nil {
		src.File = natsSettings(cfg.NATS)
		if cfg.NATS.URL == "" {
			host := cfg.Embedded.Host
			if host == "" || host == "0.0.0.0" || host == "::" {
				host = "127.0.0.1"
			}
			if cfg.Embedded.Port > 0 {
				def = "nats://" + host + ":" + strconv.Itoa(cfg.Embedded.Port)
			}
		}
	}
	s, _, err := natsconn.Resolve(src)
	if err != nil {
		return nil, err
	}
	nc, err := natsconn.Connect(s, natsconn.Conn{Name: name, DefaultURL: def})
	if err != nil && s.URL == "" && errors.Is(err, nats.ErrNoServers) {
		return nil, fmt.Errorf("%w\n%s", err, c.noServerHint())
	}
	return nc, err
}

// noServerHint says why nothing answers at the default URL: with a --config
// file whose server is the embedded one, that server lives only inside
// "kpcastream run"; without one, no server was named.
func (c *clientFlags) noServerHint() string {
	standalone := "or run a standalone server (nats-server -js, or docker run -p 4222:4222 nats -js) and point the commands and the workers at it (--nats-url, NATS_URL or nats.url)"
	if c.config != "" {
		return fmt.Sprintf("hint: %s uses the embedded NATS server, which runs only while \"kpcastream run --config %s\" runs (its data stays in data_dir): start it, in another terminal, %s", c.config, c.config, standalone)
	}
	return "hint: no server was named (--nats-url, NATS_URL, a nats context or --config), so the default was tried: start \"kpcastream run --config FILE\" (its embedded server) and give the commands the same --config, " + standalone
}

// connectJS is connect with a JetStream context on the connection; the
// caller closes the connection.
func (c *clientFlags) connectJS(cfg *config.Config, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := c.connect(cfg, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// publishMsg publishes m through the publish port: with JetStream
// (acknowledged, within 5 s) when useJS, a stream capturing its subject
// (pubport.Find), else on core NATS.
func publishMsg(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, useJS bool, m *nats.Msg) error {
	out := pubport.Out{Core: nc, Sync: js, JetStream: useJS, Attempt: 5 * time.Second}
	return out.Publish(ctx, m)
}

// isTerminal reports whether w is a terminal (a progress line may then
// rewrite itself with \r).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
