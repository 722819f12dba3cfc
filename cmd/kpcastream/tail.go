package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kpcastream/kpcastream/processor"
)

func init() {
	commands["tail"] = command{summary: "print outputs (or dead letters) as JSON lines, whatever their encoding", run: runTail}
}

// runTail is "kpcastream tail SUBJECT | --config F [--pipeline P] [--key K]
// [--dlq] [--all] [--count N] [--timeout D] [--meta]".
func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o tailOptions
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerClient(fs)
	fs.StringVar(&o.key, "key", "", "only this partition key (with --pipeline)")
	fs.BoolVar(&o.dlq, "dlq", false, "the pipeline's dead letters instead of its outputs (each line carries the reason)")
	fs.BoolVar(&o.all, "all", false, "start from the first stored message of the stream that captures the subject, then follow")
	fs.IntVar(&o.count, "count", 0, "stop after this many messages (0: never)")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop when no message came for this long (0: never)")
	fs.BoolVar(&o.meta, "meta", false, `wrap each line with its subject and headers: {"subject":…,"headers":…,"data":…}`)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kpcastream tail SUBJECT | --config FILE [--pipeline P] [--key K] [--dlq] [flags]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	var subject string
	switch {
	case fs.NArg() == 1 && cf.config == "" && o.key == "" && !o.dlq:
		subject = fs.Arg(0)
	case fs.NArg() == 0 && cfg != nil:
		pl, err := cf.pipelineOf(cfg)
		if err != nil {
			return err
		}
		subject = o.subjectOf(pl.WithDefaults())
	default:
		fs.Usage()
		return errUsage
	}
	nc, err := cf.connect(cfg, "kpcastream-tail")
	if err != nil {
		return err
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 256)
	stop, err := o.subscribe(ctx, nc, subject, msgs)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(stderr, "tail: %s\n", subject)
	return o.print(ctx, msgs, stdout)
}

// tailOptions are the flags of tail.
type tailOptions struct {
	key            string
	dlq, all, meta bool
	count          int
	timeout        time.Duration
}

// subjectOf is the subject of the pipeline pc's outputs (or dead letters)
// of --key (every key without).
func (o *tailOptions) subjectOf(pc processor.PipelineConfig) string {
	k := "*"
	if o.key != "" {
		k = o.key
	}
	tmpl := pc.Output.Subject
	if o.dlq {
		tmpl = pc.DeadLetter
	}
	if o.dlq && o.key != "" && !strings.Contains(pc.DeadLetter, "{key}") {
		// One dead-letter subject for every key: filter by header.
		return strings.NewReplacer("{pipeline}", pc.Name, "{shard}", "*").Replace(tmpl)
	}
	// {shard} (input.shards): every shard's; a key's outputs are in one.
	return strings.NewReplacer("{pipeline}", pc.Name, "{key}", k, "{shard}", "*").Replace(tmpl)
}

// subscribe delivers the messages of subject to msgs: from the first one
// of the stream that stores them with --all, else from now on. The
// returned function stops the delivery.
func (o *tailOptions) subscribe(ctx context.Context, nc *nats.Conn, subject string, msgs chan *nats.Msg) (func(), error) {
	if !o.all {
		sub, err := nc.ChanSubscribe(subject, msgs)
		if err != nil {
			return nil, err
		}
		stop := func() { _ = sub.Unsubscribe() }
		if err := nc.Flush(); err != nil {
			stop()
			return nil, err
		}
		return stop, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("--all: no stream stores %s: %w", subject, err)
	}
	cons, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		msgs <- &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	})
	if err != nil {
		return nil, err
	}
	return cc.Stop, nil
}

// print writes each message of msgs as a JSON line until ctx ends,
// --count messages were written or none came for --timeout.
func (o *tailOptions) print(ctx context.Context, msgs <-chan *nats.Msg, stdout io.Writer) error {
	var idle <-chan time.Time
	var timer *time.Timer
	if o.timeout > 0 {
		timer = time.NewTimer(o.timeout)
		defer timer.Stop()
		idle = timer.C
	}
	n := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-idle:
			return nil
		case m := <-msgs:
			if (o.dlq && o.key != "" && m.Header.Get(processor.HeaderKey) != o.key) || m.Header.Get(processor.HeaderLane) != "" {
				continue // HeaderLane: an output lane's end of batch, not an output
			}
			line := messageJSON(m, o.meta || o.dlq)
			if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
				return err
			}
			n++
			if o.count > 0 && n >= o.count {
				return nil
			}
			if timer != nil {
				timer.Reset(o.timeout)
			}
		}
	}
}

// parseFlags parses args, mapping a bad flag to errUsage. Flags may come
// after positional arguments ("tail SUBJECT --count 1"); fs.Args() then
// holds the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Leave the positional arguments in fs.Args().
	_ = fs.Parse(append([]string{"--"}, pos...))
	return nil
}

// messageJSON renders m as one JSON line: its payload decoded (JSON or
// msgpack, batches too), wrapped with the subject and headers when wrap is
// set (always for a dead letter: its reason is in the headers).
func messageJSON(m *nats.Msg, wrap bool) []byte {
	data := payloadJSON(m.Data, m.Header.Get("Content-Type"))
	if !wrap {
		return data
	}
	hdr := map[string]string{}
	for k, v := range m.Header {
		if len(v) > 0 {
			hdr[k] = v[0]
		}
	}
	b, _ := json.Marshal(struct {
		Subject string            `json:"subject"`
		Headers map[string]string `json:"headers,omitempty"`
		Data    json.RawMessage   `json:"data"`
	}{m.Subject, hdr, data})
	return b
}

// payloadJSON decodes a JSON or msgpack payload into compact JSON. A
// payload that is neither comes back as {"undecodable": "<text>"} (at most
// 256 bytes, invalid UTF-8 replaced) so that a dead letter can always be
// shown.
func payloadJSON(data []byte, contentType string) json.RawMessage {
	ct := strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	t := bytes.TrimLeft(data, " \t\r\n")
	isJSON := ct == "application/json" || ct == "" && len(t) > 0 && (t[0] == '{' || t[0] == '[')
	if isJSON {
		var buf bytes.Buffer
		if json.Compact(&buf, data) == nil {
			return buf.Bytes()
		}
	} else {
		var v any
		r := bytes.NewReader(data)
		// The whole payload is one value: "hello" is not the integer 104
		// followed by 4 bytes.
		if err := msgpack.NewDecoder(r).Decode(&v); err == nil && r.Len() == 0 {
			if b, err := json.Marshal(jsonable(v)); err == nil {
				return b
			}
		}
	}
	raw := data
	if len(raw) > 256 {
		raw = raw[:256]
	}
	b, _ := json.Marshal(map[string]string{"undecodable": strings.ToValidUTF8(string(raw), "\uFFFD")})
	return b
}

// jsonable makes a decoded msgpack value encodable as JSON: maps with
// non-string keys get string keys, and NaN or ±Inf become strings.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprint(x)
		}
	case []byte:
		return strings.ToValidUTF8(string(x), "\uFFFD")
	}
	return v
}
