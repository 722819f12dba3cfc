package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/natsconn"
	"github.com/kpcastream/kpcastream/internal/natsembed"
	"github.com/kpcastream/kpcastream/internal/procstat"
	"github.com/kpcastream/kpcastream/internal/term"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Summary is the one-line description of "kpcastream bench".
const Summary = "end-to-end benchmark: a raw nats.go pass-through, the processor with a pass-through learner and with the real one, directly and over a simulated round trip"

// ErrUsage marks an error already explained by a usage message on stderr.
var ErrUsage = errors.New("usage")

// benchOptions are the flags of "kpcastream bench".
type benchOptions struct {
	nats       *natsconn.Flags
	conn       natsconn.Settings // resolved from nats
	embedded   bool              // the server runs in this process
	core       bool
	output     string
	mode       string
	phases     []string        // resolved from mode
	rtts       []time.Duration // resolved from rttList
	rttList    string
	duration   time.Duration
	window     int
	keyFlight  int // the processor's output.key_in_flight
	maxAck     int // max_ack_pending of every phase's consumer
	queueSize  int // the processor's queue_size; with maxAck, the pull batch of every phase
	learner    string
	budget     int
	dim        int
	components int
	keys       int
	count      int
	warmup     int
	rate       float64
	input      string // preload or concurrent (JetStream input at --rate 0)
	shards     int    // input streams of every phase (input.shards)
	partitions int    // the processor's partitions
	replicas   int    // replicas of the phase's streams
	tags       []string
	tagList    string
	// mapSubject, when set (the embedded server), gives the server the
	// subject mapping of a sharded input.
	mapSubject func(src, dst string) error
	workers    int
	stream     string
	storage    string
	encoding   string
	progress   time.Duration
	timeout    time.Duration
	seed       uint64
	cpuprofile string
	profWindow bool // --profile-window: cpuprofile covers each phase's measured window (profile.go)
	memprofile string
	snapEvery  int
	memory     string // the pipeline's memory_budget ("" : the default)
	memLimit   string // --memory-limit: "", "auto" or a size
	memBytes   int64  // resolved from memory
	procMem    string // --process-memory: "" or a size
	procBytes  int64  // resolved from procMem
	local      bool   // a local tier below memory (in the phase's temporary directory)
	pace       time.Duration
	watch      bool
}

func benchFlags(o *benchOptions, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.nats = natsconn.Register(fs, "NATS server URL (env NATS_URL), e.g. a nats-server in its own process (the deployed shape); none starts an embedded server in a temporary directory (its CPU then counts in the figures)")
	fs.BoolVar(&o.core, "core", false, "core NATS input (no JetStream, no acks; messages a slow consumer misses are lost and reported); no raw baseline")
	fs.StringVar(&o.output, "output", "jetstream", "outputs go to: jetstream (a stream with duplicate detection captures them, as deployed: the processor publishes with JetStream and waits for PubAcks) or core (no stream: core NATS publishes, the bench's default before issue 20)")
	fs.StringVar(&o.mode, "mode", "all", "which phases to run, comma-separated: raw (r: nats.go consume → async JetStream publish → ack, no processor), bare (a: the processor with a pass-through learner), pipeline (b: with --learner); all = raw,bare,pipeline; both = bare,pipeline")
	fs.StringVar(&o.rttList, "rtt", "0,1ms", "simulated network round trips between NATS and the processor (or raw baseline), comma-separated; every phase runs once per value; 0 connects directly, more through a delaying TCP proxy on loopback (half each way)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "end a phase's measured window after this long even if fewer than --count outputs arrived (0: wait for all --count)")
	fs.IntVar(&o.window, "window", processor.DefaultOutputWindow, "outputs awaiting their PubAck at most: the raw baseline's asynchronous publishes, the processor's output.window")
	fs.IntVar(&o.keyFlight, "key-in-flight", 0, "the processor's output.key_in_flight: outputs of one key awaiting their PubAck at most; > 1 publishes through an ordered fast-batch lane per worker (the output stream is created with allow_batched); 0: the processor's default (128, at most --window)")
	fs.IntVar(&o.maxAck, "max-ack-pending", processor.DefaultMaxAckPending, "every phase's consumer: max_ack_pending (the processor's input.max_ack_pending)")
	fs.IntVar(&o.queueSize, "queue-size", processor.DefaultQueueSize, "the processor's queue_size; every phase's consumer pulls min(max-ack-pending, 2·queue-size) messages at a time, as the processor does")
	fs.StringVar(&o.learner, "learner", learners.KindIKPCA, "learner of the real pipeline: ikpca, kha, window or batch")
	fs.IntVar(&o.budget, "budget", 128, "learner budget B")
	fs.IntVar(&o.dim, "dim", 16, "input dimension d")
	fs.IntVar(&o.components, "components", 8, "number k of components")
	fs.IntVar(&o.keys, "keys", 1, "number of partition keys (one learner each), messages round-robin over them")
	fs.IntVar(&o.count, "count", 100000, "measured messages (after the warm-up)")
	fs.IntVar(&o.warmup, "warmup", 0, "warm-up messages per key before the measured ones (default 2·budget)")
	fs.Float64Var(&o.rate, "rate", 0, "publish rate of the measured messages in msgs/s; 0 preloads the JetStream input (throughput) or publishes as fast as possible (core)")
	fs.IntVar(&o.shards, "shards", 1, "input streams of each phase (the processor's input.shards; README, Sharding): the raw relay runs one consumer per shard stream and its outputs, like the processor's, go to one output stream per shard; > 1 needs the servers' subject mapping of each phase's input (printed; the embedded server gets it)")
	fs.IntVar(&o.partitions, "partitions", 1, "the processor's partitions (at least --shards)")
	fs.IntVar(&o.replicas, "replicas", 1, "replicas of every stream the phases create (1..5; 3 on a 3-node cluster)")
	fs.StringVar(&o.tagList, "placement-tags", "", "comma-separated server tags: stream s of a phase (input shard and its output stream) is placed on the servers tagged tags[s mod n]; empty: the cluster places them")
	fs.StringVar(&o.input, "input", "preload", "at --rate 0, how a JetStream input arrives: preload (every message stored before the relay or processor starts) or concurrent (published as fast as possible after the warm-up while the relay or processor consumes: the deployed shape, where the stream leader serves publishes and consumers at once)")
	fs.IntVar(&o.workers, "workers", 0, "worker goroutines of both pipelines (default GOMAXPROCS)")
	fs.StringVar(&o.stream, "stream", "ellipse", "synthetic data: ellipse (stationary: noisy ellipse in the first two coordinates) or gaussian (isotropic, every vector novel)")
	fs.StringVar(&o.storage, "storage", "file", "JetStream storage of the input stream: file or memory")
	fs.StringVar(&o.encoding, "encoding", "msgpack", "payload encoding: msgpack or json")
	fs.DurationVar(&o.pace, "pace", 100*time.Microsecond, "at a fixed --rate, the generator wakes up at most once per this interval and sends the messages due by then (never early); 0: a wake-up per message")
	fs.DurationVar(&o.progress, "progress", 200*time.Millisecond, "progress bar refresh on stderr (0 disables)")
	fs.DurationVar(&o.timeout, "idle-timeout", 10*time.Second, "give up a phase when no output arrives for this long")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic data")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the phases (whole process, embedded server included) to this file")
	fs.StringVar(&o.memory, "memory", "", "the pipeline's memory_budget: bytes, or with KiB, MiB or GiB (default: the processor's, 256MiB)")
	fs.StringVar(&o.memLimit, "memory-limit", "", "Go's soft memory limit while a phase's processor runs: auto (processor.ApplyMemoryLimit's 1.5 × memory_budget + 64 MiB, what kpcastream run sets with an external server and no GOMEMLIMIT), a size (bytes, KiB, MiB, GiB), or empty: GOMEMLIMIT's")
	fs.StringVar(&o.procMem, "process-memory", "", "process_memory: an RSS target for this process while a phase's processor runs (kpcastream run's: Go's soft limit kept at it less the file pages resident, GOMEMLIMIT unset); refused, with the numbers, when --memory does not fit under it (lint's rule); not with --memory-limit")
	fs.BoolVar(&o.local, "local", true, "a local tier below memory_budget (local_dir in a temporary directory): keys beyond it go to disk, not to a snapshot save")
	fs.IntVar(&o.snapEvery, "snapshot-every", 0, "real pipeline: snapshot a key every this many messages (0: the processor default, negative: only on time and shutdown)")
	fs.BoolVar(&o.watch, "watch", false, "real pipeline: watch the first key on the live page's API (a client polling /api/v1/series, keys and pipelines every second, as the page does), to measure the page's cost")
	fs.BoolVar(&o.profWindow, "profile-window", false, "with --cpuprofile: profile only each phase's measured window (first measured output to the window's end), one file per phase: FILE.<phase label>")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile (allocations since the process started) to this file at the end")
	return fs
}

