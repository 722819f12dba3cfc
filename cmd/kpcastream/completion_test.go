package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// completionScript writes "kpcastream completion SHELL" to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, out, errOut := runCmd(t, "completion", shell)
	if code != 0 || out == "" {
		t.Fatalf("completion %s: %d %q", shell, code, errOut)
	}
	f := filepath.Join(t.TempDir(), "kpcastream."+shell)
	if err := os.WriteFile(f, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// needShell returns the path of a shell, or skips naming it.
func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed: CI must run its completion script (.ci/run installs it)", name)
		}
		t.Skipf("%s is not installed: its completion script cannot be run here (apt-get install %s)", name, name)
	}
	return p
}

// TestCompletionBash completes commands, subcommands and flags with the
// generated bash script, as bash calls it on <Tab>.
func TestCompletionBash(t *testing.T) {
	bash := needShell(t, "bash")
	script := completionScript(t, "bash")
	for line, want := range map[string]string{
		"kpcastream pub":              "publish",
		"kpcastream publish --su":     "--subject",
		"kpcastream dlq ":             "ls republish",
		"kpcastream snapshot ls --ke": "--key",
		"kpcastream help pu":          "publish",
		"kpcastream --ver":            "--version",
		"kpcastream completion z":     "zsh",
		"kpcastream replay --stand":   "--standardize",
		// A value, not flag names (issue 33 row 4).
		"kpcastream publish --encoding ":  "json msgpack",
		"kpcastream replay --learner ":    "ikpca kha window batch",
		"kpcastream replay --kernel l":    "linear laplacian",
		"kpcastream dlq ls --reason too":  "too_large",
		"kpcastream publish --subject ":   "",
		"kpcastream dlq republish --dry":  "--dry-run",
		"kpcastream dlq ls --dry":         "",
		"kpcastream dlq ls --js":          "--json",
		"kpcastream dlq republish --json": "",
		"kpcastream key ":                 "show accept reset",
		"kpcastream key show --model-":    "--model-out",
		"kpcastream key accept --js":      "",
	} {
		prog := `source "$1"; read -ra COMP_WORDS <<< "$2"; [[ "$2" == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _kpcastream; echo "${COMPREPLY[*]}"`
		out, err := exec.Command(bash, "-c", prog, "bash", script, line).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%q: completed %q (%v), want %q", line, out, err, want)
		}
	}
}

