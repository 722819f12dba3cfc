package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/natsconn"
)

func init() {
	commands["lint"] = command{summary: "check a configuration file: every problem at once, nothing started", run: runLint}
}

// errProblems is returned when a configuration has problems; they are
// already printed, one per line.
type errProblems struct {
	file string
	n    int
}

func (e errProblems) Error() string {
	if e.n == 1 {
		return fmt.Sprintf("%s: 1 problem", e.file)
	}
	return fmt.Sprintf("%s: %d problems", e.file, e.n)
}

// runLint is "kpcastream lint --config FILE": it reads the file as run
// would (with the environment), prints every problem on stdout, one line
// each naming the field by its YAML path, and exits 1; or prints a one-line
// summary and exits 0.
func runLint(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (required)")
	schema := fs.Bool("schema", false, "print the configuration's JSON Schema (for editors: README, Checking a file) and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if *schema {
		b, err := config.Schema()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	if missingFlags(stderr, fs, "usage: kpcastream lint --config FILE", "config") {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: kpcastream lint --config FILE")
		fs.PrintDefaults()
		return errUsage
	}
	cfg, err := config.Load(*cfgPath, nil, config.Overrides{})
	return reportConfig(*cfgPath, cfg, err, stdout)
}

// reportConfig prints the outcome of loading the configuration file: each
// problem on its own line (and an errProblems), or a one-line summary.
func reportConfig(file string, cfg *config.Config, err error, w io.Writer) error {
	if err != nil {
		problems := config.Problems(err)
		for _, p := range problems {
			fmt.Fprintf(w, "%s: %s\n", file, oneLine(p.Error()))
		}
		return errProblems{file: file, n: len(problems)}
	}
	fmt.Fprintf(w, "%s: ok: %s\n", file, summarize(cfg))
	return nil
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// summarize describes a valid configuration in one line.
func summarize(cfg *config.Config) string {
	var b strings.Builder
	n := len(cfg.Pipelines)
	fmt.Fprintf(&b, "%d pipeline", n)
	if n != 1 {
		b.WriteString("s")
	}
	pcfg := cfg.ProcessorConfig()
	for i, p := range pcfg.Pipelines {
		p = p.WithDefaults()
		l := p.Learner.WithDefaults()
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		in := "core NATS"
		if p.Input.Stream != "" {
			in = "stream " + p.Input.Stream
		}
		fmt.Fprintf(&b, "%s%s: %s d=%d k=%d B=%d on %s (%s, %d partition", sep, p.Name, l.Learner, l.Dim, l.Components, l.Budget,
			p.Input.Subject, in, p.Partitions)
		if p.Partitions != 1 {
			b.WriteString("s")
		}
		if src, dst := p.ShardMapping(); src != "" {
			streams := p.InputStreams()
			fmt.Fprintf(&b, " over %d shard streams %s…%s, which need the server subject mapping %q: %q", len(streams), streams[0], streams[len(streams)-1], src, dst)
		}
		b.WriteString(")")
		// What memory_budget holds (issue 30): the size of a key and how
		// many stay loaded.
		if plan, err := pcfg.MemoryPlan(p); err == nil {
			b.WriteString("; " + plan.String())
		}
	}
	if n > 0 {
		b.WriteString(")")
	}
	nats := "embedded NATS on " + fmt.Sprintf("%s:%d", cfg.Embedded.Host, cfg.Embedded.Port)
	if cfg.NATS.URL != "" {
		nats = "NATS " + natsconn.Redact(cfg.NATS.URL)
	}
	fmt.Fprintf(&b, "; %s; metrics %s", nats, cfg.HTTP.MetricsAddr)
	// An RSS target (issue 30): how it divides.
	if cfg.ProcessMemory > 0 {
		b.WriteString("; " + cfg.ProcessMemoryPlan().String())
		if cfg.NATS.URL == "" {
			b.WriteString(" (the embedded server's memory counts in the process too, and no budget sizes it: use an external server)")
		}
	}
	return b.String()
}
