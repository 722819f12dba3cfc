package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

func init() {
	commands["snapshot"] = command{summary: "list, show or remove the learners' snapshots of a pipeline (snapshot ls|show|rm)", run: runSnapshot}
}

// snapInfo is what "snapshot ls" and "snapshot show" print of one key.
type snapInfo struct {
	Pipeline     string    `json:"pipeline"`
	Key          string    `json:"key"`
	LastSeq      uint64    `json:"last_seq"`
	Epoch        uint64    `json:"epoch"`
	Bytes        int       `json:"bytes"`
	Stored       string    `json:"stored"` // "inline" or "object <name>"
	Revision     uint64    `json:"revision"`
	Time         time.Time `json:"time"`
	Learner      string    `json:"learner,omitempty"`
	StateVersion int       `json:"state_version,omitempty"`
	Seen         int64     `json:"seen"`
	BasisVersion int64     `json:"basis_version"`
	Dim          int       `json:"dim,omitempty"`
	Components   int       `json:"components,omitempty"`
	Budget       int       `json:"budget,omitempty"`
	Error        string    `json:"error,omitempty"` // why it cannot be loaded (corrupt)
}

// runSnapshot is "kpcastream snapshot ls|show|rm --config F [--pipeline P] [--key K]".
func runSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, `usage: kpcastream snapshot ls   --config FILE [--pipeline P] [--key K] [--json]
       kpcastream snapshot show --config FILE [--pipeline P] --key K
       kpcastream snapshot rm   --config FILE [--pipeline P] --key K [--force]`)
	}
	op, err := subcommand(args, stderr, usage, "snapshot", "ls", "show", "rm")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("snapshot "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerClient(fs)
	key := fs.String("key", "", "the partition key")
	asJSON := fs.Bool("json", false, "ls: one JSON object per line")
	force := fs.Bool("force", false, "rm: delete from the bucket directly even when workers are running (see README, Operating)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of each request")
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	required := []string{"config"}
	if op != "ls" {
		required = append(required, "key")
	}
	if missingFlags(stderr, fs, "usage: kpcastream snapshot "+op+" --config FILE [flags]", required...) {
		return errUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	pl, err := cf.pipelineOf(cfg)
	if err != nil {
		return err
	}
	nc, js, err := cf.connectJS(cfg, "kpcastream-snapshot")
	if err != nil {
		return err
	}
	defer nc.Close()
	octx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	store, err := snapshot.Open(octx, js, cfg.Snapshots)
	if err != nil {
		return err
	}
	name := pl.Name
	switch op {
	case "ls":
		return listSnapshots(octx, stdout, store, name, *key, *asJSON)
	case "show":
		return showSnapshot(octx, stdout, store, name, *key)
	}
	// rm: through the owner when workers are running (the reset request:
	// the owner replaces its in-memory learner and its snapshot, fenced),
	// else, or with --force, from the bucket directly.
	if !*force {
		body, _ := json.Marshal(processor.KeyRequest{Pipeline: name, Key: *key})
		m, err := nc.Request(cfg.Processor.WithDefaults().ServiceName+".reset", body, *timeout)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			// No worker runs: nobody holds the key in memory.
		case err != nil:
			return fmt.Errorf("reset request: %w", err)
		case m.Header.Get(micro.ErrorCodeHeader) == "404":
			return fmt.Errorf("pipeline %s has no snapshot for key %q", name, *key)
		case m.Header.Get(micro.ErrorCodeHeader) != "":
			return fmt.Errorf("reset request: %s %s (retry, or --force)", m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader))
		default:
			fmt.Fprintf(stdout, "key %q of pipeline %s reset by its owner: it starts afresh from its next message (its snapshot was replaced by a fresh learner's)\n", *key, name)
			return nil
		}
	}
	if _, err := entryOf(octx, store, name, *key); err != nil {
		return err
	}
	if err := store.Delete(octx, snapshot.JoinKey(name, *key), 0); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "snapshot of key %q of pipeline %s deleted: the key starts afresh from its next message\n", *key, name)
	return nil
}

