package processor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kpcastream/kpcastream/processor/internal/ownership"
)

// Shards: a pipeline's JetStream input spread over input.shards streams.
//
// Partition p of a pipeline with N partitions and S shards is stored in
// shard p mod S. With S = 1 (the default) the layout is the one of
// versions before shards, unchanged: the one stream input.stream captures
// input.subject and partitions it with its subject transform
// (partitionTransform). With S > 1 one stream's transform cannot route a
// message into another stream, so the partitioning moves to the servers:
// an account subject mapping with the same transform (input.subject →
// the subject with its wildcards kept and .{{partition(N,k)}} appended)
// rewrites every published subject before any stream sees it, and shard
// s, the stream <input.stream>-<s>, captures <input.subject>.<p> for each
// of its partitions p. The stored subjects, the partition consumers'
// filters, consumer names, record keys and snapshot keys are those of
// S = 1; only the stream a partition's consumer lives on differs.
//
// Stream sequences are per stream. A key lives in one partition and so
// in one shard, so its sequences still only grow, and everything keyed by
// (key, sequence) holds: a snapshot's last applied sequence, the
// replay skip, the outputs' Nats-Msg-Id <pipeline>/<key>/<seq>. A
// partition's checkpoint is a sequence of its shard's stream. What is not
// keyed by key — a dead letter's id — names its shard when S > 1
// (deadLetterID). A change of S would move keys between sequence spaces;
// it is refused (checkLayout) unless the new streams start above every
// sequence of the old ones (the migration in the README).

// shardOf returns the shard of partition n.
func (p PipelineConfig) shardOf(n int) int {
	return n % max(1, p.Input.Shards)
}

// shardOfKey returns the shard of key's partition (FNV-1a(key) mod
// partitions, the server's {{partition}}).
func (p PipelineConfig) shardOfKey(key string) int {
	if p.Input.Shards <= 1 {
		return 0
	}
	return p.shardOf(int(ownership.FNV32a(key) % uint32(max(1, p.Partitions))))
}

// InputStreams returns the names of the pipeline's input streams, by
// shard: input.stream alone when shards is 1, else <input.stream>-<s>.
func (p PipelineConfig) InputStreams() []string {
	return shardNames(p.Input.Stream, p.Input.Shards)
}

// shardNames returns name for one shard, else name-0 … name-<n-1>.
func shardNames(name string, n int) []string {
	if n <= 1 {
		return []string{name}
	}
	out := make([]string, n)
	for s := range out {
		out[s] = name + "-" + strconv.Itoa(s)
	}
	return out
}

// inputStream returns the input stream of partition n.
func (p PipelineConfig) inputStream(n int) string {
	return p.InputStreams()[p.shardOf(n)]
}

// shardSubjects returns the subjects shard s of a pipeline with several
// shards captures: <input.subject>.<p> for each of its partitions p.
func (p PipelineConfig) shardSubjects(s int) []string {
	var out []string
	for n := s; n < p.Partitions; n += p.Input.Shards {
		out = append(out, p.Input.Subject+"."+strconv.Itoa(n))
	}
	return out
}

// ShardMapping returns the account subject mapping (source, destination)
// that the servers need when the pipeline has several shards: the
// partition transform of its input subject ("", "" with one shard, whose
// stream partitions by itself).
func (p PipelineConfig) ShardMapping() (string, string) {
	if p.Input.Shards <= 1 {
		return "", ""
	}
	t := partitionTransform(p)
	if t == nil {
		return "", ""
	}
	return t.Source, t.Destination
}

// InputStreamConfigs returns the configuration of each input stream (by
// shard) as create_stream creates it: for tools that create the streams
// themselves (the bench), so they match what the processor checks.
func (p PipelineConfig) InputStreamConfigs() []jetstream.StreamConfig {
	out := make([]jetstream.StreamConfig, max(1, p.Input.Shards))
	for s := range out {
		out[s] = p.inputStreamConfig(s)
	}
	return out
}

