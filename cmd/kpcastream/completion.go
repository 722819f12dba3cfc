package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

func init() {
	commands["completion"] = command{summary: "print a shell completion script (completion bash|zsh|fish)", run: runCompletion}
}

// runCompletion is "kpcastream completion bash|zsh|fish": a script that
// completes the commands, their subcommands and flags (with their help in
// zsh and fish), and file names after the flags that take a path. The
// script is generated from the commands' own flag sets, so it lists what
// this binary accepts.
func runCompletion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kpcastream completion bash|zsh|fish")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	spec := completionSpec()
	switch fs.Arg(0) {
	case "bash":
		writeBash(stdout, spec)
	case "zsh":
		writeZsh(stdout, spec)
	case "fish":
		writeFish(stdout, spec)
	default:
		fmt.Fprintf(stderr, "kpcastream completion: unknown shell %q (bash, zsh or fish)\n", fs.Arg(0))
		return errUsage
	}
	return nil
}

// compCommand is one command as the scripts complete it.
type compCommand struct {
	name, summary string
	subs          []string
	flags         map[string][]flagInfo // by subcommand ("" when none)
}

// completionSpec lists every command with its subcommands and flags.
func completionSpec() []compCommand {
	var spec []compCommand
	for _, n := range commandNames() {
		c := compCommand{name: n, summary: commands[n].summary, subs: subcommands[n], flags: map[string][]flagInfo{}}
		switch {
		case n == "completion" || n == "help":
			// Positional arguments only.
		case len(c.subs) > 0:
			for _, s := range c.subs {
				c.flags[s] = commandFlags(n, s)
			}
		default:
			c.flags[""] = commandFlags(n, "")
		}
		spec = append(spec, c)
	}
	return spec
}

// flagWords is "--a --b" for flags.
func flagWords(flags []flagInfo) string {
	w := make([]string, len(flags))
	for i, f := range flags {
		w[i] = "--" + f.name
	}
	return strings.Join(w, " ")
}

