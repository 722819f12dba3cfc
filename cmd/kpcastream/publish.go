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

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/config"
	"github.com/kpcastream/kpcastream/internal/csvin"
	pubport "github.com/kpcastream/kpcastream/internal/publish"
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
		return fmt.Sprintf("leave %d column(s) out with --drop (or name the id with --id-column)", got-want)
	}
	return fmt.Sprintf("%d column(s) missing", want-got)
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
	drop := splitCols(o.drop)
	name := o.in
	if name == "-" {
		name = "stdin"
	}
	cr, err := csvin.NewReader(r, csvin.Options{Name: name, Drop: drop, ID: strings.TrimSpace(o.idColumn), HeaderOptional: true})
	if err != nil {
		return err
	}
	if o.dim > 0 && cr.Dim() != o.dim {
		// stdin: the first row (or header) decides every row's width.
		what := "the first row has"
		if cr.Header() != nil {
			what = fmt.Sprintf("the header keeps %d columns (%s), so each row has", cr.Dim(), strings.Join(cr.Header(), ","))
		}
		return fmt.Errorf("%s: %s %d values, the pipeline expects %d: %s; nothing was published", name, what, cr.Dim(), o.dim, widthHint(cr.Dim(), o.dim))
	}
	if o.maxBatch > 0 && o.batch > o.maxBatch {
		return fmt.Errorf("--batch %d is more than the pipeline's max_batch %d; nothing was published", o.batch, o.maxBatch)
	}
	nc, js, err := o.client.connectJS(cfg, "kpcastream-publish")
	if err != nil {
		return err
	}
	defer nc.Close()
	// JetStream publish (acknowledged) when a stream captures the subject.
	stream, err := pubport.Find(ctx, js, o.subject)
	useJS := err == nil && stream != ""
	var (
		batch []codec.Observation
		buf   []byte
		msgs  int // messages published
		rows  int // rows read
		sent  int // rows published
	)
	start := time.Now()
	var interval time.Duration
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) / o.rate)
	}
	next := start
	// On a terminal the progress line rewrites itself; elsewhere (a log
	// file, a CI job) a line every 5 s and the final one.
	tty := isTerminal(stderr)
	every := 200 * time.Millisecond
	if !tty {
		every = 5 * time.Second
	}
	progress := func(final bool) {
		el := time.Since(start).Seconds()
		end := "\n"
		if tty && !final {
			end = "\r"
		}
		fmt.Fprintf(stderr, "published %s (%s) to %s in %.1fs, %.0f msg/s%s", plural(msgs, "message"), plural(sent, "row"), o.subject, el, float64(msgs)/max(el, 1e-9), end)
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
		// An interrupt lets the message in flight land (or fail within
		// publishMsg's bound), so that the count printed is exact.
		if err := publishMsg(context.WithoutCancel(ctx), nc, js, useJS, m); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		msgs++
		sent += len(batch)
		batch = batch[:0]
		if time.Since(lastProgress) > every {
			lastProgress = time.Now()
			progress(false)
		}
		return nil
	}
	// interrupted ends a run stopped by ctx (Ctrl-C): what was published
	// so far is flushed and counted, on stderr and on stdout as at the end
	// of a run, and the error maps to exit code 130.
	interrupted := func() error {
		ferr := nc.FlushTimeout(5 * time.Second)
		progress(true)
		fmt.Fprintf(stdout, "%d\n", msgs)
		if ferr != nil {
			return fmt.Errorf("%w: %s (%s) published before the interrupt, then a flush failed (%v): the last core NATS messages may be lost",
				errInterrupted, plural(msgs, "message"), plural(sent, "row"), ferr)
		}
		return fmt.Errorf("%w: %s (%s) of %s published, the rest not sent", errInterrupted, plural(msgs, "message"), plural(sent, "row"), name)
	}
	for {
		if ctx.Err() != nil {
			return interrupted()
		}
		x, id, err := cr.Next(make([]float64, cr.Dim()))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Only stdin (or a file changed since its check) gets here.
			if msgs == 0 {
				return fmt.Errorf("%w; nothing was published", err)
			}
			if ferr := nc.FlushTimeout(5 * time.Second); ferr != nil {
				return fmt.Errorf("%w; %s before it may have been published (flush: %v)", err, plural(sent, "row"), ferr)
			}
			return fmt.Errorf("%w; %s before it published (%s), the rest not: %s is checked as it is read — give a file with --in to have it checked whole before anything is sent",
				err, plural(sent, "row"), plural(msgs, "message"), name)
		}
		ob := codec.Observation{ID: id, X: x}
		batch = append(batch, ob)
		rows++
		if len(batch) == o.batch {
			if err := send(); err != nil {
				if ctx.Err() != nil {
					return interrupted()
				}
				return err
			}
		}
	}
	if err := send(); err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	progress(true)
	fmt.Fprintf(stdout, "%d\n", msgs)
	return nil
}

// plural is "1 row", "2 rows", "0 passes": n and the noun, in the plural
// unless n is 1 (regular English nouns: -es after s, x, ch and sh).
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	for _, suf := range []string{"s", "x", "ch", "sh"} {
		if strings.HasSuffix(noun, suf) {
			return fmt.Sprintf("%d %ses", n, noun)
		}
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

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
