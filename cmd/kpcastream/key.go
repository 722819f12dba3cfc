package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/kpcastream/kpcastream/processor"
)

func init() {
	commands["key"] = command{summary: "show a key's model, accept its regime or reset it, through the workers (key show|accept|reset)", run: runKey}
}

// keyOps are the operations of "kpcastream key", each the micro service
// request it sends and what it says when it is done.
var keyOps = map[string]struct {
	endpoint, done string
}{
	"show":   {"model", ""},
	"accept": {"accept", "key %q of pipeline %s: its current regime is accepted; its control limits start a new warm-up in which every observation is learned\n"},
	"reset":  {"reset", "key %q of pipeline %s reset by its owner: a fresh learner (and fresh limits) from its next message; its snapshot was replaced\n"},
}

// runKey is "kpcastream key show|accept|reset [flags] [[PIPELINE] KEY]":
// the service's model, accept and reset requests, answered by the owner of
// the key's partition wherever it runs.
func runKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, `usage: kpcastream key show   [--config FILE] [--pipeline P] --key K [--json | --model-out FILE]
       kpcastream key accept [--config FILE] [--pipeline P] --key K
       kpcastream key reset  [--config FILE] [--pipeline P] --key K
       (or the pipeline and the key as arguments: kpcastream key accept sensors s1)`)
	}
	op, err := subcommand(args, stderr, usage, "key", "show", "accept", "reset")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("key "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerClient(fs)
	key := fs.String("key", "", "the partition key (or the last argument)")
	service := fs.String("service", "", "the workers' micro service name (default: --config's service_name, else kpcastream)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of the request")
	asJSON, modelOut := new(bool), new(string)
	if op == "show" {
		fs.BoolVar(asJSON, "json", false, "print the key's model export (kpcastream.model/v1) instead of its summary")
		fs.StringVar(modelOut, "model-out", "", "also write the model export to this file (for kpcastream project)")
	}
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	switch pos := fs.Args(); {
	case len(pos) > 2:
		fs.Usage()
		return errUsage
	case len(pos) == 2:
		cf.pipeline, *key = pos[0], pos[1]
	case len(pos) == 1:
		*key = pos[0]
	}
	if missingFlags(stderr, fs, "usage: kpcastream key "+op+" [--config FILE] [--pipeline P] --key K", "key") {
		return errUsage
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	name, svc := cf.pipeline, *service
	if cfg != nil {
		pl, err := cf.pipelineOf(cfg)
		if err != nil {
			return err
		}
		name = pl.Name
		if svc == "" {
			svc = cfg.Processor.WithDefaults().ServiceName
		}
	}
	if name == "" {
		return errors.New("give the pipeline: --config FILE (its only pipeline, or --pipeline P), or --pipeline P")
	}
	if svc == "" {
		svc = processor.DefaultServiceName
	}
	nc, err := cf.connect(cfg, "kpcastream-key")
	if err != nil {
		return err
	}
	defer nc.Close()
	body, _ := json.Marshal(processor.KeyRequest{Pipeline: name, Key: *key})
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, svc+"."+keyOps[op].endpoint, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no worker answers %s.%s: start \"kpcastream run\" (the key's pipeline runs there), or give the service name of its config (--service, service_name)", svc, keyOps[op].endpoint)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return errInterrupted
	case err != nil:
		return fmt.Errorf("%s request: %w", keyOps[op].endpoint, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return keyError(code, m.Header.Get(micro.ErrorHeader), name, *key)
	}
	if op != "show" {
		fmt.Fprintf(stdout, keyOps[op].done, *key, name)
		return nil
	}
	if *modelOut != "" {
		if err := os.WriteFile(*modelOut, append(m.Data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", m.Data)
		return err
	}
	return printModelSummary(stdout, name, *key, m.Data)
}

// keyError says an error answer of the service in the command's terms.
func keyError(code, text, pipeline, key string) error {
	switch code {
	case "404":
		return fmt.Errorf("pipeline %s has no learner for key %q (%s)", pipeline, key, text)
	case "503":
		return fmt.Errorf("the key's partition is moving to another worker: retry (%s)", text)
	}
	return fmt.Errorf("%s %s", code, text)
}

// modelSummary is what "key show" prints of a model export
// (kpcastream.model/v1, README "Model export").
type modelSummary struct {
	Format       string          `json:"format"`
	Learner      string          `json:"learner"`
	Kernel       json.RawMessage `json:"kernel"`
	Points       [][]float64     `json:"points"`
	Coefficients [][]float64     `json:"coefficients"`
	Eigenvalues  []float64       `json:"eigenvalues"`
	Seen         int64           `json:"seen"`
	Classifier   *struct {
		Classes []string `json:"classes"`
	} `json:"classifier"`
	Preprocess *json.RawMessage `json:"preprocess"`
	Monitor    *struct {
		Level    float64 `json:"level"`
		Learn    string  `json:"learn"`
		SPELimit float64 `json:"spe_limit"`
		T2Limit  float64 `json:"t2_limit"`
	} `json:"monitor"`
}

// printModelSummary writes one line per property of the model export data.
func printModelSummary(w io.Writer, pipeline, key string, data []byte) error {
	var m modelSummary
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("the model export does not decode: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	dim := 0
	if len(m.Points) > 0 {
		dim = len(m.Points[0])
	}
	fmt.Fprintf(tw, "pipeline\t%s\nkey\t%s\nlearner\t%s\nkernel\t%s\n", pipeline, key, m.Learner, m.Kernel)
	fmt.Fprintf(tw, "dim\t%d\ncomponents\t%d\ndictionary\t%d points\nseen\t%d\n", dim, len(m.Eigenvalues), len(m.Points), m.Seen)
	ev := make([]string, len(m.Eigenvalues))
	for i, v := range m.Eigenvalues {
		ev[i] = fmt.Sprintf("%.4g", v)
	}
	fmt.Fprintf(tw, "eigenvalues\t%s\n", strings.Join(ev, " "))
	if m.Monitor != nil {
		fmt.Fprintf(tw, "monitor\tlevel %g, learn %s, limits SPE %.4g, T² %.4g\n", m.Monitor.Level, m.Monitor.Learn, m.Monitor.SPELimit, m.Monitor.T2Limit)
	}
	if m.Preprocess != nil {
		fmt.Fprintf(tw, "preprocess\tstandardize\n")
	}
	if m.Classifier != nil {
		fmt.Fprintf(tw, "classifier\t%s\n", strings.Join(m.Classifier.Classes, ", "))
	}
	fmt.Fprintf(tw, "format\t%s (--json prints it, --model-out writes it)\n", m.Format)
	return tw.Flush()
}