// inputStreamConfig returns the configuration of shard s's stream as
// create_stream creates it.
func (p PipelineConfig) inputStreamConfig(s int) jetstream.StreamConfig {
	sc := jetstream.StreamConfig{Name: p.InputStreams()[s], Replicas: p.Input.Replicas, MaxAge: p.Input.MaxAge,
		MaxBytes: limitBytes(p.Input.MaxBytes)}
	if p.Input.Shards <= 1 {
		sc.Subjects, sc.SubjectTransform = []string{p.Input.Subject}, partitionTransform(p)
	} else {
		sc.Subjects = p.shardSubjects(s)
		sc.Description = fmt.Sprintf("kpcastream input of pipeline %s, shard %d of %d (partitions ≡ %d mod %d)", p.Name, s, p.Input.Shards, s, p.Input.Shards)
	}
	if len(p.Input.ShardTags) > s && len(p.Input.ShardTags[s]) > 0 {
		sc.Placement = &jetstream.Placement{Tags: p.Input.ShardTags[s]}
	}
	return sc
}

// shardToken is the token of output and dead-letter subject templates
// replaced by the shard of the key's partition.
const shardToken = "{shard}"

// expandShard is expand with {shard} replaced by shard.
func expandShard(t, pipeline, key string, shard int) string {
	t = expand(t, pipeline, key)
	if strings.Contains(t, shardToken) {
		t = strings.ReplaceAll(t, shardToken, strconv.Itoa(shard))
	}
	return t
}

// perShard reports whether the subject template t has a subject per
// shard, so that each shard's outputs (or dead letters) can be captured
// by a stream of their own.
func perShard(t string) bool { return strings.Contains(t, shardToken) }

// outputStreamName returns the name of the output stream create_stream
// creates for shard s: output.stream, with -<s> appended when the output
// subject has a {shard} token and there are several shards.
func (p PipelineConfig) outputStreamName(s int) string {
	if p.Input.Shards > 1 && perShard(p.Output.Subject) {
		return p.Output.Stream + "-" + strconv.Itoa(s)
	}
	return p.Output.Stream
}

// deadLetterStreamName is outputStreamName for the dead-letter stream.
func (p PipelineConfig) deadLetterStreamName(s int) string {
	n := p.DeadLetters.StreamName(p.Name)
	if p.Input.Shards > 1 && perShard(p.DeadLetter) {
		return n + "-" + strconv.Itoa(s)
	}
	return n
}

// outputShards is the number of distinct output (or dead-letter) subject
// sets of template t: the shards when t has a {shard} token, else 1.
func (p PipelineConfig) outputShards(t string) int {
	if perShard(t) {
		return max(1, p.Input.Shards)
	}
	return 1
}

// deadLetterID is the Nats-Msg-Id of the dead letter of the input at
// stream sequence seq of shard s: dlq/<pipeline>/<seq> with one shard (as
// before), dlq/<pipeline>/s<s>/<seq> with several, whose sequences
// overlap.
func (p PipelineConfig) deadLetterID(s int, seq uint64) string {
	if p.Input.Shards <= 1 {
		return "dlq/" + p.Name + "/" + strconv.FormatUint(seq, 10)
	}
	return "dlq/" + p.Name + "/s" + strconv.Itoa(s) + "/" + strconv.FormatUint(seq, 10)
}

// validateShards checks input.shards and input.shard_tags.
func (p PipelineConfig) validateShards(bad badFunc) {
	s := p.Input.Shards
	switch {
	case s < 1 || s > MaxPartitions:
		bad("input.shards", "must be in [1, %d], got %d", MaxPartitions, s)
		return
	case s == 1:
	case p.Input.Stream == "":
		bad("input.shards", "%d shards need a JetStream input (input.stream)", s)
	case s > p.Partitions:
		bad("input.shards", "must be ≤ partitions (%d): each shard holds partitions p with p mod shards = its number, got %d", p.Partitions, s)
	}
	if n := len(p.Input.ShardTags); n > 0 && n != s {
		bad("input.shard_tags", "must list the placement tags of each of the %d shards (or none), got %d lists", s, n)
	}
	for i, tags := range p.Input.ShardTags {
		for j, t := range tags {
			if strings.TrimSpace(t) == "" {
				bad(fmt.Sprintf("input.shard_tags[%d][%d]", i, j), "empty tag")
			}
		}
	}
	if (perShard(p.Output.Subject) || perShard(p.DeadLetter)) && p.Input.Stream == "" {
		if perShard(p.Output.Subject) {
			bad("output.subject", "%s needs a JetStream input (input.stream)", shardToken)
		}
		if perShard(p.DeadLetter) {
			bad("dead_letter", "%s needs a JetStream input (input.stream)", shardToken)
		}
	}
}