// Run is "kpcastream bench [flags]" (args without "bench"): see benchFlags.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o benchOptions
	fs := benchFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	if err := o.check(fs.NArg()); err != nil {
		fmt.Fprintf(stderr, "kpcastream bench: %v\nusage: kpcastream bench [flags]\n", err)
		fs.PrintDefaults()
		return ErrUsage
	}
	if o.warmup == 0 {
		o.warmup = 2 * o.budget
	}
	flags, ctxName := o.nats.Given()
	conn, _, err := natsconn.Resolve(natsconn.Sources{Flags: flags, Context: ctxName})
	if err != nil {
		return err
	}
	o.conn = conn
	url := conn.URL
	where := natsconn.Redact(url)
	if url == "" {
		dir, err := os.MkdirTemp("", "kpcastream-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		s, u, err := natsembed.StartEmbedded(sctx, natsembed.Options{Port: -1, StoreDir: dir})
		cancel()
		if err != nil {
			return err
		}
		defer func() {
			s.Shutdown()
			s.WaitForShutdown()
		}()
		url, where, o.embedded = u, "embedded server (same process)", true
		o.mapSubject = func(src, dst string) error { return s.GlobalAccount().AddMapping(src, dst) }
	}
	transport := "jetstream (" + o.storage + " storage)"
	if o.core {
		transport = "core nats"
	}
	transport += " in, "
	if o.output == "jetstream" {
		transport += "jetstream (" + o.storage + " storage, deduplicated) out"
	} else {
		transport += "core nats out"
	}
	rate := "max"
	if o.rate == 0 && !o.core {
		rate = "max, input " + map[string]string{"preload": "preloaded", "concurrent": "arriving concurrently"}[o.input]
	}
	if o.rate > 0 {
		rate = strconv.FormatFloat(o.rate, 'f', -1, 64) + " msgs/s"
	}
	fmt.Fprintf(stdout, "kpcastream bench: %s on %s; %s B=%d d=%d k=%d; keys=%d key-in-flight=%d warm-up=%d/key count=%d duration=%v rate=%s stream=%s rtt=%s; GOGC=%s GOMEMLIMIT=%s\n",
		transport, where, o.learner, o.budget, o.dim, o.components, o.keys, o.keyFlight, o.warmup, o.count, o.duration, rate, o.stream, o.rttList, envOr("GOGC", "100"), envOr("GOMEMLIMIT", "off"))
	if o.memLimit != "" {
		fmt.Fprintf(stdout, "--memory-limit %s: Go's soft memory limit while a phase's processor runs\n", o.memLimit)
	}
	if o.procMem != "" {
		fmt.Fprintf(stdout, "--process-memory %s: an RSS target while a phase's processor runs (Go's soft limit: the target less the file pages resident)\n", o.procMem)
	}
	if o.partitions > 1 || o.shards > 1 || o.replicas > 1 || len(o.tags) > 0 {
		fmt.Fprintf(stdout, "partitions=%d shards=%d replicas=%d placement-tags=%q (the raw relay: one consumer per shard stream)\n", o.partitions, o.shards, o.replicas, o.tagList)
	}
	if o.shards > 1 && o.mapSubject == nil {
		fmt.Fprintf(stdout, "the servers must map each phase's input subject (rtt index i): \"bench.<r|a|b><i>.in.*\": \"bench.<r|a|b><i>.in.{{wildcard(1)}}.{{partition(%d,1)}}\"\n", o.partitions)
	}
	var results []*phaseResult
	if o.cpuprofile != "" && !o.profWindow {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for i, rtt := range o.rtts {
		for _, ph := range o.phases {
			o.conn.URL = url
			// Each phase's RSS without the garbage of the one before.
			debug.FreeOSMemory()
			r, err := runPhase(ctx, o, ph, i, rtt, stderr)
			if err != nil {
				return fmt.Errorf("%s pipeline (rtt %v): %w", ph, rtt, err)
			}
			results = append(results, r)
		}
	}
	printResults(stdout, o, results)
	if o.memprofile != "" {
		f, err := os.Create(o.memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return nil
}

func (o *benchOptions) check(nargs int) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if nargs > 0 {
		bad("unexpected arguments")
	}
	if o.memory != "" {
		n, err := parseSize(o.memory)
		if err != nil {
			bad("--memory: %v", err)
		}
		o.memBytes = n
	}
	if o.procMem != "" {
		n, err := parseSize(o.procMem)
		switch {
		case err != nil:
			bad("--process-memory: %v", err)
		case o.memLimit != "":
			bad("--process-memory and --memory-limit both set Go's soft memory limit: give one")
		}
		o.procBytes = n
	}
	o.phases = nil
	want := map[string]bool{}
	for _, m := range strings.Split(o.mode, ",") {
		switch m = strings.TrimSpace(m); m {
		case "all":
			want["raw"], want["bare"], want["pipeline"] = !o.core, true, true
		case "both":
			want["bare"], want["pipeline"] = true, true
		case "raw":
			if o.core {
				bad("--mode raw: the raw baseline needs a JetStream input, not --core")
			}
			want[m] = true
		case "bare", "pipeline":
			want[m] = true
		default:
			bad("--mode: want raw, bare, pipeline, all or both (comma-separated), got %q", m)
		}
	}
	for _, m := range []string{"raw", "bare", "pipeline"} {
		if want[m] {
			o.phases = append(o.phases, m)
		}
	}
	switch o.output {
	case "jetstream", "core":
	default:
		bad("--output: want jetstream or core, got %q", o.output)
	}
	o.rtts = nil
	for _, v := range strings.Split(o.rttList, ",") {
		v = strings.TrimSpace(v)
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			bad("--rtt: want durations ≥ 0 such as 0 or 1ms, got %q", v)
			continue
		}
		o.rtts = append(o.rtts, d)
	}
	if o.duration < 0 {
		bad("--duration must be ≥ 0")
	}
	if o.window < 1 {
		bad("--window must be ≥ 1")
	}
	if o.keyFlight == 0 {
		o.keyFlight = min(processor.DefaultKeyInFlight, o.window)
	}
	if o.keyFlight < 1 || o.keyFlight > o.window {
		bad("--key-in-flight must be in [1, --window], or 0 for the processor's default")
	}
	if o.maxAck < 1 || o.queueSize < 1 {
		bad("--max-ack-pending and --queue-size must be ≥ 1")
	}
	if o.dim < 1 || o.components < 1 || o.budget < 1 || o.keys < 1 || o.count < 1 || o.warmup < 0 {
		bad("--dim, --components, --budget, --keys and --count must be ≥ 1 and --warmup ≥ 0")
	}
	if o.components > o.dim && (want["raw"] || want["bare"]) {
		bad("--components (%d) must be ≤ --dim (%d): the baselines publish the first k values", o.components, o.dim)
	}
	if !(o.rate >= 0) || math.IsInf(o.rate, 0) {
		bad("--rate must be ≥ 0, got %v", o.rate)
	}
	if o.pace < 0 {
		bad("--pace must be ≥ 0")
	}
	if o.partitions < 1 || o.partitions > processor.MaxPartitions {
		bad("--partitions must be in [1, %d]", processor.MaxPartitions)
	}
	if o.shards < 1 || o.shards > o.partitions {
		bad("--shards must be in [1, --partitions]")
	}
	if o.core && (o.shards > 1 || o.partitions > 1) {
		bad("--shards and --partitions need a JetStream input, not --core")
	}
	if o.replicas < 1 || o.replicas > 5 {
		bad("--replicas must be in [1, 5]")
	}
	o.tags = nil
	if o.tagList != "" {
		o.tags = strings.Split(o.tagList, ",")
	}
	switch o.input {
	case "preload":
	case "concurrent":
		if o.rate > 0 || o.core {
			bad("--input concurrent is for a JetStream input at --rate 0 (a paced or core input already arrives while it is consumed)")
		}
	default:
		bad("--input: want preload or concurrent, got %q", o.input)
	}
	if o.workers < 0 {
		bad("--workers must be ≥ 0")
	}
	switch o.stream {
	case "ellipse", "gaussian":
	default:
		bad("--stream: want ellipse or gaussian, got %q", o.stream)
	}
	switch o.storage {
	case "file", "memory":
	default:
		bad("--storage: want file or memory, got %q", o.storage)
	}
	if _, err := codec.ParseEncoding(o.encoding); err != nil {
		bad("--encoding: %v", err)
	}
	if o.timeout <= 0 {
		bad("--idle-timeout must be > 0")
	}
	if want["pipeline"] {
		cfg := o.learnerConfig()
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (o *benchOptions) learnerConfig() learners.Config {
	return learners.Config{Learner: o.learner, Dim: o.dim, Components: o.components, Budget: o.budget,
		Kernel: learners.Kernel{Name: learners.KernelRBF, Gamma: 1 / float64(o.dim)}}
}

// phaseResult holds the figures of one pipeline run.
type phaseResult struct {
	name                string        // raw, bare or the learner's kind; @rtt when rtt > 0
	phase               string        // raw, bare or pipeline
	rtt                 time.Duration // simulated round trip (0: direct)
	rttSeen             time.Duration // median nc.RTT() of the phase's connection
	capped              bool          // the window ended at --duration
	stored              int           // messages in the output stream at the end (-1: no output stream)
	proxyLate           string        // how late the delaying proxy's writes left ("" without one)
	received, expected  int
	lost                int
	elapsed             time.Duration // first to last measured output
	cpu                 time.Duration // process user+sys over the same window
	runDelay            time.Duration // OS run-queue delay of the process's threads over the window (-1: unknown)
	sched               schedWindow   // Go scheduler latencies over the window
	rss, peak           int64
	p50, p99, p999, max time.Duration
	pubRate             float64   // msgs/s of the (pre)publisher
	keys                *keyStats // the processor's keys at the end (pipeline phases)
	pacing              string    // the generator's pacing summary (fixed rate only)
}

func (r *phaseResult) rate() float64 {
	if r.elapsed <= 0 || r.received < 2 {
		return 0
	}
	return float64(r.received-1) / r.elapsed.Seconds()
}

// Message IDs mark the phase of an output: warm-up, the last warm-up
// message of a key, or measured.
const (
	idWarm     = "w"
	idWarmLast = "w!"
	idMeasured = "m"
)

// receiver collects the outputs of one phase.
type receiver struct {
	mu          sync.Mutex
	hist        latencyHist
	warmDone    int
	got         int
	first, last time.Time
	cpu0        time.Duration
	cpu1        time.Duration
	rd0, rd1    time.Duration // run delay, -1 if unknown
	sched       schedWindow
	want        int
	capped      bool // the window was ended early (--duration)
	done        chan struct{}
	progress    atomic.Int64
	lastSeen    atomic.Int64 // unix nanos of the last output
	badOutputs  atomic.Int64
	// onFirst, when set, is called (under mu) with the first measured
	// output: the pipeline phases read the processor's stats there.
	onFirst func(time.Time)
	prof    windowProfile // --profile-window (profile.go)
}

func newReceiver(want int) *receiver {
	return &receiver{want: want, done: make(chan struct{})}
}

func (r *receiver) handle(m *nats.Msg) {
	if m.Header.Get(processor.HeaderLane) != "" {
		return // a lane's end of batch (--key-in-flight > 1): not an output, not stored
	}
	now := time.Now()
	r.lastSeen.Store(now.UnixNano())
	enc := codec.Msgpack
	if m.Header.Get(processor.HeaderContentType) == codec.JSON.ContentType() {
		enc = codec.JSON
	}
	id, ts, err := codec.OutputStamp(m.Data, enc)
	if err != nil {
		r.badOutputs.Add(1)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch string(id) {
	case idWarmLast:
		r.warmDone++
	case idMeasured:
		if r.capped || r.got == r.want {
			return // the window is over
		}
		if r.got == 0 {
			r.first = now
			r.cpu0 = cpuNow()
			r.rd0 = runDelayNow()
			r.sched.start()
			r.prof.start()
			if r.onFirst != nil {
				r.onFirst(now)
			}
		}
		r.got++
		lat := now.Sub(time.Unix(0, int64(ts*1e9)))
		r.hist.add(lat)
		r.progress.Store(int64(r.got))
		r.last = now
		if r.got == r.want {
			r.endWindow()
			close(r.done)
		}
	}
}

// capAt ends the window if it has lasted d (d > 0) and is not over yet;
// it reports whether the window is over.
func (r *receiver) capAt(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == r.want || r.capped {
		return true
	}
	if d <= 0 || r.got == 0 || time.Since(r.first) < d {
		return false
	}
	r.capped = true
	r.endWindow()
	return true
}

// endWindow reads the process counters at the end of the measured window.
func (r *receiver) endWindow() {
	r.cpu1 = cpuNow()
	r.rd1 = runDelayNow()
	r.sched.end()
	r.prof.stop()
}

// runDelayNow returns the process's run-queue delay so far, -1 if unknown.
func runDelayNow() time.Duration {
	d, err := procstat.ProcessRunDelay()
	if err != nil {
		return -1
	}
	return d
}

func cpuNow() time.Duration {
	u, s, err := procstat.ProcessCPU()
	if err != nil {
		return 0
	}
	return u + s
}

// latencyHist is a log-bucketed histogram (buckets 1% wide) of latencies:
// bounded memory whatever the count.
type latencyHist struct {
	counts map[int]int
	n      int
	max    time.Duration
}

const histBase = 1.01

func (h *latencyHist) add(d time.Duration) {
	if h.counts == nil {
		h.counts = map[int]int{}
	}
	if d < time.Microsecond {
		d = time.Microsecond
	}
	h.counts[int(math.Log(float64(d))/math.Log(histBase))]++
	h.n++
	h.max = max(h.max, d)
}

// quantile returns the upper edge of the bucket holding quantile q.
func (h *latencyHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	lo, hi := math.MaxInt, math.MinInt
	for b := range h.counts {
		lo, hi = min(lo, b), max(hi, b)
	}
	rank := int(math.Ceil(q * float64(h.n)))
	seen := 0
	for b := lo; b <= hi; b++ {
		seen += h.counts[b]
		if seen >= rank {
			return min(time.Duration(math.Pow(histBase, float64(b+1))), h.max)
		}
	}
	return h.max
}

// benchData generates the synthetic vectors.
type benchData struct {
	rng    *rand.Rand
	stream string
}

func (g *benchData) next(x []float64) {
	if g.stream == "gaussian" {
		for j := range x {
			x[j] = g.rng.NormFloat64()
		}
		return
	}
	for j := range x {
		x[j] = 0.05 * g.rng.NormFloat64()
	}
	th := 2 * math.Pi * g.rng.Float64()
	x[0] += math.Cos(th)
	if len(x) > 1 {
		x[1] += 0.5 * math.Sin(th)
	}
}

// runPhase runs one phase ("raw", "bare" or "pipeline") on its own
// streams and subjects and measures it. With rtt > 0 the phase's
// processor (or raw relay) connects through a delayProxy that delays each
// direction by rtt/2; the generator and the receiver always connect
// directly.
func runPhase(ctx context.Context, o benchOptions, name string, rttIndex int, rtt time.Duration, stderr io.Writer) (*phaseResult, error) {
	ph := newPhase(o, name, rttIndex, rtt, stderr)
	defer ph.close()
	if err := ph.connect(); err != nil {
		return nil, err
	}
	if err := ph.setup(ctx); err != nil {
		return nil, err
	}
	res := &phaseResult{name: ph.label, phase: name, rtt: rtt, expected: o.count}
	preload := !o.core && o.rate == 0 && o.input != "concurrent"
	if preload {
		if err := ph.preload(ctx, res); err != nil {
			return nil, err
		}
	}
	res.rttSeen = medianRTT(ph.nc, 5)
	if err := ph.start(ctx); err != nil {
		return nil, err
	}
	bar := newProgressBar(stderr, ph.label, o.progress, o.count, &ph.recv.progress)
	defer bar.stop()
	if !preload {
		if err := ph.warmThenPublish(ctx, res); err != nil {
			return nil, err
		}
	}
	werr := waitFor(ctx, ph.recv, o.timeout, func() bool { return ph.recv.capAt(o.duration) })
	bar.stop()
	ph.collect(res, werr)
	if bad := ph.recv.badOutputs.Load(); bad > 0 {
		return nil, fmt.Errorf("%d outputs could not be decoded", bad)
	}
	if err := ph.stop(); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	if err := ph.checkStored(ctx, res, werr); err != nil {
		return nil, err
	}
	if werr != nil {
		if o.core && ph.recv.got > 0 {
			fmt.Fprintf(stderr, "%s: %d of %d measured outputs received (core NATS drops what a slow consumer misses)\n", ph.label, ph.recv.got, o.count)
			return res, nil
		}
		return nil, fmt.Errorf("%d of %d measured outputs received: %w", ph.recv.got, o.count, werr)
	}
	return res, nil
}

// phase is one phase of the benchmark while it runs: its names, its
// connections and streams, the generator and the receiver, and what to
// undo at its end (closers, last registered first).
type phase struct {
	o                 benchOptions
	name, tag, label  string
	inSubj, outSubj   string
	stream, outStream string // stream is "" with core input
	rtt               time.Duration
	stderr            io.Writer
	px                *delayProxy
	nc, rc, pc        *nats.Conn // the processor's, the receiver's, the generator's
	pjs               jetstream.JetStream
	recv              *receiver
	pub               *benchPublisher
	stopped           bool
	proc              *processor.Processor // the pipeline phases' processor
	stats0            processor.PipelineStats
	reg               *prometheus.Registry // the processor's metrics
	local0            [2]float64           // local tier reads and writes (keys) when stats0 was read
	t0                time.Time            // when stats0 was read: the measured messages' publish began
	stopRun           func() error
	closers           []func()
}

func newPhase(o benchOptions, name string, rttIndex int, rtt time.Duration, stderr io.Writer) *phase {
	ph := &phase{o: o, name: name, rtt: rtt, stderr: stderr}
	ph.tag = map[string]string{"raw": "r", "bare": "a", "pipeline": "b"}[name] + strconv.Itoa(rttIndex)
	ph.inSubj, ph.outSubj = "bench."+ph.tag+".in.*", "bench."+ph.tag+".out"
	if !o.core {
		ph.stream = "BENCH_IN_" + strings.ToUpper(ph.tag)
	}
	ph.outStream = "BENCH_OUT_" + strings.ToUpper(ph.tag)
	ph.label = name
	if name == "pipeline" {
		ph.label = o.learner
	}
	if rtt > 0 {
		ph.label += "@" + rtt.String()
	}
	return ph
}

// onClose registers f to run at close.
func (ph *phase) onClose(f func()) { ph.closers = append(ph.closers, f) }

// close runs the closers, last registered first.
func (ph *phase) close() {
	for i := len(ph.closers) - 1; i >= 0; i-- {
		ph.closers[i]()
	}
}

// connect opens the three connections, the processor's through the
// delaying proxy when the phase has a round trip.
func (ph *phase) connect() error {
	pconn := ph.o.conn
	if ph.rtt > 0 {
		target, err := hostPort(ph.o.conn.URL)
		if err != nil {
			return err
		}
		if ph.px, err = newDelayProxy(target, ph.rtt/2); err != nil {
			return err
		}
		ph.onClose(func() { ph.px.Close() })
		if pconn.URL, err = withHost(ph.o.conn.URL, ph.px.Addr()); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		dst  **nats.Conn
		conn natsconn.Settings
		name string
	}{{&ph.nc, pconn, "kpcastream-bench-" + ph.name}, {&ph.rc, ph.o.conn, "kpcastream-bench-receiver"}, {&ph.pc, ph.o.conn, "kpcastream-bench-publisher"}} {
		nc, err := natsconn.Connect(c.conn, natsconn.Conn{Name: c.name})
		if err != nil {
			return err
		}
		*c.dst = nc
		ph.onClose(nc.Close)
	}
	return nil
}

// setup subscribes the receiver, creates the phase's streams (deleted at
// close) and the generator.
func (ph *phase) setup(ctx context.Context) error {
	o := ph.o
	ph.recv = newReceiver(o.count)
	if o.cpuprofile != "" && o.profWindow {
		ph.recv.prof.path = o.cpuprofile + "." + ph.label
	}
	outs := ph.outSubj + ".*"
	if o.shards > 1 {
		outs = ph.outSubj + ".*.*" // <out>.<shard>.<key>
	}
	sub, err := ph.rc.Subscribe(outs, ph.recv.handle)
	if err != nil {
		return err
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := ph.rc.Flush(); err != nil {
		return err
	}
	if ph.pjs, err = jetstream.New(ph.pc); err != nil {
		return err
	}
	if err := ph.createStreams(ctx); err != nil {
		return err
	}
	ph.pub = &benchPublisher{o: o, nc: ph.pc, tag: ph.tag, data: benchData{rng: rand.New(rand.NewPCG(o.seed, 7)), stream: o.stream}}
	ph.pub.enc, _ = codec.ParseEncoding(o.encoding)
	if !o.core {
		if ph.pub.acks, err = newAckPublisher(ph.pc, 4096); err != nil {
			return err
		}
		ph.onClose(ph.pub.acks.close)
	}
	return nil
}

// createStreams creates the input stream (JetStream input) and the output
// stream (--output jetstream), replacing leftovers of an earlier run;
// they are deleted at close.
func (ph *phase) createStreams(ctx context.Context) error {
	o := ph.o
	st := jetstream.FileStorage
	if o.storage == "memory" {
		st = jetstream.MemoryStorage
	}
	var streams []string
	ph.onClose(func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		for _, n := range streams {
			_ = ph.pjs.DeleteStream(dctx, n)
		}
	})
	create := func(cfg jetstream.StreamConfig) error {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_ = ph.pjs.DeleteStream(sctx, cfg.Name)
		if _, err := ph.pjs.CreateStream(sctx, cfg); err != nil {
			return fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		streams = append(streams, cfg.Name)
		return nil
	}
	pc := ph.pipelineConfig()
	if !o.core {
		if src, dst := pc.ShardMapping(); src != "" && o.mapSubject != nil {
			if err := o.mapSubject(src, dst); err != nil {
				return fmt.Errorf("subject mapping %s → %s: %w", src, dst, err)
			}
		}
		for _, sc := range pc.InputStreamConfigs() {
			sc.Storage = st
			if err := create(sc); err != nil {
				return err
			}
		}
	}
	if o.output == "jetstream" {
		// As deployed: a stream captures the outputs and drops a replayed
		// one by its Nats-Msg-Id; the processor then publishes with
		// JetStream and waits for each PubAck. With shards, one per shard.
		for s, name := range ph.outStreams() {
			sc := jetstream.StreamConfig{Name: name, Subjects: []string{ph.outSubject(s) + ".*"},
				Storage: st, Duplicates: 2 * time.Minute, AllowBatchPublish: o.keyFlight > 1, Replicas: o.replicas}
			if t := o.tag(s); t != "" {
				sc.Placement = &jetstream.Placement{Tags: []string{t}}
			}
			if err := create(sc); err != nil {
				return err
			}
		}
	}
	return nil
}

// tag returns the placement tag of stream s of a phase ("" for none).
func (o benchOptions) tag(s int) string {
	if len(o.tags) == 0 {
		return ""
	}
	return o.tags[s%len(o.tags)]
}

// pipelineConfig is the phase's pipeline as the processor runs it (its
// input streams, partitions and shards also shape the raw relay's).
func (ph *phase) pipelineConfig() processor.PipelineConfig {
	o := ph.o
	out := ph.outSubj + ".{key}"
	if o.shards > 1 {
		out = ph.outSubj + ".{shard}.{key}"
	}
	pc := processor.PipelineConfig{
		Name:       "bench",
		Partitions: o.partitions,
		Input:      processor.InputConfig{Stream: ph.stream, Subject: ph.inSubj, MaxAckPending: o.maxAck, Shards: o.shards, Replicas: o.replicas},
		Output:     processor.OutputConfig{Subject: out, Window: o.window, KeyInFlight: o.keyFlight},
		Snapshot:   processor.SnapshotPolicy{EveryMessages: o.snapEvery},
	}
	if len(o.tags) > 0 {
		for s := range max(1, o.shards) {
			pc.Input.ShardTags = append(pc.Input.ShardTags, []string{o.tag(s)})
		}
	}
	return pc.WithDefaults()
}

// outStreams returns the phase's output streams: one per shard.
func (ph *phase) outStreams() []string {
	if ph.o.shards <= 1 {
		return []string{ph.outStream}
	}
	var out []string
	for s := range ph.o.shards {
		out = append(out, ph.outStream+"-"+strconv.Itoa(s))
	}
	return out
}

// outSubject returns the output subject prefix of shard s: <out>, or
// <out>.<s> with several shards.
func (ph *phase) outSubject(s int) string {
	if ph.o.shards <= 1 {
		return ph.outSubj
	}
	return ph.outSubj + "." + strconv.Itoa(s)
}

// preload publishes the warm-up and the measured messages into the input
// stream before the processor starts (JetStream input at full speed).
func (ph *phase) preload(ctx context.Context, res *phaseResult) error {
	o := ph.o
	fmt.Fprintf(ph.stderr, "%s: preloading %d messages…\n", ph.label, o.keys*o.warmup+o.count)
	t0 := time.Now()
	if err := ph.pub.publish(ctx, true, 0); err != nil {
		return err
	}
	if err := ph.pub.publish(ctx, false, 0); err != nil {
		return err
	}
	res.pubRate = float64(o.keys*o.warmup+o.count) / time.Since(t0).Seconds()
	return nil
}

// start starts the raw relay or the processor (and waits until it is
// ready); stop stops it, once.
func (ph *phase) start(ctx context.Context) error {
	ph.onClose(func() { _ = ph.stop() })
	o := ph.o
	if ph.name == "raw" {
		// One relay per input stream (shard), as the processor has one
		// consumer per partition on its shard's stream.
		var rs []*rawRelay
		stopAll := func() error {
			var errs []error
			for _, r := range rs {
				errs = append(errs, r.stop(60*time.Second))
			}
			return errors.Join(errs...)
		}
		for s, name := range ph.pipelineConfig().InputStreams() {
			r, err := startRaw(ctx, ph.nc, rawConfig{stream: name, subject: ph.outSubject(s), k: o.components, window: o.window,
				maxAck: o.maxAck, pull: pullBatch(o.maxAck, o.queueSize), coreOut: o.output == "core"})
			if err != nil {
				_ = stopAll()
				return err
			}
			rs = append(rs, r)
		}
		ph.stopRun = stopAll
		return nil
	}
	pctx, stopPipe := context.WithCancel(ctx)
	ph.onClose(stopPipe)
	pipeDone := make(chan error, 1)
	lc, newLearner := o.learnerConfig(), learners.New
	if ph.name == "bare" {
		// The pass learner ignores the kind; the processor still validates
		// the pipeline's learner config, and --learner is not checked in
		// --mode bare.
		lc.Learner, newLearner = learners.KindIKPCA, newPassLearner
	}
	ph.reg = prometheus.NewRegistry()
	p, cleanup, err := newBenchProcessor(ctx, o, ph.nc, ph.pipelineConfig(), lc, newLearner, ph.reg)
	if err != nil {
		return err
	}
	ph.onClose(cleanup)
	ph.proc = p
	// The key figures cover the measured window: from the first measured
	// output (its stats read then) to the end of the phase.
	ph.recv.mu.Lock()
	ph.recv.onFirst = func(at time.Time) { ph.stats0, ph.local0, ph.t0 = benchStats(p), localCounts(ph.reg), at }
	ph.recv.mu.Unlock()
	go func() { pipeDone <- p.Run(pctx) }()
	ph.stopRun = func() error {
		stopPipe()
		select {
		case err := <-pipeDone:
			return err
		case <-time.After(60 * time.Second):
			return errors.New("pipeline did not stop within 60s")
		}
	}
	if o.watch {
		stopWatch, err := benchWatch(pctx, p, "bench", "k0", ph.stderr)
		if err != nil {
			return err
		}
		ph.onClose(stopWatch)
	}
	// Core NATS drops what is published before the subscription exists.
	deadline := time.Now().Add(30 * time.Second)
	for !p.Ready() {
		select {
		case err := <-pipeDone:
			ph.stopped = true
			return fmt.Errorf("processor stopped before it was ready: %w", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("processor not ready after 30s")
		}
	}
	return nil
}

// stop stops the relay or the processor; only the first call does.
func (ph *phase) stop() error {
	if ph.stopped || ph.stopRun == nil {
		return nil
	}
	ph.stopped = true
	return ph.stopRun()
}

// warmThenPublish publishes the warm-up, waits until every key has
// produced its last warm-up output (so that the measured messages all
// find a ready learner), then publishes the measured messages at --rate.
func (ph *phase) warmThenPublish(ctx context.Context, res *phaseResult) error {
	o, recv := ph.o, ph.recv
	if err := ph.pub.publish(ctx, true, 0); err != nil {
		return err
	}
	if err := waitFor(ctx, recv, o.timeout, func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return recv.warmDone >= o.keys
	}); err != nil {
		recv.mu.Lock()
		n := recv.warmDone
		recv.mu.Unlock()
		return fmt.Errorf("warm-up: %d of %d keys produced an output after %d messages each (learner not ready? raise --warmup): %w",
			n, o.keys, o.warmup, err)
	}
	t0 := time.Now()
	if err := ph.pub.publish(ctx, false, o.rate); err != nil {
		return err
	}
	res.pubRate = float64(o.count) / time.Since(t0).Seconds()
	res.pacing = ph.pub.pacing
	return nil
}

// collect copies the receiver's measurements (and the proxy's lateness)
// into res; werr is the end of the wait for the outputs.
func (ph *phase) collect(res *phaseResult, werr error) {
	recv := ph.recv
	recv.mu.Lock()
	res.received = recv.got
	res.capped = recv.capped
	last := recv.last
	if werr != nil {
		res.lost = ph.o.count - recv.got
		recv.endWindow()
	}
	res.elapsed = last.Sub(recv.first)
	res.cpu = recv.cpu1 - recv.cpu0
	res.runDelay = -1
	if recv.rd0 >= 0 && recv.rd1 >= 0 {
		res.runDelay = recv.rd1 - recv.rd0
	}
	res.sched = recv.sched
	res.p50, res.p99, res.p999, res.max = recv.hist.quantile(0.5), recv.hist.quantile(0.99), recv.hist.quantile(0.999), recv.hist.max
	recv.mu.Unlock()
	res.rss, res.peak, _ = procstat.ProcessRSS()
	recv.mu.Lock()
	t0 := ph.t0
	recv.mu.Unlock()
	if ph.proc != nil && !t0.IsZero() {
		s1 := benchStats(ph.proc)
		secs := time.Since(t0).Seconds()
		res.keys = &keyStats{keys: s1.Learners, disk: s1.LocalKeys, diskBytes: s1.LocalBytes, memory: s1.MemoryUsed,
			evictions: float64(s1.Evictions-ph.stats0.Evictions) / secs, kvWrites: float64(s1.KVWrites-ph.stats0.KVWrites) / secs}
		res.keys.schedBound = scheduleBound(ph.pipelineConfig(), s1.Learners, float64(s1.In-ph.stats0.In)/secs)
		l1 := localCounts(ph.reg)
		res.keys.localReads, res.keys.localWrites = (l1[0]-ph.local0[0])/secs, (l1[1]-ph.local0[1])/secs
		res.keys.rssSplit()
		res.keys.liveHeap()
	}
	if ph.px != nil {
		p50, p99, mx, n := ph.px.Lateness()
		ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
		res.proxyLate = fmt.Sprintf("proxy writes left late by p50 %s ms, p99 %s ms, max %s ms (%d writes, whole phase)", ms(p50), ms(p99), ms(mx), n)
	}
}

// checkStored checks that the output stream (--output jetstream) holds
// every output once.
func (ph *phase) checkStored(ctx context.Context, res *phaseResult, werr error) error {
	res.stored = -1
	o := ph.o
	if o.output != "jetstream" {
		return nil
	}
	res.stored = 0
	for _, name := range ph.outStreams() {
		n, err := streamMsgs(ctx, ph.pjs, name)
		if err != nil {
			return err
		}
		res.stored += n
	}
	// Every output once: the raw relay and the pass learner publish one
	// per input, ikpca none until it is ready.
	total := o.keys*o.warmup + o.count
	exact := ph.name != "pipeline" && !o.core && werr == nil && !res.capped
	if res.stored < res.received || res.stored > total || (exact && res.stored != total) {
		return fmt.Errorf("the output stream holds %d messages after %d inputs (%d measured outputs received): want each output once",
			res.stored, total, res.received)
	}
	return nil
}

// streamMsgs returns the number of messages in a stream.
func streamMsgs(ctx context.Context, js jetstream.JetStream, name string) (int, error) {
	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := js.Stream(ictx, name)
	if err != nil {
		return 0, fmt.Errorf("output stream: %w", err)
	}
	info, err := st.Info(ictx)
	if err != nil {
		return 0, fmt.Errorf("output stream: %w", err)
	}
	return int(info.State.Msgs), nil
}

// medianRTT returns the median of n nc.RTT() round trips, 0 if they fail.
func medianRTT(nc *nats.Conn, n int) time.Duration {
	var ds []time.Duration
	for range n {
		d, err := nc.RTT()
		if err != nil {
			return 0
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// hostPort returns the host:port of the first server of a NATS URL list
// (default port 4222).
func hostPort(u string) (string, error) {
	pu, err := firstURL(u)
	if err != nil {
		return "", err
	}
	port := pu.Port()
	if port == "" {
		port = "4222"
	}
	return net.JoinHostPort(pu.Hostname(), port), nil
}

// withHost returns the first server of a NATS URL list with its host and
// port replaced by addr (user information and scheme kept).
func withHost(u, addr string) (string, error) {
	pu, err := firstURL(u)
	if err != nil {
		return "", err
	}
	pu.Host = addr
	return pu.String(), nil
}

// firstURL parses the first server of a NATS URL list ("nats://" when it
// names no scheme).
func firstURL(u string) (*url.URL, error) {
	first := strings.TrimSpace(strings.Split(u, ",")[0])
	if !strings.Contains(first, "://") {
		first = "nats://" + first
	}
	pu, err := url.Parse(first)
	if err != nil {
		return nil, fmt.Errorf("--rtt: cannot read the server URL: %w", err)
	}
	return pu, nil
}

// waitFor polls cond until it holds, ctx ends, or no output has arrived for idle.
func waitFor(ctx context.Context, r *receiver, idle time.Duration, cond func() bool) error {
	start := time.Now().UnixNano()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		last := max(r.lastSeen.Load(), start)
		if time.Since(time.Unix(0, last)) > idle {
			return fmt.Errorf("no output for %v", idle)
		}
	}
	return nil
}

// benchPublisher publishes the synthetic stream: keys round-robin, each
// observation with an ID marking its phase and TS = the publish time. One
// message, header and payload buffer serve the whole stream (core
// publishes copy them into the connection's buffer before they return);
// what goes on the wire per message is the same as with a fresh message:
// subject, Content-Type header, payload, and (JetStream) a reply subject
// for the PubAck.
type benchPublisher struct {
	o      benchOptions
	nc     *nats.Conn
	acks   *ackPublisher // JetStream input; nil for core NATS
	tag    string
	enc    codec.Encoding
	data   benchData
	msg    *nats.Msg
	pacing string // summary of the last paced publish
}

// publish sends the warm-up messages (warm-up per key) or the measured
// ones, at rate msgs/s (0: as fast as possible), paced by a pacer.
func (p *benchPublisher) publish(ctx context.Context, warm bool, rate float64) error {
	o := p.o
	n := o.count
	if warm {
		n = o.warmup * o.keys
	}
	subjects := make([]string, o.keys)
	for k := range subjects {
		subjects[k] = "bench." + p.tag + ".in.k" + strconv.Itoa(k)
	}
	if p.msg == nil {
		p.msg = &nats.Msg{Header: nats.Header{processor.HeaderContentType: {p.enc.ContentType()}}}
	}
	m := p.msg
	obs := []codec.Observation{{X: make([]float64, o.dim)}}
	var pace *pacer
	if rate > 0 {
		var err error
		if pace, err = newPacer(rate, o.pace); err != nil {
			return err
		}
	}
	for i := range n {
		if pace != nil {
			pace.wait(i)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.data.next(obs[0].X)
		obs[0].ID = idMeasured
		if warm {
			obs[0].ID = idWarm
			if i >= n-o.keys {
				obs[0].ID = idWarmLast
			}
		}
		obs[0].TS = float64(time.Now().UnixNano()) / 1e9
		data, err := codec.EncodeObservations(m.Data[:0], p.enc, obs)
		if err != nil {
			return err
		}
		m.Subject, m.Data = subjects[i%o.keys], data
		if p.acks == nil {
			if err := p.nc.PublishMsg(m); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			continue
		}
		if err := p.acks.publish(ctx, m); err != nil {
			return err
		}
	}
	if pace != nil {
		p.pacing = pace.summary(n)
	}
	if p.acks == nil {
		return p.nc.FlushTimeout(30 * time.Second)
	}
	return p.acks.wait(ctx, 60*time.Second)
}

// newBenchProcessor builds the pipeline of a phase: processor defaults
// except the input (the bench stream, or core NATS), the learner (made by
// newLearner: learners.New, or the baseline's pass learner), the output subject,
// and its KV buckets (snapshots, large states, checkpoints), which are
// fresh for each run so that a run against a server that already saw one
// (--nats-url) does not restore the last run's learners and skip its
// messages. cleanup deletes them; call it after the processor stopped.
func newBenchProcessor(ctx context.Context, o benchOptions, nc *nats.Conn, pc processor.PipelineConfig, lc learners.Config,
	newLearner func(learners.Config) (learners.Learner, error), reg *prometheus.Registry) (p *processor.Processor, cleanup func(), err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	snapCfg := snapshot.Config{Bucket: "kpcastream-bench-snap-" + run, ObjectBucket: "kpcastream-bench-state-" + run}
	ckpt := "kpcastream-bench-ckpt-" + run
	cleanup = func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(dctx, snapCfg.Bucket)
		_ = js.DeleteObjectStore(dctx, snapCfg.ObjectBucket)
		_ = js.DeleteKeyValue(dctx, ckpt)
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	store, err := snapshot.Open(octx, js, snapCfg)
	cancel()
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("snapshot store: %w", err)
	}
	localDir := ""
	if o.local {
		if localDir, err = os.MkdirTemp("", "kpcastream-bench-local-"); err != nil {
			cleanup()
			return nil, nil, err
		}
		prev := cleanup
		cleanup = func() { prev(); _ = os.RemoveAll(localDir) }
	}
	cfg := processor.Config{
		LocalDir:         localDir,
		Workers:          o.workers,
		QueueSize:        o.queueSize,
		ServiceName:      "kpcastream-bench",
		CheckpointBucket: ckpt,
		Pipelines:        []processor.PipelineConfig{pc},
	}
	cfg.Pipelines[0].Learner = lc
	cfg.Pipelines[0].MemoryBudget = o.memBytes
	prevLimit := debug.SetMemoryLimit(-1)
	if err := setMemoryLimit(o.memLimit, cfg); err != nil {
		cleanup()
		return nil, nil, err
	}
	if o.memLimit != "" {
		prev := cleanup
		cleanup = func() { prev(); debug.SetMemoryLimit(prevLimit) }
	}
	if o.procBytes > 0 {
		if err := governProcessMemory(ctx, o.procBytes, cfg, reg, &cleanup, prevLimit); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	p, err = processor.New(cfg, processor.Deps{Conn: nc, JS: js, Snapshots: store, NewLearner: newLearner, Registry: reg})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return p, cleanup, nil
}

// progressBar draws "[=====>    ] 45% 4500/10000 12.3k msgs/s" on w.
type progressBar struct {
	once sync.Once
	quit chan struct{}
	done chan struct{}
}

func newProgressBar(w io.Writer, name string, every time.Duration, total int, n *atomic.Int64) *progressBar {
	b := &progressBar{quit: make(chan struct{}), done: make(chan struct{})}
	if every <= 0 {
		close(b.done)
		return b
	}
	// On a terminal the bar redraws itself with \r; elsewhere (a log, CI)
	// it is a line every 5 s at most, and the final one.
	tty := term.IsTerminal(w)
	lead, end := "\r", ""
	if !tty {
		lead, end, every = "", "\n", max(every, 5*time.Second)
	}
	go func() {
		defer close(b.done)
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		var prev int64
		prevT := start
		draw := func(final bool) {
			cur := n.Load()
			now := time.Now()
			r := float64(cur-prev) / now.Sub(prevT).Seconds()
			if final {
				r = float64(cur) / now.Sub(start).Seconds()
			}
			prev, prevT = cur, now
			const width = 30
			filled := int(float64(width) * float64(cur) / float64(total))
			filled = min(max(filled, 0), width)
			bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
			if filled > 0 && filled < width {
				bar = bar[:filled-1] + ">" + bar[filled:]
			}
			fmt.Fprintf(w, "%s%-8s [%s] %3.0f%% %d/%d %s msgs/s %s", lead, name, bar, 100*float64(cur)/float64(total), cur, total, human(r), end)
		}
		for {
			select {
			case <-b.quit:
				draw(true)
				if tty {
					fmt.Fprintln(w)
				}
				return
			case <-t.C:
				draw(false)
			}
		}
	}()
	return b
}

func (b *progressBar) stop() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

// human formats a rate as 12.3k or 1.2M.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// cpuPerMsg returns the process CPU per measured output in µs.
func (r *phaseResult) cpuPerMsg() float64 {
	if r.received < 2 {
		return 0
	}
	return float64(r.cpu.Nanoseconds()) / 1e3 / float64(r.received-1)
}

// cpuNote says whose CPU the figures count.
func cpuNote(o benchOptions) string {
	if o.embedded {
		return "cpu: this process, the embedded server's work included"
	}
	return "cpu: this process only (generator, receiver, processor or raw relay, proxy; not the server's)"
}

// printSummary writes the headline table: every phase's msgs/s as a
// ratio to the raw baseline at the same round trip and to itself without
// one, and its CPU per message over the raw baseline's.
func printSummary(w io.Writer, o benchOptions, rs []*phaseResult) {
	find := func(phase string, rtt time.Duration) *phaseResult {
		for _, r := range rs {
			if r.phase == phase && r.rtt == rtt {
				return r
			}
		}
		return nil
	}
	ratio := func(a, b float64) string {
		if a <= 0 || b <= 0 {
			return "-"
		}
		return strconv.FormatFloat(a/b, 'f', 2, 64)
	}
	fmt.Fprintf(w, "%-14s %6s %9s %10s %8s %10s %11s %14s %8s %9s\n",
		"phase", "rtt", "rtt seen", "msgs/s", "× raw", "× no rtt", "cpu µs/msg", "cpu over raw", "rss MiB", "outputs")
	for _, r := range rs {
		rtt := "0"
		if r.rtt > 0 {
			rtt = r.rtt.String()
		}
		xraw, over := "-", "-"
		if raw := find("raw", r.rtt); raw != nil {
			xraw = ratio(r.rate(), raw.rate())
			if raw.received > 1 && r.received > 1 {
				over = strconv.FormatFloat(r.cpuPerMsg()-raw.cpuPerMsg(), 'f', 1, 64)
			}
		}
		xnod := "-"
		if base := find(r.phase, 0); base != nil {
			xnod = ratio(r.rate(), base.rate())
		}
		outputs := strconv.Itoa(r.received)
		if r.capped {
			outputs += "*"
		}
		fmt.Fprintf(w, "%-14s %6s %9s %10.0f %8s %10s %11.1f %14s %8.1f %9s\n", r.name, rtt,
			strconv.FormatFloat(float64(r.rttSeen)/1e6, 'f', 2, 64)+"ms", r.rate(), xraw, xnod, r.cpuPerMsg(), over,
			float64(r.rss)/(1<<20), outputs)
	}
	for _, r := range rs {
		if r.proxyLate != "" {
			fmt.Fprintf(w, "%-14s %s\n", r.name, r.proxyLate)
		}
	}
	rawNote := "raw = nats.go consume → async JetStream publish → ack after the PubAck, no processor;"
	if o.output == "core" {
		rawNote = "raw = nats.go consume → core publish → ack, no processor;"
	}
	fmt.Fprintln(w, rawNote, "bare = the processor with a pass-through learner;",
		"× raw: msgs/s over the raw baseline's at the same rtt; × no rtt: over the same phase's at rtt 0;",
		"rtt seen: median nats RTT of the phase's connection (through the delaying proxy when rtt > 0);",
		cpuNote(o)+", first to last measured output; cpu over raw: µs/msg more than the raw baseline's;",
		"outputs: measured outputs (* the window ended at --duration)")
	fmt.Fprintln(w)
}

func printResults(w io.Writer, o benchOptions, rs []*phaseResult) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	printSummary(w, o, rs)
	fmt.Fprintf(w, "%-12s %10s %10s %9s %9s %9s %9s %11s %7s %8s %9s %8s %8s\n",
		"pipeline", "msgs/s", "publish/s", "p50 ms", "p99 ms", "p999 ms", "max ms", "cpu µs/msg", "cpu %", "rss MiB", "peak MiB", "lost", "stored")
	for _, r := range rs {
		cpuPer, cpuPct := r.cpuPerMsg(), 0.0
		if r.elapsed > 0 {
			cpuPct = 100 * r.cpu.Seconds() / r.elapsed.Seconds()
		}
		stored := "-"
		if r.stored >= 0 {
			stored = strconv.Itoa(r.stored)
		}
		fmt.Fprintf(w, "%-12s %10.0f %10.0f %9s %9s %9s %9s %11.1f %7.0f %8.1f %9.1f %8d %8s\n", r.name, r.rate(), r.pubRate,
			ms(r.p50), ms(r.p99), ms(r.p999), ms(r.max), cpuPer, cpuPct, float64(r.rss)/(1<<20), float64(r.peak)/(1<<20), r.lost, stored)
	}
	fmt.Fprintf(w, "%-12s %12s %11s %10s %11s %10s %9s %9s\n",
		"pipeline", "other cpu %", "runq ms/s", "sched p99", "sched p999", "gc cycles", "gc cpu %", "gc stw ms")
	for _, r := range rs {
		secs := r.elapsed.Seconds()
		if secs <= 0 {
			continue
		}
		other, runq := "?", "?"
		if busy, all := r.sched.machine(); all > 0 {
			// Busy CPU of the machine minus this process's, as a share of one CPU.
			other = strconv.FormatFloat(100*(busy-r.cpu).Seconds()/secs, 'f', 0, 64)
		}
		if r.runDelay >= 0 {
			runq = strconv.FormatFloat(float64(r.runDelay)/1e6/secs, 'f', 1, 64)
		}
		pause, cycles := r.sched.gcPause()
		fmt.Fprintf(w, "%-12s %12s %11s %10s %11s %10d %9.1f %9.2f\n", r.name, other, runq,
			ms(r.sched.latency(0.99)), ms(r.sched.latency(0.999)), cycles, 100*r.sched.gcCPU().Seconds()/secs, float64(pause)/1e6)
	}
	fmt.Fprintln(w, "contention over the measured window: other cpu % = CPU used by other processes (100 = one core);",
		"runq = time this process's threads waited for a CPU (OS run queue) per second;",
		"sched = goroutine wait for a P (Go scheduler); gc cpu % = GC CPU (100 = one core); gc stw = GC pauses in total")
	for _, r := range rs {
		if r.pacing != "" {
			fmt.Fprintf(w, "%-12s %s\n", r.name, r.pacing)
		}
	}
	printKeys(w, o, rs)
	if o.output == "jetstream" {
		fmt.Fprintln(w, "stored: messages in the phase's deduplicating output stream at its end (warm-up outputs included; each output once)")
	}
	if o.rate == 0 && !o.core {
		fmt.Fprintln(w, "latency: publish time to output receipt; at --rate 0 (preloaded, or published as fast as possible with --input concurrent) it includes the time spent queued in the stream")
	}
	var a, b *phaseResult
	for _, r := range rs {
		switch {
		case r.rtt != 0:
		case r.phase == "bare":
			a = r
		case r.phase == "pipeline":
			b = r
		}
	}
	if a != nil && b != nil && a.rate() > 0 {
		fmt.Fprintf(w, "ratio (b)/(a) msgs/s: %.3f\n", b.rate()/a.rate())
	}
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
