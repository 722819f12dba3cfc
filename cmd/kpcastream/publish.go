package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/csvin"
)

func init() {
	commands["publish"] = command{summary: "publish vectors from a CSV file or stdin", run: runPublish}
}

// publishOpts are the flags of "kpcastream publish".
type publishOpts struct {
	subject  string
	url      string
	in       string
	drop     string
	encoding string
	rate     float64
	batch    int
	idColumn string
}

// runPublish is "kpcastream publish --subject S [--nats-url URL] --in FILE.csv|-
// [--drop cols] [--encoding json|msgpack] [--rate N] [--batch N] [--id-column c]".
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o publishOpts
	fs.StringVar(&o.subject, "subject", "", "subject to publish to (required)")
	fs.StringVar(&o.url, "nats-url", "", "NATS server URLs (env NATS_URL; default nats://127.0.0.1:4222)")
	fs.StringVar(&o.in, "in", "", `CSV file, or "-" for stdin (required); a first row with no numeric field is a header`)
	fs.StringVar(&o.drop, "drop", "", "comma-separated columns to leave out (header names, or 0-based indices)")
	fs.StringVar(&o.encoding, "encoding", "json", "json or msgpack (json by default since this release, msgpack before: readable with nats sub, and outputs follow the input's encoding)")
	fs.Float64Var(&o.rate, "rate", 0, "messages per second (0: as fast as possible)")
	fs.IntVar(&o.batch, "batch", 1, "observations per message")
	fs.StringVar(&o.idColumn, "id-column", "", "column (name or index) whose value is the observation id")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if o.subject == "" || o.in == "" || fs.NArg() > 0 || o.batch < 1 || o.rate < 0 {
		fmt.Fprintln(stderr, "usage: kpcastream publish --subject S --in FILE.csv|- [flags]")
		fs.PrintDefaults()
		return errUsage
	}
	if o.url == "" {
		o.url = os.Getenv("NATS_URL")
	}
	if o.url == "" {
		o.url = nats.DefaultURL
	}
	var r io.Reader = os.Stdin
	if o.in != "-" {
		f, err := os.Open(o.in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	return publish(ctx, o, r, stdout, stderr)
}

// publish reads CSV rows from r and publishes them; progress goes to stderr.
func publish(ctx context.Context, o publishOpts, r io.Reader, stdout, stderr io.Writer) error {
	enc, err := codec.ParseEncoding(o.encoding)
	if err != nil {
		return err
	}
	var drop []string
	for _, c := range strings.Split(o.drop, ",") {
		if c = strings.TrimSpace(c); c != "" {
			drop = append(drop, c)
		}
	}
	name := o.in
	if name == "-" {
		name = "stdin"
	}
	cr, err := csvin.NewReader(r, csvin.Options{Name: name, Drop: drop, ID: strings.TrimSpace(o.idColumn), HeaderOptional: true})
	if err != nil {
		return err
	}
	nc, err := nats.Connect(o.url, nats.Name("kpcastream-publish"))
	if err != nil {
		return fmt.Errorf("connect %s: %w", o.url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// JetStream publish (acknowledged) when a stream captures the subject.
	useJS := false
	if stream, err := js.StreamNameBySubject(ctx, o.subject); err == nil && stream != "" {
		useJS = true
	}
	var (
		batch []codec.Observation
		buf   []byte
		msgs  int
		rows  int
	)
	start := time.Now()
	var interval time.Duration
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) / o.rate)
	}
	next := start
	progress := func(final bool) {
		el := time.Since(start).Seconds()
		end := "\r"
		if final {
			end = "\n"
		}
		fmt.Fprintf(stderr, "published %d messages (%d rows) to %s in %.1fs, %.0f msg/s%s", msgs, rows, o.subject, el, float64(msgs)/max(el, 1e-9), end)
	}
	lastProgress := start
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			next = next.Add(interval)
		}
		var err error
		buf, err = codec.EncodeObservations(buf[:0], enc, batch)
		if err != nil {
			return fmt.Errorf("%s: rows %d to %d: %w", name, rows-len(batch)+1, rows, err)
		}
		m := nats.NewMsg(o.subject)
		m.Data = buf
		m.Header.Set("Content-Type", enc.ContentType())
		if useJS {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = js.PublishMsg(pctx, m)
			cancel()
		} else {
			err = nc.PublishMsg(m)
		}
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		msgs++
		batch = batch[:0]
		if time.Since(lastProgress) > 200*time.Millisecond {
			lastProgress = time.Now()
			progress(false)
		}
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			break
		}
		x, id, err := cr.Next(make([]float64, cr.Dim()))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		ob := codec.Observation{ID: id, X: x}
		batch = append(batch, ob)
		rows++
		if len(batch) == o.batch {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := send(); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	progress(true)
	fmt.Fprintf(stdout, "%d\n", msgs)
	return ctx.Err()
}
