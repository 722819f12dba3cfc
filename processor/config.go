package processor

import (
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// Defaults of Config and PipelineConfig.
const (
	DefaultQueueSize        = 64
	DefaultShutdownTimeout  = 10 * time.Second
	DefaultServiceName      = "kpcastream"
	DefaultCheckpointBucket = "kpcastream-checkpoints"
	DefaultCheckpointEvery  = 5 * time.Second
	DefaultLeaseTTL         = 10 * time.Second
	DefaultSnapshotTimeout  = 10 * time.Second
	DefaultMaxAckPending    = 256
	DefaultAckWait          = 30 * time.Second
	DefaultNakDelay         = time.Second
	DefaultOutputSubject    = "kpca.out.{pipeline}.{key}"
	DefaultDeadLetter       = "kpca.dlq.{pipeline}"
	DefaultDuplicates       = 2 * time.Minute
	DefaultOutputWindow     = 256
	// DefaultKeyInFlight is output.key_in_flight when the file leaves it
	// out (at most output.window): outputs of a key go through an ordered
	// lane where the output stream allows batch publishing.
	DefaultKeyInFlight = 128
	// MaxOutputWindow bounds OutputConfig.Window.
	MaxOutputWindow      = 1 << 16
	DefaultEveryMessages = 1000
	DefaultSnapshotEvery = 30 * time.Second
	// DefaultMemoryBudget is PipelineConfig.MemoryBudget when the file
	// leaves it out: 256 MiB of live learners per pipeline.
	DefaultMemoryBudget = 256 << 20
	DefaultMaxBatch     = 1024
	// MaxPartitions bounds PipelineConfig.Partitions.
	MaxPartitions = 1024
	// SingleKey is the partition key of a pipeline whose subject has no key token.
	SingleKey = "_"
)

// DefaultDeadLetterStream is the name template of a pipeline's dead-letter
// stream; DefaultDeadLetterMaxAge and DefaultDeadLetterMaxBytes are its
// limits.
const (
	DefaultDeadLetterStream   = "KPCA_DLQ_{pipeline}"
	DefaultDeadLetterMaxAge   = 7 * 24 * time.Hour
	DefaultDeadLetterMaxBytes = 1 << 30
)

// Config configures a Processor. The zero value of an optional field means
// "use the default" named in its comment.
type Config struct {
	// Workers is the number of worker goroutines; each key is owned by worker
	// hash(key) mod Workers. Default runtime.GOMAXPROCS(0).
	Workers int `yaml:"workers"`
	// QueueSize is the capacity (messages) of each worker's input channel.
	// A full channel blocks the consumer: back-pressure. Default 64.
	QueueSize int `yaml:"queue_size"`
	// ShutdownTimeout bounds each shutdown step (drain, in-flight work, final
	// snapshots, connection drain). Default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ServiceName is the name of the NATS micro service. Default "kpcastream".
	ServiceName string `yaml:"service_name"`
	// CheckpointBucket is the JetStream KV bucket holding each JetStream
	// pipeline's replay checkpoint (the stream sequence from which a restart
	// must replay). Default "kpcastream-checkpoints".
	CheckpointBucket string `yaml:"checkpoint_bucket"`
	// CheckpointEvery is the period of checkpoint writes. Default 5s.
	CheckpointEvery time.Duration `yaml:"checkpoint_every"`
	// CheckpointReplicas is the replica count (1..5) of the checkpoint
	// bucket, applied each time Run starts. Default: the snapshot store's
	// replicas (snapshots.replicas).
	CheckpointReplicas int `yaml:"checkpoint_replicas"`
	// LeaseTTL is how long a JetStream pipeline's consumer lease lasts
	// without renewal; the holder renews it every LeaseTTL/6, and another
	// instance takes it over when it has not changed for LeaseTTL. Default 10s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// OnLeaseHeld is what Run does when another live instance holds a
	// pipeline's consumer lease: "wait" (default: a hot standby, which
	// starts when the lease is released or expires) or "fail" (return an
	// error).
	OnLeaseHeld string `yaml:"on_lease_held"`
	// SnapshotTimeout bounds each snapshot load or save. Default 10s.
	SnapshotTimeout time.Duration `yaml:"snapshot_timeout"`
	// LocalDir is the directory of the local tier (issue 30): the learners
	// of a JetStream pipeline's keys beyond memory_budget go to a file per
	// worker there (named after its pipeline, partition, epoch and worker,
	// created empty and removed when the worker stops), so that they load
	// again with a local read. A cache only: snapshots still go to
	// JetStream on the snapshot policy. "" (the library's default): none,
	// keys beyond memory_budget are snapshotted and unloaded. kpcastream
	// run sets it to <data_dir>/local unless the file says "none". Files
	// left by a crash are removed at start; a running worker's is locked,
	// so instances may share the directory.
	LocalDir string `yaml:"local_dir"`
	// Pipelines are the pipelines to run (at least one).
	Pipelines []PipelineConfig `yaml:"-"`
}

// PipelineConfig configures one pipeline: an input, a partition key, a
// learner per key, an output, a dead-letter subject and a snapshot policy.
type PipelineConfig struct {
	// Name identifies the pipeline in subjects, snapshot keys, metrics and
	// message ids (required; letters, digits, '-' and '_').
	Name string `yaml:"name"`
	// Input is where the observations come from.
	Input InputConfig `yaml:"input"`
	// KeyToken is the zero-based index of the subject token that holds the
	// partition key. Default: the first '*' token of Input.Subject; with no
	// '*' there is one key, "_".
	KeyToken *int `yaml:"key_token"`
	// Learner configures each key's learner.
	Learner learners.Config `yaml:"learner"`
	// Output is where projections go.
	Output OutputConfig `yaml:"output"`
	// DeadLetter is the subject template of rejected inputs ({pipeline},
	// {key} and {shard}, the input shard of the key, are replaced; with
	// {shard} and several shards, each shard's dead letters get a stream
	// of their own). Default "kpca.dlq.{pipeline}".
	DeadLetter string `yaml:"dead_letter"`
	// DeadLetters is the stream that stores the dead letters.
	DeadLetters DeadLetterConfig `yaml:"dead_letters"`
	// Snapshot is the snapshot policy.
	Snapshot SnapshotPolicy `yaml:"snapshot"`
	// MemoryBudget bounds the memory of the pipeline's live learners on
	// this instance, in bytes: each partition's workers share
	// MemoryBudget/partitions, and a worker holds as many keys as fit in
	// its share, each of the size its configuration fixes (learner,
	// classifier stage, monitor; MemoryPlan, "kpcastream lint"); the least
	// recently used one is snapshotted and unloaded to make room. Default
	// 256 MiB.
	MemoryBudget int64 `yaml:"memory_budget"`
	// MaxKeys, when > 0, also caps the number of live learners of the
	// pipeline (spread like MemoryBudget). Default 0: no cap beyond
	// MemoryBudget. (Before issue 30 it was the only bound, 1024 by
	// default.)
	MaxKeys int `yaml:"max_keys"`
	// MaxBatch bounds the observations of one message (codec limit). Default 1024.
	MaxBatch int `yaml:"max_batch"`
	// Partitions splits a JetStream input into this many partitions, the
	// unit of ownership and of the replay checkpoint: a partition is owned
	// by one instance at a time (fenced by an epoch, see doc.go), and the
	// instances alive share the partitions by rendezvous hashing. A key's
	// partition is FNV-1a(key) mod Partitions, computed by the input
	// stream's subject transform {{partition(n,…)}}, which appends the
	// partition number as a last token to the stored subject. Fixed when
	// the stream is created (create_stream creates it with the transform;
	// an existing stream must have it). Default 1: no transform, the stream
	// is one partition.
	Partitions int `yaml:"partitions"`
	// Classifier adds a classifier stage trained on the observations'
	// labels y (see ClassifierConfig); nil: none.
	Classifier *ClassifierConfig `yaml:"classifier"`
	// Monitor adds control limits, alarms and gated learning per key (see
	// MonitorConfig); nil: none (outputs carry no limits, every
	// observation is learned, as before).
	Monitor *MonitorConfig `yaml:"monitor"`
	// Preprocess standardises each key's inputs (see PreprocessConfig);
	// nil: none.
	Preprocess *PreprocessConfig `yaml:"preprocess"`
}

// MonitorConfig is a pipeline's monitoring (learners/monitor): per key,
// SPE and T² control limits (empirical quantiles of a sliding window of
// normal observations), an alarm on each output above them, and
// optionally gated learning. Zero values mean the defaults.
type MonitorConfig struct {
	// Level of the limits, in (0, 1). Default 0.99.
	Level float64 `yaml:"level"`
	// Learn is "always" (default: learn every observation, then score it)
	// or "normal" (score first, learn only observations within the
	// limits, after the warm-up; alarmed ones are still published).
	Learn string `yaml:"learn"`
	// Warmup is the number of observations learned unconditionally before
	// the limits are in force: rows known to be normal (a fault among them
	// is learned as normal). Default 2 × learner.budget, at least 100 and
	// at most 200. Until it ends, outputs carry "warmup": true and no
	// limits.
	Warmup int `yaml:"warmup"`
	// AcceptAfter: with learn normal, after this many consecutive alarmed
	// observations the key accepts the new regime and starts a new
	// warm-up (an observation held by the trend gate without an alarm
	// ends the run). Default 0: never.
	AcceptAfter int `yaml:"accept_after"`
	// Confirm: with learn normal, an observation within the limits is
	// learned once this many later observations raised no alarm. Default 10.
	Confirm int `yaml:"confirm"`
	// Window is the number of recent normal observations whose statistics
	// give the limits. Default 10/(1 − level), at least 100 (1,000 at
	// 0.99); memory 32 bytes per observation and key.
	Window int `yaml:"window"`
	// Trend is learn normal's trend gate: "ewma" (default: an observation
	// within the limits is not learned while the EWMA of its SPE's rank in
	// the limit window is out of its limit — a slow fault is not absorbed)
	// or "off" (learn every observation within the limits).
	Trend string `yaml:"trend"`
	// TrendLambda is the weight in (0, 1] of the trend gate's EWMA.
	// Default 2/(n + 1) with n = 1/(1 − level) (0.0198 at 0.99).
	TrendLambda float64 `yaml:"trend_lambda"`
	// Excursion: with learn normal, the largest run of alarms that is
	// still learned as a normal excursion (an autocorrelated process
	// leaving its learned range for a while) once 2 × confirm observations
	// without alarm follow it; a longer run is a fault and is not learned.
	// Default 50; negative: none (every alarm discards what is pending).
	Excursion int `yaml:"excursion"`
	// Linear also monitors a linear residual: the residual of a running
	// linear PCA (learner.components components, at most dim − 1) of the
	// learned inputs, judged by its largest variable's reconstruction-based
	// contribution ("lspe") and by a per-variable EWMA of it (slow drifts
	// of one variable), each with its own limit; above either, the output
	// has an "spe" alarm and carries "lspe" and "lspe_limit". It sees a
	// fault in one variable among many, which barely moves an RBF kernel.
	// With it T² and lspe share the limits' 1 − level (each at
	// 1 − (1 − level)/2). Default: on when 2 ≤ dim ≤ 128 (issue 31; before,
	// off); false switches it off, true asks for it up to dim 512. Memory
	// about 24·dim² bytes per key.
	Linear *bool `yaml:"linear"`
}

// PreprocessConfig is a pipeline's preprocessing of the inputs.
type PreprocessConfig struct {
	// Standardize centres and scales each variable by the running mean and
	// standard deviation of the key's learned observations (with
	// learner.forget); the first warm-up/2 observations are held back
	// until the statistics settle. Saved in the snapshot and in the model
	// export's preprocess section.
	Standardize bool `yaml:"standardize"`
	// Freeze stops the statistics at the end of the monitor's warm-up.
	// Default: frozen when learner.forget is 1 (a learner that never
	// forgets keeps its points in the frame they were learned in), moving
	// with the learner's forgetting otherwise.
	Freeze *bool `yaml:"freeze"`
}

// monitorConfig returns the monitor configuration of p (after defaults)
// and whether p has monitoring or preprocessing at all.
func (p PipelineConfig) monitorConfig() (monitor.Config, bool) {
	if p.Monitor == nil && p.Preprocess == nil {
		return monitor.Config{}, false
	}
	lc := p.Learner.WithDefaults()
	var c monitor.Config
	if m := p.Monitor; m != nil {
		c = monitor.Config{Level: m.Level, Learn: m.Learn, Warmup: m.Warmup, AcceptAfter: m.AcceptAfter, Confirm: m.Confirm, Window: m.Window,
			Trend: m.Trend, TrendLambda: m.TrendLambda, Linear: monitor.DefaultLinear(lc.Dim), Excursion: m.Excursion}
		if m.Linear != nil {
			c.Linear = *m.Linear
		}
		if c.Linear {
			c.LinearComponents = min(lc.Components, lc.Dim-1)
		}
	}
	if pp := p.Preprocess; pp != nil {
		c.Standardize = pp.Standardize
		switch {
		case pp.Freeze != nil:
			c.Freeze = *pp.Freeze
		case pp.Standardize:
			c.Freeze = monitor.DefaultFreeze(lc.Forget)
		}
	}
	c.Dim, c.Forget = lc.Dim, lc.Forget
	return c.WithDefaults(lc.Budget), true
}

// InputConfig is a pipeline's input: a JetStream stream (durable pull
// consumer) when Stream is set, else a core NATS subscription.
type InputConfig struct {
	// Stream is the JetStream stream name; empty selects core NATS.
	Stream string `yaml:"stream"`
	// Subject is the subject filter, e.g. "sensors.*.features" (required).
	Subject string `yaml:"subject"`
	// CreateStream creates Stream with Subject when it does not exist,
	// with Replicas, MaxAge and MaxBytes. An existing stream is left as it is.
	CreateStream bool `yaml:"create_stream"`
	// Replicas is the replica count (1..5) of a created stream. Default 1.
	Replicas int `yaml:"replicas"`
	// MaxAge is the age limit of a created stream's messages; 0: none.
	// It must exceed the replay span (see deploy/README.md).
	MaxAge time.Duration `yaml:"max_age"`
	// MaxBytes is the size limit (bytes) of a created stream, oldest
	// messages discarded first; 0: none.
	MaxBytes int64 `yaml:"max_bytes"`
	// Durable is the durable consumer name. Default "kpcastream-<pipeline>".
	Durable string `yaml:"durable"`
	// MaxAckPending bounds unacknowledged deliveries. Default 256.
	MaxAckPending int `yaml:"max_ack_pending"`
	// AckWait is the redelivery timeout of an unacknowledged message. Default 30s.
	AckWait time.Duration `yaml:"ack_wait"`
	// NakDelay is the redelivery delay after a transient failure. Default 1s.
	NakDelay time.Duration `yaml:"nak_delay"`
	// QueueGroup is the queue group of a core NATS input (optional).
	QueueGroup string `yaml:"queue_group"`
	// Shards spreads the partitions over this many streams (shards.go):
	// partition p is stored in shard p mod Shards. 1 (the default): the
	// one stream Stream, partitioned by its subject transform, exactly as
	// before. More than 1: the streams <Stream>-0 … <Stream>-<Shards-1>,
	// each capturing the subjects <Subject>.<p> of its partitions; the
	// servers partition the input subject with an account subject mapping
	// (the same {{partition(N,k)}} transform). At most Partitions; fixed
	// once the pipeline ran (a change is refused: README, Sharding).
	Shards int `yaml:"shards"`
	// ShardTags are the placement tags of each created stream, one list
	// per shard (Shards lists; empty: the cluster places them).
	ShardTags [][]string `yaml:"shard_tags"`
}

// OutputConfig is a pipeline's output.
type OutputConfig struct {
	// Subject is the output subject template; {pipeline}, {key} and
	// {shard} (the input shard of the key's partition, input.shards) are
	// replaced. With {shard} and several shards, create_stream creates
	// one stream per shard (<stream>-<shard>), so the outputs follow the
	// input's shards. Default "kpca.out.{pipeline}.{key}".
	Subject string `yaml:"subject"`
	// Encoding is "json", "msgpack", or empty for the input's encoding.
	Encoding string `yaml:"encoding"`
	// Stream, when CreateStream is set, names a stream created to capture
	// the output subjects with a Duplicates window, so replayed outputs are
	// deduplicated by their Nats-Msg-Id. Outputs are published with
	// JetStream whenever some stream captures them, else with core NATS.
	Stream string `yaml:"stream"`
	// CreateStream creates Stream when it does not exist, with Duplicates,
	// Replicas, MaxAge and MaxBytes. An existing stream is left as it is.
	CreateStream bool `yaml:"create_stream"`
	// Replicas is the replica count (1..5) of a created stream. Default 1.
	Replicas int `yaml:"replicas"`
	// MaxAge is the age limit of a created stream's messages; 0: none.
	// It must be at least Duplicates.
	MaxAge time.Duration `yaml:"max_age"`
	// MaxBytes is the size limit (bytes) of a created stream, oldest
	// messages discarded first; 0: none.
	MaxBytes int64 `yaml:"max_bytes"`
	// Duplicates is the deduplication window of a created output stream. Default 2m.
	Duplicates time.Duration `yaml:"duplicates"`
	// Window bounds the outputs of one partition that a JetStream output
	// stream has not acknowledged yet (published and waiting for their
	// PubAck, or queued behind an earlier output of their key), split
	// evenly over the partition's workers. Outputs are published
	// asynchronously; a key has one output in flight at a time, so a
	// partition has min(Window, its busy keys) in flight. When the window
	// is full the partition stops taking input until acknowledgements come
	// back. An input is acknowledged only after all its outputs are.
	// Default 256, at most 65536; input.max_ack_pending also bounds what
	// a window can fill (each queued output holds its input unacked).
	Window int `yaml:"window"`
	// KeyInFlight is how many outputs of one key may wait for the output
	// stream's acknowledgement at once. More than 1 (the default,
	// DefaultKeyInFlight, at most Window): the outputs go through an
	// ordered lane per worker, a JetStream fast batch in gap-fail mode
	// (processor/lane.go), which keeps each key's outputs in input order
	// and each once across failures; it needs a JetStream output stream
	// that allows batch publishing (allow_batched, nats-server ≥ 2.12;
	// create_stream sets it) and does not discard new messages at its
	// limits, else the pipeline falls back to 1 with a log line saying
	// why (info when the value is the default, a warning when the file
	// set it). 1: one, the next published when the previous one is
	// acknowledged — a key moves one output per round trip. Core NATS
	// outputs always have 1. At most Window. Through a lane
	// a worker's share of Window is at least KeyInFlight, so one hot key
	// keeps KeyInFlight in flight however many workers share the window:
	// a partition then holds at most max(Window, workers·KeyInFlight).
	KeyInFlight int `yaml:"key_in_flight"`
	// keyInFlightDefault records that KeyInFlight came from the default:
	// a stream that cannot carry a lane is then an info line, not a warning.
	keyInFlightDefault bool
}

// DeadLetterConfig is the JetStream stream that stores a pipeline's dead
// letters (the subjects of PipelineConfig.DeadLetter with {key} as '*').
// By default it is created when no stream captures those subjects yet,
// so a rejected message can be listed and re-published later
// ("kpcastream dlq"). Dead letters are published with JetStream whenever
// some stream captures them.
type DeadLetterConfig struct {
	// Stream names the stream; {pipeline} is replaced. Default
	// "KPCA_DLQ_{pipeline}".
	Stream string `yaml:"stream"`
	// CreateStream creates Stream unless a stream of that name exists or
	// another stream already captures the dead-letter subjects. Default
	// true; false stores dead letters only in a stream you create.
	CreateStream *bool `yaml:"create_stream"`
	// Replicas is the replica count (1..5) of a created stream. Default 1.
	Replicas int `yaml:"replicas"`
	// MaxAge is how long a created stream keeps a dead letter. Default
	// 168h (7 days); a negative value keeps them until MaxBytes.
	MaxAge time.Duration `yaml:"max_age"`
	// MaxBytes is the size limit (bytes) of a created stream, oldest dead
	// letters discarded first. Default 1 GiB; a negative value: no limit.
	MaxBytes int64 `yaml:"max_bytes"`
}

// DeadLetterSubjects returns the subject filter of p's dead letters: its
// DeadLetter template for every key and shard ({key} and {shard} as '*').
func (p PipelineConfig) DeadLetterSubjects() string {
	return strings.ReplaceAll(expand(p.DeadLetter, p.Name, "*"), shardToken, "*")
}

// StreamName returns the dead-letter stream's name for pipeline.
func (d DeadLetterConfig) StreamName(pipeline string) string {
	return strings.ReplaceAll(d.Stream, "{pipeline}", pipeline)
}

// SnapshotPolicy says when a key's learner is snapshotted. A snapshot is
// also written when a learner is unloaded (MaxKeys).
type SnapshotPolicy struct {
	// EveryMessages snapshots a key after this many applied messages;
	// 0 means the default 1000, a negative value disables it.
	EveryMessages int `yaml:"every_messages"`
	// Every snapshots a key changed since its last snapshot after this
	// duration; 0 means the default 30s, a negative value disables it.
	Every time.Duration `yaml:"every"`
	// OnShutdown writes final snapshots on shutdown. Default true.
	OnShutdown *bool `yaml:"on_shutdown"`
	// OnCorrupt is "fail" (default: refuse the key's messages and log) or
	// "reset" (start the key from a fresh learner) for a corrupt snapshot.
	OnCorrupt string `yaml:"on_corrupt_snapshot"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// WithDefaults returns c with every unset optional field set to its default.
func (c Config) WithDefaults() Config {
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.CheckpointBucket == "" {
		c.CheckpointBucket = DefaultCheckpointBucket
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = DefaultCheckpointEvery
	}
	if c.SnapshotTimeout == 0 {
		c.SnapshotTimeout = DefaultSnapshotTimeout
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.OnLeaseHeld == "" {
		c.OnLeaseHeld = LeaseWait
	}
	ps := make([]PipelineConfig, len(c.Pipelines))
	for i, p := range c.Pipelines {
		ps[i] = p.WithDefaults()
	}
	c.Pipelines = ps
	return c
}

// WithDefaults returns p with every unset optional field set to its default.
func (p PipelineConfig) WithDefaults() PipelineConfig {
	if p.Input.Stream != "" && p.Input.Durable == "" {
		p.Input.Durable = "kpcastream-" + p.Name
	}
	if p.Input.MaxAckPending == 0 {
		p.Input.MaxAckPending = DefaultMaxAckPending
	}
	if p.Input.AckWait == 0 {
		p.Input.AckWait = DefaultAckWait
	}
	if p.Input.NakDelay == 0 {
		p.Input.NakDelay = DefaultNakDelay
	}
	if p.Input.Replicas == 0 {
		p.Input.Replicas = 1
	}
	if p.Output.Replicas == 0 {
		p.Output.Replicas = 1
	}
	if p.KeyToken == nil {
		t := -1
		for i, tok := range strings.Split(p.Input.Subject, ".") {
			if tok == "*" {
				t = i
				break
			}
		}
		p.KeyToken = &t
	}
	p.Learner = p.Learner.WithDefaults()
	if p.Output.Subject == "" {
		p.Output.Subject = DefaultOutputSubject
	}
	if p.Output.Duplicates == 0 {
		p.Output.Duplicates = DefaultDuplicates
	}
	if p.Output.Window == 0 {
		p.Output.Window = DefaultOutputWindow
	}
	if p.Output.KeyInFlight == 0 {
		p.Output.KeyInFlight = min(DefaultKeyInFlight, max(1, p.Output.Window))
		p.Output.keyInFlightDefault = true
	}
	if p.DeadLetter == "" {
		p.DeadLetter = DefaultDeadLetter
	}
	if p.DeadLetters.Stream == "" {
		p.DeadLetters.Stream = DefaultDeadLetterStream
	}
	if p.DeadLetters.CreateStream == nil {
		t := true
		p.DeadLetters.CreateStream = &t
	}
	if p.DeadLetters.Replicas == 0 {
		p.DeadLetters.Replicas = 1
	}
	if p.DeadLetters.MaxAge == 0 {
		p.DeadLetters.MaxAge = DefaultDeadLetterMaxAge
	}
	if p.DeadLetters.MaxBytes == 0 {
		p.DeadLetters.MaxBytes = DefaultDeadLetterMaxBytes
	}
	if p.Snapshot.EveryMessages == 0 {
		p.Snapshot.EveryMessages = DefaultEveryMessages
	}
	if p.Snapshot.Every == 0 {
		p.Snapshot.Every = DefaultSnapshotEvery
	}
	if p.Snapshot.OnShutdown == nil {
		t := true
		p.Snapshot.OnShutdown = &t
	}
	if p.Snapshot.OnCorrupt == "" {
		p.Snapshot.OnCorrupt = OnCorruptFail
	}
	if p.MemoryBudget == 0 {
		p.MemoryBudget = DefaultMemoryBudget
	}
	if p.MaxBatch == 0 {
		p.MaxBatch = DefaultMaxBatch
	}
	if p.Partitions == 0 {
		p.Partitions = 1
	}
	if p.Input.Shards == 0 {
		p.Input.Shards = 1
	}
	return p
}

// LocalNone as Config.LocalDir in a file turns the local tier off.
const LocalNone = "none"

// Values of Config.OnLeaseHeld (deprecated: accepted and ignored).
const (
	LeaseWait = "wait"
	LeaseFail = "fail"
)

// Values of SnapshotPolicy.OnCorrupt.
const (
	OnCorruptFail  = "fail"
	OnCorruptReset = "reset"
)

// expand replaces {pipeline} and {key} in a subject template.
func expand(t, pipeline, key string) string {
	if !strings.Contains(t, "{") {
		return t
	}
	return strings.NewReplacer("{pipeline}", pipeline, "{key}", key).Replace(t)
}
