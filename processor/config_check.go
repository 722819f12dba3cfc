package processor

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kpcastream/kpcastream/internal/fielderr"
	"github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// The checks of a configuration (Config.Validate): every problem at once,
// each a *fielderr.Error naming its field.

// Validate reports every problem of c at once (errors.Join), each a
// *fielderr.Error naming the field by its YAML path
// ("processor: pipelines[0].input.subject: required"). Defaults are
// applied first. Learner settings are checked with learners.Config.Validate
// (their problems still match learners.ErrConfig), a classifier's with
// classify.Config.Validate.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, configErr(field, format, args...))
	}
	if c.Workers < 1 {
		bad("workers", "must be ≥ 1, got %d", c.Workers)
	}
	if c.QueueSize < 1 {
		bad("queue_size", "must be ≥ 1, got %d", c.QueueSize)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must be > 0, got %v", c.ShutdownTimeout)
	}
	if !nameRE.MatchString(c.ServiceName) {
		bad("service_name", "must match %s, got %q", nameRE, c.ServiceName)
	}
	if !nameRE.MatchString(c.CheckpointBucket) {
		bad("checkpoint_bucket", "must match %s, got %q", nameRE, c.CheckpointBucket)
	}
	if c.CheckpointEvery < 0 {
		bad("checkpoint_every", "must be > 0, got %v", c.CheckpointEvery)
	}
	if c.CheckpointReplicas < 0 || c.CheckpointReplicas > 5 {
		bad("checkpoint_replicas", "must be in [1, 5] (0: snapshots.replicas), got %d", c.CheckpointReplicas)
	}
	if c.SnapshotTimeout < 0 {
		bad("snapshot_timeout", "must be > 0, got %v", c.SnapshotTimeout)
	}
	if c.LeaseTTL < 30*time.Millisecond {
		bad("lease_ttl", "must be ≥ 30ms, got %v", c.LeaseTTL)
	}
	switch c.OnLeaseHeld {
	case LeaseWait, LeaseFail:
	default:
		bad("on_lease_held", "must be wait or fail, got %q", c.OnLeaseHeld)
	}
	if len(c.Pipelines) == 0 {
		bad("pipelines", "at least one pipeline is required")
	}
	seen := map[string]int{}
	for i, p := range c.Pipelines {
		path := fmt.Sprintf("pipelines[%d]", i)
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			bad(path+".name", "%q is also the name of pipelines[%d]", p.Name, j)
		}
		seen[p.Name] = i
		errs = append(errs, fielderr.Prefix(scope, path, p.validate()...)...)
	}
	return errors.Join(errs...)
}

// scope starts the text of the errors of Validate.
const scope = "processor"

// configErr is the problem of the field at path: "processor: <path>: <problem>".
func configErr(path, format string, args ...any) *fielderr.Error {
	return fielderr.New(scope, nil, path, format, args...)
}

// validate reports every problem of p, each a *fielderr.Error with a path
// relative to p.
func (p PipelineConfig) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, configErr(field, format, args...))
	}
	if !nameRE.MatchString(p.Name) {
		bad("name", "must match %s, got %q", nameRE, p.Name)
	}
	p.validateInput(bad)
	p.validateKeyToken(bad)
	errs = append(errs, fielderr.Prefix(scope, "learner", p.Learner.Validate())...)
	p.validateOutput(bad)
	p.validateDeadLetters(bad)
	switch p.Snapshot.OnCorrupt {
	case OnCorruptFail, OnCorruptReset:
	default:
		bad("snapshot.on_corrupt_snapshot", "must be fail or reset, got %q", p.Snapshot.OnCorrupt)
	}
	if p.MaxKeys < 0 {
		bad("max_keys", "must be ≥ 0 (0: no cap beyond memory_budget), got %d", p.MaxKeys)
	}
	if p.MemoryBudget < 0 {
		bad("memory_budget", "must be ≥ 0 bytes (0: the default, %d), got %d", DefaultMemoryBudget, p.MemoryBudget)
	}
	if p.MaxBatch < 1 {
		bad("max_batch", "must be ≥ 1, got %d", p.MaxBatch)
	}
	p.validatePartitions(bad)
	p.validateShards(bad)
	if p.Classifier != nil {
		errs = append(errs, fielderr.Prefix(scope, "classifier", p.Classifier.withDefaults().validate(p.Learner)...)...)
	}
	errs = append(errs, p.validateMonitor()...)
	return errs
}