// fileFlagList is "--config|--in|…" for a bash or zsh case pattern.
func fileFlagList() string {
	var names []string
	for n := range fileFlags {
		names = append(names, "--"+n, "-"+n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

func writeBash(w io.Writer, spec []compCommand) {
	var names []string
	for _, c := range spec {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# bash completion for kpcastream: source <(kpcastream completion bash)
_kpcastream() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="${COMP_WORDS[1]}" sub="${COMP_WORDS[2]}" words=""
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "%s --version --help" -- "$cur"))
    return
  fi
  case "$prev" in
    %s)
      COMPREPLY=($(compgen -f -- "$cur"))
      return ;;
  esac
  # A flag that takes a value: its choices, else nothing (no flag names).
  case "$cmd:$prev" in
`, strings.Join(names, " "), fileFlagList())
	for _, c := range spec {
		for _, f := range valueFlags(c) {
			pat := c.name + ":--" + f.name + "|" + c.name + ":-" + f.name
			if len(f.choices) > 0 {
				fmt.Fprintf(w, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", pat, strings.Join(f.choices, " "))
			} else {
				fmt.Fprintf(w, "    %s) COMPREPLY=(); return ;;\n", pat)
			}
		}
	}
	fmt.Fprintf(w, `  esac
  case "$cmd" in
`)
	for _, c := range spec {
		switch {
		case len(c.subs) > 0:
			fmt.Fprintf(w, "    %s)\n      if [[ $COMP_CWORD -eq 2 ]]; then words=%q; else\n        case \"$sub\" in\n", c.name, strings.Join(c.subs, " "))
			for _, s := range c.subs {
				fmt.Fprintf(w, "          %s) words=%q ;;\n", s, flagWords(c.flags[s]))
			}
			fmt.Fprintf(w, "        esac\n      fi ;;\n")
		case c.name == "help":
			fmt.Fprintf(w, "    help) [[ $COMP_CWORD -eq 2 ]] && words=%q ;;\n", strings.Join(names, " "))
		default:
			fmt.Fprintf(w, "    %s) words=%q ;;\n", c.name, flagWords(c.flags[""]))
		}
	}
	fmt.Fprintf(w, `  esac
  if [[ "$cur" == -* || -z "$cur" || $COMP_CWORD -eq 2 && -n "$words" && "$words" != --* ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}
complete -o default -F _kpcastream kpcastream
`)
}

// valueFlags returns the flags of c that take a value other than a path,
// of every subcommand, each once.
func valueFlags(c compCommand) []flagInfo {
	seen := map[string]bool{}
	var out []flagInfo
	for _, sub := range append([]string{""}, c.subs...) {
		for _, f := range c.flags[sub] {
			if f.value && !fileFlags[f.name] && !seen[f.name] {
				seen[f.name] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// shQuote quotes s as one single-quoted word of bash, zsh or fish.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// zshSpec is an _arguments spec for one flag: '--name[help]:value:_files'.
func zshSpec(f flagInfo) string {
	help := strings.NewReplacer("[", "(", "]", ")", ":", " -", "'", "").Replace(shorten(f.usage, 70))
	s := "--" + f.name + "[" + help + "]"
	if f.value {
		if fileFlags[f.name] {
			s += ":" + f.name + ":_files"
		} else if len(f.choices) > 0 {
			s += ":" + f.name + ":(" + strings.Join(f.choices, " ") + ")"
		} else {
			s += ":" + f.name + ": "
		}
	}
	return shQuote(s)
}

func writeZsh(w io.Writer, spec []compCommand) {
	fmt.Fprintln(w, `#compdef kpcastream
# zsh completion for kpcastream: put it on $fpath as _kpcastream, or
# source <(kpcastream completion zsh) after compinit.
_kpcastream() {
  local -a cmds
  cmds=(`)
	for _, c := range spec {
		fmt.Fprintf(w, "    %s\n", shQuote(c.name+":"+strings.ReplaceAll(c.summary, ":", " -")))
	}
	fmt.Fprintln(w, `  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'kpcastream command' cmds
    compadd -- --version --help
    return
  fi
  local cmd=${words[2]} sub=${words[3]}
  case $cmd in`)
	for _, c := range spec {
		switch {
		case len(c.subs) > 0:
			fmt.Fprintf(w, "    %s)\n      if (( CURRENT == 3 )); then compadd -- %s; return; fi\n      case $sub in\n", c.name, strings.Join(c.subs, " "))
			for _, s := range c.subs {
				fmt.Fprintf(w, "        %s) shift 2 words; (( CURRENT -= 2 )); _arguments -s", s)
				for _, f := range c.flags[s] {
					fmt.Fprintf(w, " \\\n          %s", zshSpec(f))
				}
				fmt.Fprintln(w, " ;;")
			}
			fmt.Fprintln(w, "      esac ;;")
		case c.name == "help":
			fmt.Fprintln(w, "    help) (( CURRENT == 3 )) && _describe -t commands 'kpcastream command' cmds ;;")
		default:
			fmt.Fprintf(w, "    %s) shift words; (( CURRENT-- )); _arguments -s '*:file:_files'", c.name)
			for _, f := range c.flags[""] {
				fmt.Fprintf(w, " \\\n        %s", zshSpec(f))
			}
			fmt.Fprintln(w, " ;;")
		}
	}
	fmt.Fprintln(w, `  esac
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _kpcastream "$@"
else
  compdef _kpcastream kpcastream
fi`)
}

func writeFish(w io.Writer, spec []compCommand) {
	fmt.Fprintln(w, `# fish completion for kpcastream: kpcastream completion fish > ~/.config/fish/completions/kpcastream.fish
complete -c kpcastream -f`)
	var names []string
	for _, c := range spec {
		names = append(names, c.name)
	}
	fmt.Fprintln(w, "complete -c kpcastream -n __fish_use_subcommand -l version -d 'print the version'")
	for _, c := range spec {
		fmt.Fprintf(w, "complete -c kpcastream -n __fish_use_subcommand -a %s -d %s\n", c.name, shQuote(shorten(c.summary, 80)))
	}
	for _, c := range spec {
		cond := "__fish_seen_subcommand_from " + c.name
		switch {
		case len(c.subs) > 0:
			fmt.Fprintf(w, "complete -c kpcastream -n %s -a %s\n",
				shQuote(cond+"; and not __fish_seen_subcommand_from "+strings.Join(c.subs, " ")), shQuote(strings.Join(c.subs, " ")))
			for _, s := range c.subs {
				for _, f := range c.flags[s] {
					fmt.Fprintf(w, "complete -c kpcastream -n %s %s\n", shQuote(cond+"; and __fish_seen_subcommand_from "+s), fishFlag(f))
				}
			}
		case c.name == "help":
			fmt.Fprintf(w, "complete -c kpcastream -n %s -a %s\n", shQuote(cond), shQuote(strings.Join(names, " ")))
		default:
			for _, f := range c.flags[""] {
				fmt.Fprintf(w, "complete -c kpcastream -n %s %s\n", shQuote(cond), fishFlag(f))
			}
		}
	}
}

// fishFlag is the options of a fish complete line for one flag.
func fishFlag(f flagInfo) string {
	s := "-l " + f.name
	switch {
	case f.value && fileFlags[f.name]:
		s += " -r -F"
	case f.value && len(f.choices) > 0:
		s += " -x -a " + shQuote(strings.Join(f.choices, " "))
	case f.value:
		s += " -x"
	}
	if f.usage != "" {
		s += " -d " + shQuote(shorten(f.usage, 80))
	}
	return s
}
