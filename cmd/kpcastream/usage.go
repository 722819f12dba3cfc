package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// examples are printed after a command's flags by "kpcastream CMD -h" and
// "kpcastream help CMD": what a user types, each with what it does.
var examples = map[string]string{
	"run": `  kpcastream run --config examples/kpcastream.yaml                   # embedded NATS on 127.0.0.1:4222
  kpcastream run --config kpcastream.yaml --nats-url nats://nats:4222  # an existing server or cluster
  kpcastream run --config kpcastream.yaml --dry-run                    # check the file and the flags, start nothing`,
	"lint": `  kpcastream lint --config kpcastream.yaml         # every problem at once, each with its YAML path
  MY_NATS=nats://h:4222 kpcastream lint --config kpcastream.yaml   # with the ${MY_NATS} it references
  kpcastream lint --schema > kpcastream.schema.json   # the JSON Schema, for an editor's YAML language server`,
	"demo": `  kpcastream demo                                  # embedded NATS, a drifting stream, the live page
  kpcastream demo --keys 4 --workers 2 --partitions 4 --duration 1m
  kpcastream demo --classify                       # with a classifier stage`,
	"publish": `  kpcastream publish --config examples/kpcastream.yaml --subject sensors.s1.features \
    --in testdata/data/iris.csv --drop label --rate 500
  kpcastream publish --nats-url nats://h:4222 --subject sensors.s2.features --dim 4 --in - < rows.csv
  kpcastream publish --config kpcastream.yaml --subject sensors.s1.features --in rows.csv --batch 64 --id-column id`,
	"tail": `  kpcastream tail --config examples/kpcastream.yaml --key s1           # live outputs of key s1
  kpcastream tail --config examples/kpcastream.yaml --all --count 10   # from the start of the output stream
  kpcastream tail 'kpca.out.>' --meta                                  # any subject, with subject and headers
  kpcastream tail --config examples/kpcastream.yaml --dlq              # dead letters with their reasons`,
	"dlq": `  kpcastream dlq ls --config kpcastream.yaml --reason dimension --since 1h
  kpcastream dlq republish --config kpcastream.yaml --reason too_large --dry-run
  kpcastream dlq republish --config kpcastream.yaml --seq 5,7-9 --delete`,
	"key": `  kpcastream key show --config kpcastream.yaml --key s1               # learner, dictionary, eigenvalues, limits
  kpcastream key show --config kpcastream.yaml --key s1 --model-out m.json   # and its model export, for project
  kpcastream key accept --config kpcastream.yaml --key s1             # accept the current regime (monitor:)
  kpcastream key reset --nats-url nats://h:4222 --pipeline sensors --key s1    # a fresh learner`,
	"snapshot": `  kpcastream snapshot ls --config kpcastream.yaml                  # every key: seq, learner, basis version
  kpcastream snapshot show --config kpcastream.yaml --key s1
  kpcastream snapshot rm --config kpcastream.yaml --key s1         # the key starts afresh`,
	"replay": `  kpcastream replay --in testdata/data/drift_stream.csv --kernel rbf --gamma 0.5 --components 5 \
    --budget 200 --out proj.csv --model-out model.json
  kpcastream replay --in testdata/data/satellite.csv --label label --standardize --kernel rbf \
    --components 8 --model-out model.json   # prequential accuracy of a classifier stage`,
	"project": `  kpcastream project --model model.json --in data.csv --drop label --out z.csv`,
	"predict": `  kpcastream predict --model model.json --in data.csv --drop label --out pred.csv   # class and scores per row`,
	"bench": `  kpcastream bench --count 100000                  # embedded server, every phase
  kpcastream bench --output core --rtt 0 --count 100000`,
	"version": `  kpcastream version
  kpcastream --version`,
	"completion": `  source <(kpcastream completion bash)              # bash, this shell
  kpcastream completion bash > /etc/bash_completion.d/kpcastream
  kpcastream completion zsh > "${fpath[1]}/_kpcastream"   # zsh (compinit), or: source <(kpcastream completion zsh)
  kpcastream completion fish > ~/.config/fish/completions/kpcastream.fish`,
	"help": `  kpcastream help publish`,
}

// printExamples writes the examples of command name, if it has any.
func printExamples(w io.Writer, name string) {
	if ex, ok := examples[name]; ok {
		fmt.Fprintf(w, "\nexamples:\n%s\n", ex)
	}
}

// subcommand is the operation given in args[0] to a command of several
// (key show|accept|reset). Without one of ops it prints usage and returns
// errUsage; asked for help instead, it also says where each operation's
// flags are and returns flag.ErrHelp.
func subcommand(args []string, stderr io.Writer, usage func(), name string, ops ...string) (string, error) {
	if len(args) > 0 && slices.Contains(ops, args[0]) {
		return args[0], nil
	}
	usage()
	if len(args) > 0 && isHelpFlag(args[0]) {
		fmt.Fprintf(stderr, "\nrun 'kpcastream %s %s -h' (%s) for every flag\n", name, ops[0], strings.Join(ops[1:], ", "))
		return "", flag.ErrHelp
	}
	return "", errUsage
}

