// Command kpcastream is the online kernel PCA stream processor.
//
//	kpcastream run --config FILE       start the workers (embedded NATS unless a URL is given)
//	kpcastream demo                    embedded NATS, one pipeline and a drifting synthetic stream
//	kpcastream publish ...             publish vectors from a CSV file or stdin
//	kpcastream tail ...                outputs or dead letters as JSON lines, whatever their encoding
//	kpcastream dlq ls|republish ...    stored dead letters: list them, re-publish them after a fix
//	kpcastream snapshot ls|show|rm ... the learners' snapshots of a pipeline
//	kpcastream replay ...              offline replay of a CSV file through a learner, no NATS
//	kpcastream bench ...               end-to-end benchmark
//
// Each subcommand lives in its own file and registers itself in commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: run parses args and does the work, writing
// results to stdout and progress to stderr.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled by each subcommand's init function.
var commands = map[string]command{}

// errUsage marks an error already explained by a usage message (exit code 2).
var errUsage = errors.New("usage")

// errInterrupted marks a command stopped by SIGINT or SIGTERM before it
// finished (exit code 130, as a shell reports a Ctrl-C).
var errInterrupted = errors.New("interrupted")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain dispatches to a subcommand and returns the process exit code.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kpcastream: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "kpcastream %s: %v\n", args[0], err)
		if errors.Is(err, errInterrupted) {
			return 130
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kpcastream <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'kpcastream <command> -h' for the flags of a command")
}
