package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	pubport "github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/processor"
)

func init() {
	commands["dlq"] = command{summary: "list stored dead letters (dlq ls) and re-publish them after a fix (dlq republish)", run: runDLQ}
}

// dlqEntry is one stored dead letter.
type dlqEntry struct {
	Seq      uint64          `json:"seq"` // sequence in the dead-letter stream
	Time     time.Time       `json:"time"`
	Pipeline string          `json:"pipeline"`
	Key      string          `json:"key"`
	Reason   string          `json:"reason"`
	Detail   string          `json:"detail"`
	Subject  string          `json:"subject"`   // where it was published (republish target)
	InputSeq uint64          `json:"input_seq"` // its sequence in the input stream
	Payload  json.RawMessage `json:"payload"`
	msg      *jetstream.RawStreamMsg
}

// dlqFilter selects dead letters.
type dlqFilter struct {
	seqs   [][2]uint64 // ranges, inclusive
	reason string
	key    string
	since  time.Duration
	limit  int
}

func (f dlqFilter) any() bool {
	return len(f.seqs) > 0 || f.reason != "" || f.key != "" || f.since > 0
}

func (f dlqFilter) match(e *dlqEntry, now time.Time) bool {
	if len(f.seqs) > 0 {
		in := false
		for _, r := range f.seqs {
			in = in || e.Seq >= r[0] && e.Seq <= r[1]
		}
		if !in {
			return false
		}
	}
	return (f.reason == "" || e.Reason == f.reason) && (f.key == "" || e.Key == f.key) &&
		(f.since <= 0 || now.Sub(e.Time) <= f.since)
}

// parseSeqs parses "5,7,10-20".
func parseSeqs(s string) ([][2]uint64, error) {
	var out [][2]uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seq %q: %q is not a sequence", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seq %q: %q is not a range", s, part)
			}
		}
		out = append(out, [2]uint64{a, b})
	}
	return out, nil
}

