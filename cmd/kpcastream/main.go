package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
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
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if isHelpFlag(args[0]) {
		usage(stdout) // asked for: on stdout, so that "kpcastream -h | less" shows it
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kpcastream: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	cmdErr := stderr
	var held *helpWriter
	if asksHelp(args[1:]) {
		held = &helpWriter{w: stderr, start: time.Now()}
		cmdErr = held
	}
	err := cmd.run(ctx, args[1:], stdout, cmdErr)
	if held != nil {
		to := stderr
		if errors.Is(err, flag.ErrHelp) {
			to = stdout // the help asked for goes to stdout: "kpcastream publish -h | less"
		}
		held.flush(to)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printExamples(stdout, args[0])
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
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'kpcastream <command> -h' (or 'kpcastream help <command>') for the flags and examples of a command;\n'kpcastream --version' prints the version")
}

// isHelpFlag reports whether arg asks for help as the flag package reads it.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "--h" || arg == "-help" || arg == "--help"
}

// asksHelp reports whether a command's arguments hold a help flag before
// any "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// helpWriter holds what a command given -h writes to stderr until it
// returns, so that runMain can send a usage message to stdout (the help was
// asked for) and anything else to stderr. A command still running after
// helpHold (a "-h" that was a flag's value, say) writes through to w.
type helpWriter struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	buf   []byte
	open  bool // writes go straight to w
}

// helpHold bounds how long helpWriter holds output: parsing flags takes
// microseconds.
const helpHold = time.Second

func (h *helpWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.open && time.Since(h.start) > helpHold {
		h.open = true
		if _, err := h.w.Write(h.buf); err != nil {
			return 0, err
		}
		h.buf = nil
	}
	if h.open {
		return h.w.Write(p)
	}
	h.buf = append(h.buf, p...)
	return len(p), nil
}

// flush writes what is held to to (unless it was written through already),
// and passes later writes to w.
func (h *helpWriter) flush(to io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.buf) > 0 {
		_, _ = to.Write(h.buf)
	}
	h.buf, h.open = nil, true
}