// TestCompletionFish asks fish itself (complete -C) what it completes.
func TestCompletionFish(t *testing.T) {
	fish := needShell(t, "fish")
	script := completionScript(t, "fish")
	for line, want := range map[string]string{
		"kpcastream publish --su":        "--subject\tsubject to publish to (required)",
		"kpcastream dlq ":                "ls\nrepublish",
		"kpcastream snapshot ls --k":     "--key\tthe partition key",
		"kpcastream pu":                  "publish\tpublish vectors from a CSV file or stdin",
		"kpcastream publish --encoding ": "json\nmsgpack",
		"kpcastream run --log-format ":   "console\njson",
	} {
		out, err := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C$argv[2]`, script, line).CombinedOutput()
		if !strings.Contains(want, "\t") { // the candidates only, not their descriptions
			out = regexp.MustCompile(`(?m)\t.*$`).ReplaceAll(out, nil)
		}
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%q: completed %q (%v), want %q", line, out, err, want)
		}
	}
}

// TestCompletionZsh: the zsh script parses and, sourced after compinit,
// defines and registers its completion function.
func TestCompletionZsh(t *testing.T) {
	zsh := needShell(t, "zsh")
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	out, err := exec.Command(zsh, "-f", "-c", `autoload -U compinit; compinit -u -D; source $1; print -r -- $_comps[kpcastream]`, "zsh", script).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_kpcastream" {
		t.Errorf("sourced after compinit: %q %v, want kpcastream completed by _kpcastream", out, err)
	}
	b, _ := os.ReadFile(script)
	for _, want := range []string{`'--subject[subject to publish to (required)]:subject: '`, `'--config[`, `compadd -- ls show rm`, `:encoding:(json msgpack)'`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("zsh script lacks %s", want)
		}
	}
}

// TestUsageHelp: --version, "help CMD" and "CMD -h" with examples, and a
// missing flag named (issue 23, item 6).
func TestUsageHelp(t *testing.T) {
	code, out, _ := runCmd(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "kpcastream ") || !strings.Contains(out, "(revision ") {
		t.Errorf("--version: %d %q", code, out)
	}
	for _, name := range commandNames() {
		if _, ok := examples[name]; !ok {
			t.Errorf("command %s has no examples", name)
		}
	}
	// The help asked for is on stdout, stderr empty ("kpcastream help
	// publish | less", issue 33 row 3).
	for _, args := range [][]string{{"help", "publish"}, {"publish", "-h"}, {"publish", "--help"}, {"publish", "--subject", "x", "-h"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "-subject") || !strings.Contains(out, "examples:\n  kpcastream publish --config") {
			t.Errorf("%v: %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "usage: kpcastream <command>") {
			t.Errorf("%v: %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	// A command of subcommands says where their flags are.
	for _, c := range []string{"key", "dlq", "snapshot"} {
		code, out, errOut := runCmd(t, "help", c)
		if code != 0 || errOut != "" || !strings.Contains(out, "run 'kpcastream "+c+" ") || !strings.Contains(out, "for every flag") {
			t.Errorf("help %s: %d stdout %q stderr %q", c, code, out, errOut)
		}
	}
	code, out, errOut := runCmd(t, "snapshot", "ls", "-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "examples:\n  kpcastream snapshot ls") {
		t.Errorf("snapshot ls -h: %d %q", code, out)
	}
	// A mistake next to -h is still an error on stderr.
	code, out, errOut = runCmd(t, "publish", "--no-such-flag", "-h")
	if code != 2 || out != "" || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("publish --no-such-flag -h: %d stdout %q stderr %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "publish", "--subject", "x")
	if code != 2 || out != "" || !strings.HasPrefix(errOut, `kpcastream publish: missing --in: CSV file, or "-" for stdin`) {
		t.Errorf("publish without --in: %d %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "publish")
	if code != 2 || !strings.Contains(errOut, "missing --subject") || !strings.Contains(errOut, "missing --in") {
		t.Errorf("publish without flags: %d %q", code, errOut)
	}
	var b bytes.Buffer
	if c := runMain(context.Background(), []string{"completion", "tcsh"}, &b, &b); c != 2 || !strings.Contains(b.String(), `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: %d %q", c, b.String())
	}
}

// TestExamplesUseRealFlags: every flag in the -h examples is one the
// command accepts.
func TestExamplesUseRealFlags(t *testing.T) {
	for name, ex := range examples {
		for _, line := range strings.Split(strings.ReplaceAll(ex, "\\\n", " "), "\n") {
			line, _, _ = strings.Cut(line, "#")
			f := strings.Fields(line)
			if i := slices.Index(f, "kpcastream"); i >= 0 {
				f = f[i:]
			}
			if len(f) < 2 || f[0] != "kpcastream" {
				continue
			}
			cmd, sub := f[1], ""
			if len(f) > 2 && len(subcommands[cmd]) > 0 && !strings.HasPrefix(f[2], "-") {
				sub = f[2]
			}
			known := map[string]bool{"--version": true}
			for _, fi := range commandFlags(cmd, sub) {
				known["--"+fi.name] = true
			}
			for _, w := range f[2:] {
				if strings.HasPrefix(w, "--") && !known[w] {
					t.Errorf("examples of %s: %q uses %s, which %s %s does not accept", name, strings.TrimSpace(line), w, cmd, sub)
				}
			}
		}
	}
}

// TestFlagChoicesInHelp: every value the shells complete for a flag is
// one its help names, and every entry of flagChoices is a flag of a
// command taking a value.
func TestFlagChoicesInHelp(t *testing.T) {
	used := map[string]bool{}
	for _, c := range completionSpec() {
		for sub, flags := range c.flags {
			for _, f := range flags {
				if len(f.choices) == 0 {
					continue
				}
				if _, ok := flagChoices[c.name+" "+f.name]; ok {
					used[c.name+" "+f.name] = true
				} else {
					used[f.name] = true
				}
				for _, v := range f.choices {
					if !strings.Contains(f.usage, v) {
						t.Errorf("%s %s --%s completes %q, which its help does not name: %q", c.name, sub, f.name, v, f.usage)
					}
				}
			}
		}
	}
	for k := range flagChoices {
		if !used[k] {
			t.Errorf("flagChoices[%q] completes no flag", k)
		}
	}
}
