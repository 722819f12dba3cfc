package main

import (
	"bufio"
	"context"
	"encoding/csv"
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
	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/csvin"
	pubport "github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/internal/term"
	"github.com/kpcastream/kpcastream/internal/words"
)

func init() {
	commands["publish"] = command{summary: "publish vectors from a CSV file or stdin", run: runPublish}
}

// publishOpts are the flags of "kpcastream publish".
type publishOpts struct {
	subject  string
	client   *clientFlags
	dim      int
	maxBatch int
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
	o.client = registerClient(fs)
	fs.IntVar(&o.dim, "dim", 0, "values per row the pipeline expects: rows of another width are reported before anything is sent (default: the --pipeline's learner.dim)")
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
	const use = "usage: kpcastream publish --subject S --in FILE.csv|- [flags]"
	if missingFlags(stderr, fs, use, "subject", "in") {
		return errUsage
	}
	if fs.NArg() > 0 || o.batch < 1 || o.rate < 0 {
		fmt.Fprintln(stderr, use)
		fs.PrintDefaults()
		return errUsage
	}
	cfg, err := o.client.load()
	if err != nil {
		return err
	}
	if cfg != nil {
		pl, err := o.client.pipelineOf(cfg)
		if err != nil {
			return err
		}
		if o.dim == 0 {
			o.dim = pl.Learner.Dim
		}
		if !subjectMatches(pl.Input.Subject, o.subject) {
			return fmt.Errorf("--subject %s is not one of pipeline %s's input subjects (%s); nothing was published", o.subject, pl.Name, pl.Input.Subject)
		}
		o.maxBatch = pl.WithDefaults().MaxBatch
	}
	var r io.Reader = os.Stdin
	if o.in != "-" {
		f, err := os.Open(o.in)
		if err != nil {
			return err
		}
		defer f.Close()
		// A file is checked whole before anything is sent: the width of
		// every row (given the pipeline's dimension), then every value.
		if o.dim > 0 {
			if err := checkWidths(f, o.in, o.dim, splitCols(o.drop), strings.TrimSpace(o.idColumn)); err != nil {
				return err
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
		if err := checkValues(f, o.in, splitCols(o.drop), strings.TrimSpace(o.idColumn)); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		r = f
	}
	return publish(ctx, o, cfg, r, stdout, stderr)
}

// splitCols splits a comma-separated column list.
func splitCols(s string) []string {
	var cols []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}

// checkWidths reads the CSV file r whole and reports, before anything is
// published, every line whose number of values (after --drop and
// --id-column) is not dim, up to 10 of them with the count of the rest.
func checkWidths(r io.Reader, name string, dim int, drop []string, id string) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var header []string
	removed := -1 // fields left out of each row by --drop and --id-column
	var bad []string
	nbad := 0
	for first := true; ; first = false {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if first {
			hr, herr := csvin.NewReader(strings.NewReader(strings.Join(quoteAll(rec), ",")+"\n"), csvin.Options{Name: name, Drop: drop, ID: id, HeaderOptional: true})
			if herr != nil {
				return herr
			}
			removed = len(rec) - hr.Dim()
			header = hr.Header()
			if header != nil {
				if hr.Dim() != dim {
					return fmt.Errorf("%s: line %d: the header keeps %d columns (%s), the pipeline expects %d values per row: %s; nothing was published",
						name, line, hr.Dim(), strings.Join(header, ","), dim, widthHint(hr.Dim(), dim))
				}
				continue
			}
		}
		if w := len(rec) - removed; w != dim {
			nbad++
			if len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("line %d: %s", line, plural(w, "value")))
			}
		}
	}
	if nbad == 0 {
		return nil
	}
	more := ""
	if nbad > len(bad) {
		more = fmt.Sprintf(" and %d more lines", nbad-len(bad))
	}
	return fmt.Errorf("%s: rows of the wrong width (the pipeline expects %d values per row): %s%s; nothing was published",
		name, dim, strings.Join(bad, "; "), more)
}

// checkValues reads the CSV file r whole as publish will and reports the
// first row it would stop at (a value that is not a finite number, an id
// that is not UTF-8, a row of another width than the first), before
// anything is published.
func checkValues(r io.Reader, name string, drop []string, id string) error {
	cr, err := csvin.NewReader(bufio.NewReaderSize(r, 1<<20), csvin.Options{Name: name, Drop: drop, ID: id, HeaderOptional: true})
	if err != nil {
		return fmt.Errorf("%w; nothing was published", err)
	}
	row := make([]float64, cr.Dim())
	for {
		if _, _, err := cr.Next(row); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%w; nothing was published", err)
		}
	}
}