// missingFlags reports the required flags of fs that were not given (an
// empty value), one line each with the flag's help, followed by usage; it
// returns whether any was missing. It is the message of "publish --subject
// x" without --in.
func missingFlags(stderr io.Writer, fs *flag.FlagSet, usage string, required ...string) bool {
	var miss []*flag.Flag
	for _, name := range required {
		if f := fs.Lookup(name); f != nil && f.Value.String() == "" {
			miss = append(miss, f)
		}
	}
	if len(miss) == 0 {
		return false
	}
	for _, f := range miss {
		fmt.Fprintf(stderr, "kpcastream %s: missing --%s: %s\n", fs.Name(), f.Name, f.Usage)
	}
	fmt.Fprintf(stderr, "%s\nrun 'kpcastream %s -h' for every flag and examples\n", usage, strings.Fields(fs.Name())[0])
	return true
}

func init() {
	commands["help"] = command{summary: "the flags and examples of a command (help CMD)", run: runHelp}
}

// runHelp is "kpcastream help [CMD [SUB]]": the command's -h.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok || args[0] == "help" {
		fmt.Fprintf(stderr, "kpcastream help: unknown command %q\n\n", args[0])
		usage(stderr)
		return errUsage
	}
	// flag.ErrHelp: the usage is printed, on stdout as it was asked for
	// ("kpcastream help publish | less").
	_ = cmd.run(ctx, append(args[1:len(args):len(args)], "-h"), stdout, stdout)
	printExamples(stdout, args[0])
	return nil
}

// subcommands are the first arguments of the commands that take one.
var subcommands = map[string][]string{
	"dlq":        {"ls", "republish"},
	"key":        {"show", "accept", "reset"},
	"snapshot":   {"ls", "show", "rm"},
	"completion": {"bash", "zsh", "fish"},
}

// flagInfo is one flag of a command as its -h lists it.
type flagInfo struct {
	name    string
	value   bool     // takes a value (not a boolean)
	usage   string   // first line of its help
	choices []string // the values it accepts, when they are a few words (flagChoices)
}

// flagChoices are the values of the flags that take one of a few words,
// by "command flag" (or "flag" for every command): the shells complete
// them. Each is named in the flag's help (TestFlagChoicesInHelp).
var flagChoices = map[string][]string{
	"encoding":     {"json", "msgpack"},
	"learner":      {"ikpca", "kha", "window", "batch"},
	"demo learner": {"ikpca", "kha", "window"},
	"kernel":       {"rbf", "poly", "linear", "sigmoid", "laplacian"},
	"admission":    {"ald", "coherence"},
	"eviction":     {"centroid", "lli", "fifo", "contribution"},
	"rule":         {"gha", "oja", "apex"},
	"solver":       {"auto", "dense", "lanczos", "fast"},
	"classify-on":  {"coords", "z"},
	"learn":        {"always", "normal"},
	"trend":        {"ewma", "off"},
	"log-format":   {"json", "console"},
	"bench output": {"jetstream", "core"},
	"bench mode":   {"all", "both", "raw", "bare", "pipeline"},
	"storage":      {"file", "memory"},
	"reason":       {"malformed", "dimension", "too_large", "non_finite", "numerical", "label", "version", "panic"},
}

// choicesOf returns the values of flag of command cmd (nil when any).
func choicesOf(cmd, flag string) []string {
	if c, ok := flagChoices[cmd+" "+flag]; ok {
		return c
	}
	return flagChoices[flag]
}

// commandFlags returns the flags of command name (and sub) by running it
// with -h: each command declares its flags where it parses them, and -h
// lists them all without doing anything else.
func commandFlags(name, sub string) []flagInfo {
	cmd, ok := commands[name]
	if !ok {
		return nil
	}
	args := []string{"-h"}
	if sub != "" {
		args = []string{sub, "-h"}
	}
	var buf bytes.Buffer
	_ = cmd.run(context.Background(), args, io.Discard, &buf)
	var out []flagInfo
	lines := strings.Split(buf.String(), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "  -") {
			continue
		}
		fields := strings.Fields(l)
		fi := flagInfo{name: strings.TrimLeft(fields[0], "-"), value: len(fields) > 1}
		if strings.Contains(l, "\t") { // a short help on the same line
			_, fi.usage, _ = strings.Cut(l, "\t")
		} else if i+1 < len(lines) {
			fi.usage = strings.TrimSpace(lines[i+1])
		}
		fi.usage = strings.TrimSpace(fi.usage)
		if fi.value {
			fi.choices = choicesOf(name, fi.name)
		}
		out = append(out, fi)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out
}

// fileFlags take a path: the shells complete file names for them.
var fileFlags = map[string]bool{
	"config": true, "in": true, "out": true, "model": true, "model-out": true, "creds": true, "nkey": true,
	"tlsca": true, "tlscert": true, "tlskey": true, "report": true, "plot": true, "data-dir": true,
	"cpuprofile": true, "memprofile": true, "context": true,
}

// commandNames returns the commands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