// listSnapshots prints the snapshots of a pipeline's keys (of key only,
// when given).
func listSnapshots(ctx context.Context, stdout io.Writer, store *snapshot.Store, pipeline, key string, asJSON bool) error {
	prefix := pipeline + "."
	entries, err := store.List(ctx, prefix)
	if err != nil {
		return err
	}
	var infos []snapInfo
	for _, en := range entries {
		k := strings.TrimPrefix(en.Key, prefix)
		if key != "" && k != key {
			continue
		}
		infos = append(infos, describe(ctx, store, pipeline, k, en))
	}
	return printSnapshots(stdout, infos, asJSON)
}

// showSnapshot prints one key's snapshot as indented JSON.
func showSnapshot(ctx context.Context, stdout io.Writer, store *snapshot.Store, pipeline, key string) error {
	en, err := entryOf(ctx, store, pipeline, key)
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(describe(ctx, store, pipeline, key, en), "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	return nil
}

// entryOf returns the entry of one key.
func entryOf(ctx context.Context, store *snapshot.Store, pipeline, key string) (snapshot.Entry, error) {
	full := snapshot.JoinKey(pipeline, key)
	entries, err := store.List(ctx, pipeline+".")
	if err != nil {
		return snapshot.Entry{}, err
	}
	for _, en := range entries {
		if en.Key == full {
			return en, nil
		}
	}
	return snapshot.Entry{}, fmt.Errorf("pipeline %s has no snapshot for key %q", pipeline, key)
}

// describe loads the snapshot of key and summarises it; a snapshot that
// cannot be loaded is described by its entry and the error.
func describe(ctx context.Context, store *snapshot.Store, pipeline, key string, en snapshot.Entry) snapInfo {
	si := snapInfo{Pipeline: pipeline, Key: key, Bytes: en.Bytes, Revision: en.Revision, Time: en.Created, Stored: "inline"}
	if en.Object != "" {
		si.Stored = "object " + en.Object
	}
	snap, _, err := store.Load(ctx, en.Key)
	if err != nil {
		si.Error = err.Error()
		return si
	}
	si.LastSeq, si.Epoch = snap.LastSeq, snap.Epoch
	if st := snap.State; st != nil {
		si.Learner, si.StateVersion, si.Seen = st.Kind, st.Version, st.Seen
		si.Dim, si.Components, si.Budget = st.Config.Dim, st.Config.Components, st.Config.Budget
		v, err := basisVersion(st)
		if err != nil {
			si.Error = err.Error()
			return si
		}
		si.BasisVersion = int64(v)
	}
	return si
}

// basisVersion is the basis version a worker restoring st would publish
// (its outputs' basis_version): the learner is restored as the worker
// restores it and asked, since each kind keeps the counter under its own
// name in its State ("version" for ikpca and kha, "basis_version" for
// window and batch). A state the worker could not restore is an error.
func basisVersion(st *learners.State) (uint64, error) {
	l, err := learners.Restore(st)
	if err != nil {
		return 0, fmt.Errorf("cannot be restored: %w", err)
	}
	return l.Summary(nil).BasisVersion, nil
}

func printSnapshots(w io.Writer, infos []snapInfo, asJSON bool) error {
	return printRows(w, infos, asJSON, "KEY\tLAST SEQ\tEPOCH\tBYTES\tLEARNER\tSEEN\tBASIS VERSION\tSAVED\tSTATUS", "snapshot",
		func(si snapInfo) []any {
			status := "ok"
			if si.Error != "" {
				status = "CORRUPT: " + shorten(si.Error, 80)
			}
			return []any{si.Key, si.LastSeq, si.Epoch, si.Bytes, si.Learner, si.Seen, si.BasisVersion, si.Time.UTC().Format(time.RFC3339), status}
		})
}
