package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/kpcastream/kpcastream/internal/demo"
)

func init() {
	commands["demo"] = command{
		summary: "embedded NATS, one pipeline and a drifting synthetic stream, with a live status line",
		run:     runDemo,
	}
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o demo.Options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.Duration, "duration", 0, "stop after this long (default: run until interrupted)")
	fs.IntVar(&o.Rate, "rate", 2000, "messages per second published (all keys together)")
	fs.IntVar(&o.Keys, "keys", 2, "number of sensors (partition keys, one learner each)")
	fs.IntVar(&o.Dim, "dim", 8, "dimension of the feature vectors")
	fs.IntVar(&o.Components, "components", 3, "number of components")
	fs.IntVar(&o.Budget, "budget", 128, "dictionary budget B")
	fs.StringVar(&o.Learner, "learner", "ikpca", "learner: ikpca, kha or window")
	fs.Float64Var(&o.Gamma, "gamma", 0.5, "rbf kernel gamma")
	fs.Float64Var(&o.Forget, "forget", 0.999, "forgetting factor per observation (ikpca)")
	fs.DurationVar(&o.DriftEvery, "drift-every", 15*time.Second, "the stream's structure changes abruptly this often")
	fs.IntVar(&o.Port, "port", 4222, "client port of the embedded NATS server (-1: any free port)")
	fs.DurationVar(&o.Every, "every", time.Second, "interval of the status line")
	fs.IntVar(&o.Workers, "workers", 1, "worker processes (members) to run in this process; they join one after the other and share the partitions")
	fs.IntVar(&o.Partitions, "partitions", 0, "partitions of the pipeline (default: 1 with one worker, 4 × workers with more)")
	fs.BoolVar(&o.Classify, "classify", false, "labelled stream (inner and outer ring) and a classifier stage; the status line shows its prequential accuracy")
	fs.StringVar(&o.HTTPAddr, "http", demo.DefaultHTTP, `listen address of the first worker's live page /ui/, its JSON API and /metrics ("off": none; the default falls back to a free port when taken)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { o.HTTPSet = o.HTTPSet || f.Name == "http" })
	if o.Partitions == 0 {
		o.Partitions = 1
		if o.Workers > 1 {
			o.Partitions = 4 * o.Workers
		}
	}
	if o.Rate < 1 || o.Keys < 1 || o.Dim < 4 || o.Every <= 0 || o.DriftEvery <= 0 || o.Workers < 1 || o.Partitions < 1 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "kpcastream demo: want --rate ≥ 1, --keys ≥ 1, --dim ≥ 4, --workers ≥ 1, --partitions ≥ 1, positive --every and --drift-every, no arguments")
		return errUsage
	}
	return demo.Run(ctx, o, serveOn, stdout, stderr)
}