// badFunc reports one problem of a field (validate's collector).
type badFunc func(field, format string, args ...any)

// validateInput checks the input section: subject, stream, consumer
// settings and the limits of a created stream.
func (p PipelineConfig) validateInput(bad badFunc) {
	switch {
	case p.Input.Subject == "":
		bad("input.subject", "required")
	case !validSubject(p.Input.Subject, true):
		bad("input.subject", "invalid subject %q", p.Input.Subject)
	}
	if p.Input.Stream != "" && !nameRE.MatchString(p.Input.Stream) {
		bad("input.stream", "must match %s, got %q", nameRE, p.Input.Stream)
	}
	if p.Input.Stream == "" && p.Input.CreateStream {
		bad("input.create_stream", "needs input.stream")
	}
	if p.Input.Durable != "" && !nameRE.MatchString(p.Input.Durable) {
		bad("input.durable", "must match %s, got %q", nameRE, p.Input.Durable)
	}
	if p.Input.MaxAckPending < 1 {
		bad("input.max_ack_pending", "must be ≥ 1, got %d", p.Input.MaxAckPending)
	}
	if p.Input.AckWait <= 0 {
		bad("input.ack_wait", "must be > 0, got %v", p.Input.AckWait)
	}
	if p.Input.NakDelay <= 0 {
		bad("input.nak_delay", "must be > 0, got %v", p.Input.NakDelay)
	}
	validateLimits(bad, "input", p.Input.Replicas, p.Input.MaxAge, p.Input.MaxBytes)
}

// validateLimits checks the replicas and limits of a stream the
// processor creates (the fields under prefix).
func validateLimits(bad badFunc, prefix string, replicas int, maxAge time.Duration, maxBytes int64) {
	if replicas < 1 || replicas > 5 {
		bad(prefix+".replicas", "must be in [1, 5], got %d", replicas)
	}
	if maxAge < 0 {
		bad(prefix+".max_age", "must be ≥ 0 (0: no limit), got %v", maxAge)
	}
	if maxBytes < 0 {
		bad(prefix+".max_bytes", "must be ≥ 0 (0: no limit), got %d", maxBytes)
	}
}

// validateKeyToken checks that key_token names a wildcard token of the
// input subject (or is -1: no key token).
func (p PipelineConfig) validateKeyToken(bad badFunc) {
	toks := strings.Split(p.Input.Subject, ".")
	if k := *p.KeyToken; k >= 0 && p.Input.Subject != "" {
		if k >= len(toks) {
			bad("key_token", "subject %q has %d tokens, got index %d", p.Input.Subject, len(toks), k)
		} else if toks[k] != "*" && toks[k] != ">" {
			bad("key_token", "token %d of %q is %q, not a wildcard", k, p.Input.Subject, toks[k])
		}
	} else if k < -1 {
		bad("key_token", "must be ≥ 0, got %d", k)
	}
}

// validateOutput checks the output section: subject, encoding, stream,
// window, key_in_flight and the duplicate window.
func (p PipelineConfig) validateOutput(bad badFunc) {
	validateLimits(bad, "output", p.Output.Replicas, p.Output.MaxAge, p.Output.MaxBytes)
	if p.Output.MaxAge > 0 && p.Output.MaxAge < p.Output.Duplicates {
		bad("output.max_age", "must be ≥ output.duplicates (%v), got %v", p.Output.Duplicates, p.Output.MaxAge)
	}
	if !validTemplate(p.Output.Subject) {
		bad("output.subject", "invalid subject template %q", p.Output.Subject)
	}
	switch p.Output.Encoding {
	case "", "json", "msgpack":
	default:
		bad("output.encoding", "must be json, msgpack or empty (same as input), got %q", p.Output.Encoding)
	}
	if p.Output.CreateStream && !nameRE.MatchString(p.Output.Stream) {
		bad("output.stream", "must match %s when output.create_stream is set, got %q", nameRE, p.Output.Stream)
	}
	if p.Output.Window < 1 || p.Output.Window > MaxOutputWindow {
		bad("output.window", "must be in [1, %d], got %d", MaxOutputWindow, p.Output.Window)
	}
	if p.Output.KeyInFlight < 1 || p.Output.KeyInFlight > max(1, p.Output.Window) {
		bad("output.key_in_flight", "must be in [1, output.window = %d], got %d", p.Output.Window, p.Output.KeyInFlight)
	}
	if p.Output.Duplicates < 100*time.Millisecond {
		bad("output.duplicates", "must be ≥ 100ms, got %v", p.Output.Duplicates)
	}
}