// widthHint says what to do about rows of width got where want are expected.
func widthHint(got, want int) string {
	if got > want {
		return fmt.Sprintf("leave %s out with --drop (or name the id with --id-column)", columns(got-want))
	}
	return fmt.Sprintf("%s missing", columns(want-got))
}

// columns is "1 column" or "n columns".
func columns(n int) string {
	if n == 1 {
		return "1 column"
	}
	return fmt.Sprintf("%d columns", n)
}

// quoteAll quotes CSV fields so that they can be joined back into a line.
func quoteAll(rec []string) []string {
	q := make([]string, len(rec))
	for i, f := range rec {
		q[i] = `"` + strings.ReplaceAll(f, `"`, `""`) + `"`
	}
	return q
}

// publish reads CSV rows from r and publishes them; progress goes to stderr.
func publish(ctx context.Context, o publishOpts, cfg *config.Config, r io.Reader, stdout, stderr io.Writer) error {
	enc, err := codec.ParseEncoding(o.encoding)
	if err != nil {
		return err
	}
	name := o.in
	if name == "-" {
		name = "stdin"
	}
	cr, err := openRows(o, r, name)
	if err != nil {
		return err
	}
	nc, js, err := o.client.connectJS(cfg, "kpcastream-publish")
	if err != nil {
		return err
	}
	defer nc.Close()
	// JetStream publish (acknowledged) when a stream captures the subject.
	stream, err := pubport.Find(ctx, js, o.subject)
	p := newPublisher(o, enc, name, stdout, stderr)
	p.nc, p.js, p.useJS = nc, js, err == nil && stream != ""
	return p.run(ctx, cr)
}

// openRows opens the CSV rows of r (named name) and checks what can be
// checked before anything is sent: the rows' width against --dim and
// --batch against the pipeline's max_batch.
func openRows(o publishOpts, r io.Reader, name string) (*csvin.Reader, error) {
	cr, err := csvin.NewReader(r, csvin.Options{Name: name, Drop: splitCols(o.drop), ID: strings.TrimSpace(o.idColumn), HeaderOptional: true})
	if err != nil {
		return nil, err
	}
	if o.dim > 0 && cr.Dim() != o.dim {
		// stdin: the first row (or header) decides every row's width.
		what := "the first row has"
		if cr.Header() != nil {
			what = fmt.Sprintf("the header keeps %d columns (%s), so each row has", cr.Dim(), strings.Join(cr.Header(), ","))
		}
		return nil, fmt.Errorf("%s: %s %d values, the pipeline expects %d: %s; nothing was published", name, what, cr.Dim(), o.dim, widthHint(cr.Dim(), o.dim))
	}
	if o.maxBatch > 0 && o.batch > o.maxBatch {
		return nil, fmt.Errorf("--batch %d is more than the pipeline's max_batch %d; nothing was published", o.batch, o.maxBatch)
	}
	return cr, nil
}

// publisher publishes the batches of one publish run at its rate, counts
// them and reports its progress.
type publisher struct {
	o              publishOpts
	enc            codec.Encoding
	name           string
	stdout, stderr io.Writer
	nc             *nats.Conn
	js             jetstream.JetStream
	useJS          bool // JetStream publish (a stream captures the subject)

	batch []codec.Observation
	buf   []byte
	msgs  int // messages published
	rows  int // rows read
	sent  int // rows published

	start, next  time.Time
	interval     time.Duration // between messages (0: as fast as possible)
	tty          bool
	every        time.Duration // between progress lines
	lastProgress time.Time
}

func newPublisher(o publishOpts, enc codec.Encoding, name string, stdout, stderr io.Writer) *publisher {
	p := &publisher{o: o, enc: enc, name: name, stdout: stdout, stderr: stderr, start: time.Now()}
	if o.rate > 0 {
		p.interval = time.Duration(float64(time.Second) / o.rate)
	}
	p.next, p.lastProgress = p.start, p.start
	// On a terminal the progress line rewrites itself; elsewhere (a log
	// file, a CI job) a line every 5 s and the final one.
	p.tty = term.IsTerminal(stderr)
	p.every = 200 * time.Millisecond
	if !p.tty {
		p.every = 5 * time.Second
	}
	return p
}