// runDLQ is "kpcastream dlq ls|republish [flags]".
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, `usage: kpcastream dlq ls        --config FILE [--pipeline P] | --stream S  [--seq 5,7-9] [--reason R] [--key K] [--since D] [--limit N] [--json]
       kpcastream dlq republish --config FILE [--pipeline P] | --stream S  (--seq … | --reason R | --key K | --since D | --all) [--to SUBJECT] [--delete] [--dry-run]`)
	}
	op, err := subcommand(args, stderr, usage, "dlq", "ls", "republish")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("dlq "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerClient(fs)
	stream := fs.String("stream", "", "the dead-letter stream (default: the one that stores --pipeline's dead-letter subject)")
	seqs := fs.String("seq", "", "dead-letter stream sequences: 5,7,10-20")
	var f dlqFilter
	fs.StringVar(&f.reason, "reason", "", "only this reason (malformed, dimension, too_large, non_finite, numerical, label, version, panic)")
	fs.StringVar(&f.key, "key", "", "only this partition key")
	fs.DurationVar(&f.since, "since", 0, "only dead letters stored within this duration")
	fs.IntVar(&f.limit, "limit", 0, "at most this many (0: all)")
	// Each operation's own flags: "dlq ls -h" and its completion list no
	// republish flag.
	asJSON, all, to, del, dry := new(bool), new(bool), new(string), new(bool), new(bool)
	if op == "ls" {
		fs.BoolVar(asJSON, "json", false, "one JSON object per line (with the full detail and payload)")
	} else {
		fs.BoolVar(all, "all", false, "every dead letter of the stream")
		fs.StringVar(to, "to", "", "to this subject instead of each one's original input subject")
		fs.BoolVar(del, "delete", false, "delete each dead letter from the stream once re-published")
		fs.BoolVar(dry, "dry-run", false, "list what would be sent, send nothing")
	}
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	if f.seqs, err = parseSeqs(*seqs); err != nil {
		return err
	}
	if op == "republish" && !f.any() && !*all {
		return errors.New("select the dead letters to re-publish: --seq, --reason, --key, --since, or --all")
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	var dlSubject string
	perShard := false
	if *stream == "" {
		if cfg == nil {
			if cf.pipeline == "" {
				fs.Usage()
				return errUsage
			}
			*stream = processor.DeadLetterConfig{Stream: processor.DefaultDeadLetterStream}.StreamName(cf.pipeline)
		} else {
			pl, err := cf.pipelineOf(cfg)
			if err != nil {
				return err
			}
			pc := pl.WithDefaults()
			dlSubject = pc.DeadLetterSubjects()
			perShard = pc.Input.Shards > 1 && strings.Contains(pc.DeadLetter, "{shard}")
			cf.pipeline = pc.Name
		}
	}
	nc, js, err := cf.connectJS(cfg, "kpcastream-dlq")
	if err != nil {
		return err
	}
	defer nc.Close()
	if *stream == "" {
		name, err := js.StreamNameBySubject(ctx, dlSubject)
		if err != nil {
			hint := "dead letters are stored by default since dead_letters was added, start the workers once"
			if perShard {
				hint = "its dead-letter subject has {shard}: each shard's dead letters have a stream of their own (<dead_letters.stream>-<shard>), pass it with --stream"
			}
			return fmt.Errorf("no stream stores the dead letters of pipeline %s (%s): %w; %s", cf.pipeline, dlSubject, err, hint)
		}
		*stream = name
	}
	entries, err := readDLQ(ctx, js, *stream, cf.pipeline, f)
	if err != nil {
		return err
	}
	if op == "ls" {
		return printDLQ(stdout, entries, *asJSON)
	}
	return republish(ctx, nc, js, *stream, entries, *to, *del, *dry, stdout)
}

// readDLQ reads the dead letters of stream that match f (and pipeline,
// when a stream holds several pipelines' dead letters).
func readDLQ(ctx context.Context, js jetstream.JetStream, stream, pipeline string, f dlqFilter) ([]*dlqEntry, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream %s: %w", stream, err)
	}
	info := st.CachedInfo()
	var out []*dlqEntry
	if info.State.Msgs == 0 {
		return nil, nil
	}
	cc := jetstream.OrderedConsumerConfig{}
	if len(f.seqs) > 0 {
		lo := f.seqs[0][0]
		for _, r := range f.seqs {
			lo = min(lo, r[0])
		}
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, max(lo, 1)
	} else if f.since > 0 {
		t := time.Now().Add(-f.since)
		cc.DeliverPolicy, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	cons, err := st.OrderedConsumer(ctx, cc)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	now := time.Now()
	for {
		if p := cons.CachedInfo(); p != nil && p.NumPending == 0 && p.Delivered.Stream >= last {
			break
		}
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, err
		}
		n := 0
		done := false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			e := dlqEntryOf(md.Sequence.Stream, md.Timestamp, m.Subject(), m.Headers(), m.Data())
			if (pipeline == "" || e.Pipeline == "" || e.Pipeline == pipeline) && f.match(e, now) {
				out = append(out, e)
			}
			if md.Sequence.Stream >= last || f.limit > 0 && len(out) >= f.limit {
				done = true
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if done {
			break
		}
		if n == 0 {
			// Nothing at or after the start (or the rest was deleted).
			if p, err := cons.Info(ctx); err != nil || p.NumPending == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if f.limit > 0 && len(out) > f.limit {
		out = out[:f.limit]
	}
	return out, nil
}

// dlqEntryOf reads a stored dead letter.
func dlqEntryOf(seq uint64, ts time.Time, subject string, h nats.Header, data []byte) *dlqEntry {
	e := &dlqEntry{Seq: seq, Time: ts, Pipeline: h.Get(processor.HeaderPipeline), Key: h.Get(processor.HeaderKey),
		Reason: h.Get(processor.HeaderError), Detail: h.Get(processor.HeaderErrorDetail),
		Subject: h.Get(processor.HeaderInputSubject), Payload: payloadJSON(data, h.Get("Content-Type")),
		msg: &jetstream.RawStreamMsg{Subject: subject, Sequence: seq, Header: h, Data: data, Time: ts}}
	if e.Subject == "" {
		e.Subject = h.Get(processor.HeaderSubject) // dead letters of earlier versions
	}
	e.InputSeq, _ = strconv.ParseUint(h.Get(processor.HeaderStreamSeq), 10, 64)
	return e
}

// printDLQ writes entries as a table (payload and detail shortened) or as
// JSON lines.
func printDLQ(w io.Writer, entries []*dlqEntry, asJSON bool) error {
	return printRows(w, entries, asJSON, "SEQ\tTIME\tPIPELINE\tKEY\tREASON\tSUBJECT\tINPUT SEQ\tDETAIL\tPAYLOAD", "dead letter",
		func(e *dlqEntry) []any {
			return []any{e.Seq, e.Time.UTC().Format(time.RFC3339), e.Pipeline, e.Key, e.Reason,
				e.Subject, e.InputSeq, shorten(e.Detail, 60), shorten(string(e.Payload), 60)}
		})
}

// printRows writes rows as JSON lines, or as a table: the tab-separated
// header, a line of cells per row, and the count of what (a singular noun:
// "1 dead letter", "2 dead letters").
func printRows[T any](w io.Writer, rows []T, asJSON bool, header, what string, cells func(T) []any) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		for i, c := range cells(r) {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, plural(len(rows), what))
	return tw.Flush()
}

// shorten cuts s to n runes with an ellipsis, on one line.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// republish sends each entry's payload, with its original headers (not the
// dead-letter ones), to its input subject (or to), with JetStream when a
// stream captures the subject; with del it then deletes it from stream.
func republish(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, stream string, entries []*dlqEntry, to string, del, dry bool, stdout io.Writer) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	captured := map[string]bool{}
	sent := 0
	for _, e := range entries {
		subj := e.Subject
		if to != "" {
			subj = to
		}
		if subj == "" {
			return fmt.Errorf("dead letter %d names no input subject; give --to", e.Seq)
		}
		if dry {
			fmt.Fprintf(stdout, "would republish %d (%s, key %s) to %s\n", e.Seq, e.Reason, e.Key, subj)
			continue
		}
		m := nats.NewMsg(subj)
		m.Data = e.msg.Data
		for k, v := range e.msg.Header {
			if strings.HasPrefix(k, "Kpcastream-") || strings.HasPrefix(k, "Nats-") {
				continue
			}
			m.Header[k] = v
		}
		m.Header.Set("Kpcastream-Republished-From", stream+"/"+strconv.FormatUint(e.Seq, 10))
		js1, ok := captured[subj]
		if !ok {
			name, err := pubport.Find(ctx, js, subj)
			js1 = err == nil && name != ""
			captured[subj] = js1
		}
		if err := publishMsg(ctx, nc, js, js1, m); err != nil {
			return fmt.Errorf("republish %d to %s (%d sent before): %w", e.Seq, subj, sent, err)
		}
		sent++
		if del {
			if err := st.DeleteMsg(ctx, e.Seq); err != nil {
				return fmt.Errorf("delete %d from %s after republishing it: %w", e.Seq, stream, err)
			}
		}
		fmt.Fprintf(stdout, "republished %d (%s, key %s) to %s\n", e.Seq, e.Reason, e.Key, subj)
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	verb := "republished"
	if dry {
		verb, sent = "would republish", len(entries)
	}
	fmt.Fprintf(stdout, "%s %s\n", verb, plural(sent, "dead letter"))
	return nil
}
