package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/natsconn"
	"github.com/kpcastream/kpcastream/internal/natsembed"
	pubport "github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

func init() {
	commands["run"] = command{summary: "start the workers (embedded NATS unless a URL is given)", run: runRun}
}

// runRun is "kpcastream run --config FILE [--nats-url URL] [--metrics-addr ADDR]
// [--data-dir DIR] [--log-format json|console]".
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (required)")
	nf := natsconn.Register(fs, "NATS server URLs, comma-separated (env NATS_URL); none starts an embedded server")
	metricsAddr := fs.String("metrics-addr", "", `listen address of /metrics, /healthz, /readyz, or "off" (default 127.0.0.1:9090; :9090 for every interface)`)
	dataDir := fs.String("data-dir", "", "data directory of the embedded server (default kpcastream-data)")
	logFormat := fs.String("log-format", "", "json or console (default: console on a terminal, else json)")
	dryRun := fs.Bool("dry-run", false, "check the configuration (with the environment and flags) as 'kpcastream lint' does, start nothing")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if missingFlags(stderr, fs, "usage: kpcastream run --config FILE [flags]", "config") {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: kpcastream run --config FILE [flags]")
		fs.PrintDefaults()
		return errUsage
	}
	ov := config.Overrides{Env: os.LookupEnv} // ${NATS_URL} in the file is the variable's value
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "metrics-addr":
			ov.MetricsAddr = metricsAddr
		case "data-dir":
			ov.DataDir = dataDir
		case "log-format":
			ov.LogFormat = logFormat
		}
	})
	// The NATS settings are resolved by natsconn (flag > env > context >
	// file), so the file is read without the NATS environment.
	cfg, err := config.Load(*cfgPath, withoutNATSEnv, ov)
	var ctxName string
	if err == nil {
		var flags natsconn.Settings
		flags, ctxName = nf.Given()
		var conn natsconn.Settings
		conn, ctxName, err = natsconn.Resolve(natsconn.Sources{Flags: flags, Context: ctxName, File: natsSettings(cfg.NATS)})
		if err == nil {
			cfg.NATS.URL = conn.URL
			cfg.NATS.Creds, cfg.NATS.NKey, cfg.NATS.User, cfg.NATS.Password, cfg.NATS.Token = conn.Creds, conn.NKey, conn.User, conn.Password, conn.Token
			cfg.NATS.TLS = config.TLS{CA: conn.CA, Cert: conn.Cert, Key: conn.Key}
		}
	}
	if *dryRun {
		return reportConfig(*cfgPath, cfg, err, stdout)
	}
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.Log, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	if ctxName != "" {
		log.Info("nats context", zap.String("context", ctxName))
	}
	return serve(ctx, cfg, log)
}

// withoutNATSEnv is os.LookupEnv without the variables natsconn reads.
func withoutNATSEnv(k string) (string, bool) {
	if strings.HasPrefix(k, "NATS_") || k == "KPCASTREAM_NATS_URL" {
		return "", false
	}
	return os.LookupEnv(k)
}

// natsSettings returns the connection settings of the configuration file.
func natsSettings(c config.NATS) natsconn.Settings {
	return natsconn.Settings{URL: c.URL, Creds: c.Creds, NKey: c.NKey, User: c.User, Password: c.Password, Token: c.Token,
		CA: c.TLS.CA, Cert: c.TLS.Cert, Key: c.TLS.Key}
}

// newLogger builds a zap logger writing to w: JSON when configured or when
// w is not a terminal, console otherwise.
func newLogger(c config.Log, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	format := c.Format
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "console"
			}
		}
	}
	var enc zapcore.Encoder
	if format == "console" {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)
	return zap.New(core, zap.AddCaller()), nil
}

// serve connects (or starts the embedded server), runs the processor and
// the HTTP listener until ctx is cancelled, then shuts everything down.
// A stop (SIGTERM, SIGINT) that comes while it is still starting is a
// stop asked for, not a failure: it returns nil (exit status 0) instead of
// the call the stop cancelled ("snapshot: open object bucket …: context
// canceled"), as a stop after the start does.
func serve(ctx context.Context, cfg *config.Config, log *zap.Logger) error {
	err := serveOn(ctx, cfg, log, nil)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		log.Info("stopped while starting", zap.String("cancelled", err.Error()))
		return nil
	}
	return err
}

