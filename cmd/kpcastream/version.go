package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kpcastream/kpcastream/internal/buildinfo"
)

func init() {
	commands["version"] = command{summary: "print the version, VCS revision and Go version of this binary", run: runVersion}
}

// runVersion is "kpcastream version": "kpcastream VERSION (revision REV,
// TIME, GOVERSION)", read from the binary's build information (the same
// values as the kpcastream_build_info metric).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: kpcastream version")
		return errUsage
	}
	bi := buildinfo.Read()
	when := ""
	if bi.Time != "" {
		when = ", " + bi.Time
	}
	fmt.Fprintf(stdout, "kpcastream %s (revision %s%s, %s)\n", bi.Version, bi.Revision, when, bi.GoVersion)
	return nil
}
