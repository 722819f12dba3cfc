package main

import (
	"context"
	"errors"
	"io"

	"github.com/kpcastream/kpcastream/bench/e2e"
)

// "kpcastream bench" is a thin entry point: the harness is bench/e2e.
func init() {
	commands["bench"] = command{summary: e2e.Summary, run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		err := e2e.Run(ctx, args, stdout, stderr)
		if errors.Is(err, e2e.ErrUsage) {
			return errUsage
		}
		return err
	}}
}