// serveOn is serve with the HTTP listener given (nil: listen on
// http.metrics_addr unless it is "off"); it closes ln.
func serveOn(ctx context.Context, cfg *config.Config, log *zap.Logger, ln net.Listener) error {
	if ln != nil {
		defer ln.Close()
	}
	url := cfg.NATS.URL
	var embedded *server.Server
	if url == "" {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		s, u, err := natsembed.StartEmbedded(sctx, natsembed.Options{Host: cfg.Embedded.Host, Port: cfg.Embedded.Port,
			StoreDir: embeddedStoreDir(cfg, log), Logger: log})
		cancel()
		if err != nil {
			if portInUse(err) {
				return fmt.Errorf("%w\nhint: another process holds %s:%d (a kpcastream run, a nats-server): use it (--nats-url nats://%s:%d), stop it, or move the embedded server (KPCASTREAM_EMBEDDED_PORT=%d or embedded.port; the client commands given the same --config follow it)",
					err, cfg.Embedded.Host, cfg.Embedded.Port, cfg.Embedded.Host, cfg.Embedded.Port, cfg.Embedded.Port+1)
			}
			return err
		}
		embedded, url = s, u
		log.Info("embedded nats-server started", zap.String("url", url), zap.String("store_dir", cfg.Embedded.StoreDir),
			zap.String("version", server.VERSION)) // its banner is logged at debug
		defer func() {
			s.Shutdown()
			s.WaitForShutdown()
		}()
	}
	nc, err := connect(url, cfg.NATS, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// Each attempt bounded, so that a request left unanswered while the
	// cluster elects a leader (a worker started with its servers) is sent
	// again rather than failing the start.
	var store *snapshot.Store
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = pubport.Call(octx, 5*time.Second, func(c context.Context) (err error) {
		store, err = snapshot.Open(c, js, cfg.Snapshots)
		return err
	}, func(n int, err error) {
		log.Warn("jetstream call failed; retrying", zap.String("call", "open the snapshot store"), zap.Int("attempt", n), zap.Error(err))
	})
	cancel()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p, err := processor.New(cfg.ProcessorConfig(), processor.Deps{Conn: nc, JS: js, Snapshots: store, Logger: log, Registry: reg})
	if err != nil {
		return err
	}
	switch {
	case cfg.ProcessMemory > 0: // issue 30: RSS within process_memory
		m := cfg.ProcessMemoryPlan()
		limit, stopGovern, err := processor.GovernProcessMemory(ctx, m, reg)
		defer stopGovern()
		if err != nil {
			log.Warn("process_memory", zap.Error(err))
		}
		_, env := os.LookupEnv("GOMEMLIMIT")
		log.Info("process_memory: Go's soft memory limit kept at the target less the file pages resident", zap.Int64("target", m.Target),
			zap.Int64("limit", limit), zap.Int64("floor", m.Floor), zap.Int64("memory_budget", m.Budgets), zap.Int64("memory_budget_ceiling", m.Ceiling),
			zap.Bool("gomemlimit_env", env))
		if env {
			log.Warn("GOMEMLIMIT is set: it is Go's soft memory limit, not process_memory's; process_memory only reports (kpcastream_process_memory_*)")
		}
		if embedded != nil {
			log.Warn("process_memory with the embedded server: the server's memory counts in the process, and no budget sizes it; RSS may pass the target (use an external server, nats.url)")
		}
	case embedded == nil: // issue 30: the heap near memory_budget, not twice it (an embedded server's is not sized)
		if n := processor.ApplyMemoryLimit(cfg.ProcessorConfig()); n > 0 {
			log.Info("GOMEMLIMIT unset: Go's soft memory limit set from memory_budget", zap.Int64("bytes", n))
		}
	}
	var srv *http.Server
	if ln == nil && cfg.HTTP.MetricsAddr != "off" {
		if ln, err = net.Listen("tcp", cfg.HTTP.MetricsAddr); err != nil {
			if portInUse(err) {
				return fmt.Errorf("metrics listener: %w\nhint: another process holds %s (a kpcastream run?): move the listener with --metrics-addr 127.0.0.1:0 (a free port; the log names it), KPCASTREAM_METRICS_ADDR or http.metrics_addr, or turn it off with --metrics-addr off", err, cfg.HTTP.MetricsAddr)
			}
			return fmt.Errorf("metrics listener: %w", err)
		}
	}
	if ln != nil {
		srv = &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http", zap.Error(err))
			}
		}()
		log.Info("http listening", zap.String("addr", ln.Addr().String()))
		log.Info("live page", zap.String("url", livePageURL(ln.Addr())))
	}
	runErr := p.Run(ctx)
	timeout := cfg.Processor.WithDefaults().ShutdownTimeout
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	if err := drain(nc, timeout); err != nil {
		log.Warn("drain connection", zap.Error(err))
	}
	_ = embedded
	log.Info("stopped", zap.Error(runErr))
	return runErr
}

// portInUse reports whether err is a listener's "address already in use"
// (the embedded server reports it as text).
func portInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// livePageURL is the address of the live page served on addr, as a
// browser on this machine opens it (an unspecified address is loopback).
func livePageURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/ui/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/ui/"
}

// connect dials url with the configured authentication and TLS options,
// reconnecting forever; errors and log lines name the server redacted.
func connect(url string, c config.NATS, log *zap.Logger) (*nats.Conn, error) {
	s := natsSettings(c)
	s.URL = url
	return natsconn.Connect(s, natsconn.Conn{Name: c.Name, Forever: true, ReconnectWait: c.ReconnectWait, Logger: log})
}

// drain drains nc and waits for it to close, at most timeout.
func drain(nc *nats.Conn, timeout time.Duration) error {
	if nc.IsClosed() {
		return nil
	}
	if err := nc.Drain(); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for !nc.IsClosed() {
		if time.Now().After(deadline) {
			nc.Close()
			return errors.New("drain timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