// validateDeadLetters checks the dead-letter subject and stream.
func (p PipelineConfig) validateDeadLetters(bad badFunc) {
	if !validTemplate(p.DeadLetter) {
		bad("dead_letter", "invalid subject template %q", p.DeadLetter)
	}
	if n := p.DeadLetters.StreamName(p.Name); !nameRE.MatchString(n) {
		bad("dead_letters.stream", "must match %s once {pipeline} is replaced, got %q", nameRE, n)
	}
	if r := p.DeadLetters.Replicas; r < 1 || r > 5 {
		bad("dead_letters.replicas", "must be in [1, 5], got %d", r)
	}
}

// validatePartitions checks that more than one partition has what the
// subject-transform partitioning needs: a JetStream input whose subject
// ends in a token the partition can follow, and a '*' key token.
func (p PipelineConfig) validatePartitions(bad badFunc) {
	toks := strings.Split(p.Input.Subject, ".")
	switch k := *p.KeyToken; {
	case p.Partitions < 1 || p.Partitions > MaxPartitions:
		bad("partitions", "must be in [1, %d], got %d", MaxPartitions, p.Partitions)
	case p.Partitions == 1:
	case p.Input.Stream == "":
		bad("partitions", "%d partitions need a JetStream input (input.stream)", p.Partitions)
	case strings.HasSuffix(p.Input.Subject, ">"):
		bad("partitions", "%d partitions need an input.subject without '>' (the partition is appended as a last token), got %q", p.Partitions, p.Input.Subject)
	case k < 0 || k >= len(toks) || toks[k] != "*":
		bad("partitions", "%d partitions need a key_token that is a '*' token of input.subject", p.Partitions)
	}
}

// subjectCovers reports whether the filter f matches every subject of
// the pattern subj (publish.Covers).
func subjectCovers(f, subj string) bool { return publish.Covers(f, subj) }

// validSubject reports whether s is a NATS subject (wildcards allowed when wild).
func validSubject(s string, wild bool) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return false
		case t == ">" && (!wild || i != len(toks)-1):
			return false
		case t == "*" && !wild:
			return false
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}

// validTemplate reports whether a subject template expands to a valid
// literal subject.
func validTemplate(t string) bool {
	return validSubject(expandShard(t, "p", "k", 0), false)
}

// validateMonitor reports the problems of p's monitor and preprocess
// sections, each under its own path.
func (p PipelineConfig) validateMonitor() []error {
	c, ok := p.monitorConfig()
	if !ok {
		return nil
	}
	var errs []error
	for _, e := range fielderr.Split(c.Validate()) {
		section := "monitor"
		var fe *fielderr.Error
		if errors.As(e, &fe) {
			switch fe.Path {
			case "standardize", "freeze":
				section = "preprocess"
			case "dim", "forget":
				continue // the learner's, reported there
			}
			errs = append(errs, fielderr.Prefix(scope, section, &fielderr.Error{Path: fe.Path, Err: fe.Err})...)
		}
	}
	if c.Learn == monitor.LearnNormal && p.Learner.WithDefaults().Learner == learners.KindBatch {
		errs = append(errs, configErr("monitor.learn", "normal needs an online learner (ikpca, kha or window), got batch"))
	}
	return errs
}