// run publishes the rows of cr in batches of --batch, then the last
// partial one, and prints the message count on stdout.
func (p *publisher) run(ctx context.Context, cr *csvin.Reader) error {
	for {
		if ctx.Err() != nil {
			return p.interrupted()
		}
		x, id, err := cr.Next(make([]float64, cr.Dim()))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return p.readFailed(err)
		}
		p.batch = append(p.batch, codec.Observation{ID: id, X: x})
		p.rows++
		if len(p.batch) == p.o.batch {
			if err := p.send(ctx); err != nil {
				return p.sendFailed(ctx, err)
			}
		}
	}
	if err := p.send(ctx); err != nil {
		return p.sendFailed(ctx, err)
	}
	if err := p.nc.Flush(); err != nil {
		return err
	}
	p.progress(true)
	fmt.Fprintf(p.stdout, "%d\n", p.msgs)
	return nil
}

// send publishes the pending batch (nothing when empty), at the rate.
func (p *publisher) send(ctx context.Context) error {
	if len(p.batch) == 0 {
		return nil
	}
	if p.interval > 0 {
		if d := time.Until(p.next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		p.next = p.next.Add(p.interval)
	}
	var err error
	p.buf, err = codec.EncodeObservations(p.buf[:0], p.enc, p.batch)
	if err != nil {
		return fmt.Errorf("%s: rows %d to %d: %w", p.name, p.rows-len(p.batch)+1, p.rows, err)
	}
	m := nats.NewMsg(p.o.subject)
	m.Data = p.buf
	m.Header.Set("Content-Type", p.enc.ContentType())
	// An interrupt lets the message in flight land (or fail within
	// publishMsg's bound), so that the count printed is exact.
	if err := publishMsg(context.WithoutCancel(ctx), p.nc, p.js, p.useJS, m); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	p.msgs++
	p.sent += len(p.batch)
	p.batch = p.batch[:0]
	if time.Since(p.lastProgress) > p.every {
		p.lastProgress = time.Now()
		p.progress(false)
	}
	return nil
}

// sendFailed is the error of a failed send: an interrupt's when ctx ended.
func (p *publisher) sendFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return p.interrupted()
	}
	return err
}

// readFailed is the error of a row that cannot be read: only stdin (or
// a file changed since its check) gets here. What was sent is flushed.
func (p *publisher) readFailed(err error) error {
	if p.msgs == 0 {
		return fmt.Errorf("%w; nothing was published", err)
	}
	if ferr := p.nc.FlushTimeout(5 * time.Second); ferr != nil {
		return fmt.Errorf("%w; %s before it may have been published (flush: %v)", err, plural(p.sent, "row"), ferr)
	}
	return fmt.Errorf("%w; %s before it published (%s), the rest not: %s is checked as it is read — give a file with --in to have it checked whole before anything is sent",
		err, plural(p.sent, "row"), plural(p.msgs, "message"), p.name)
}

// progress prints the progress line (final: the last one, ended by a
// newline even on a terminal).
func (p *publisher) progress(final bool) {
	el := time.Since(p.start).Seconds()
	end := "\n"
	if p.tty && !final {
		end = "\r"
	}
	fmt.Fprintf(p.stderr, "published %s (%s) to %s in %.1fs, %.0f msg/s%s", plural(p.msgs, "message"), plural(p.sent, "row"), p.o.subject, el, float64(p.msgs)/max(el, 1e-9), end)
}

// interrupted ends a run stopped by ctx (Ctrl-C): what was published so
// far is flushed and counted, on stderr and on stdout as at the end of a
// run, and the error maps to exit code 130.
func (p *publisher) interrupted() error {
	ferr := p.nc.FlushTimeout(5 * time.Second)
	p.progress(true)
	fmt.Fprintf(p.stdout, "%d\n", p.msgs)
	if ferr != nil {
		return fmt.Errorf("%w: %s (%s) published before the interrupt, then a flush failed (%v): the last core NATS messages may be lost",
			errInterrupted, plural(p.msgs, "message"), plural(p.sent, "row"), ferr)
	}
	return fmt.Errorf("%w: %s (%s) of %s published, the rest not sent", errInterrupted, plural(p.msgs, "message"), plural(p.sent, "row"), p.name)
}

// plural is words.Plural: "1 row", "2 rows", "0 passes".
func plural(n int, noun string) string { return words.Plural(n, noun) }

// subjectMatches reports whether the NATS subject filter matches subject.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
