package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kpcastream/kpcastream/internal/publish"
	"github.com/kpcastream/kpcastream/snapshot"
)

// Setup, before Run starts anything: the snapshot store, the coordination
// bucket and the streams of every pipeline, and which of its outputs and
// dead letters go out with JetStream.

// setup opens the snapshot store and the coordination bucket, and creates
// the configured streams.
func (p *Processor) setup(ctx context.Context) error {
	if p.store == nil {
		var st *snapshot.Store
		err := p.retry(ctx, "open snapshot store", func(ctx context.Context) (err error) {
			st, err = snapshot.Open(ctx, p.js, snapshot.Config{})
			return err
		})
		if err != nil {
			return fmt.Errorf("processor: open snapshot store: %w", err)
		}
		p.store = st
	}
	p.keys = p.store
	if p.wrapKeys != nil {
		p.keys = p.wrapKeys(p.store)
	}
	for _, pl := range p.pipes {
		pc := pl.cfg
		if pc.Input.Stream != "" && p.coord == nil {
			replicas := p.cfg.CheckpointReplicas
			if replicas == 0 {
				replicas = max(1, p.store.Config().Replicas)
			}
			var kv jetstream.KeyValue
			err := p.retry(ctx, "create coordination bucket", func(ctx context.Context) (err error) {
				kv, err = p.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: p.cfg.CheckpointBucket,
					Description: "kpcastream members, partition ownership and replay checkpoints", Replicas: replicas})
				return err
			})
			if err != nil {
				return fmt.Errorf("processor: checkpoint bucket %q (%d replicas), which holds the members, partition ownership and checkpoints: %w",
					p.cfg.CheckpointBucket, replicas, err)
			}
			if p.wrapKV != nil {
				kv = p.wrapKV(kv)
			}
			p.coord = newCoordinator(p, kv)
		}
		if pc.Input.Stream != "" {
			if err := p.setupInput(ctx, pl); err != nil {
				return err
			}
		}
		if err := p.setupOutputs(ctx, pl); err != nil {
			return err
		}
		if err := p.setupDeadLetters(ctx, pl); err != nil {
			return err
		}
		io := pl.io[0]
		p.log.Info("pipeline", zap.String("pipeline", pc.Name), zap.String("input", pc.Input.Subject),
			zap.String("stream", pc.Input.Stream), zap.Int("partitions", pc.Partitions), zap.Int("shards", pc.Input.Shards), zap.String("output", pc.Output.Subject),
			zap.Bool("output_jetstream", io.outJS), zap.Bool("output_lane", io.lane), zap.Bool("dead_letters_jetstream", io.dlJS))
	}
	return nil
}

// setupOutputs creates the output streams (output.create_stream), finds
// the stream that captures each shard's outputs and whether they can go
// through a lane: one stream for every shard, or one per shard when the
// output subject has a {shard} token.
func (p *Processor) setupOutputs(ctx context.Context, pl *pipeline) error {
	pc := pl.cfg
	n := pc.outputShards(pc.Output.Subject)
	for s := range n {
		io := &pl.io[s]
		wild := expandShard(pc.Output.Subject, pc.Name, "*", s)
		if pc.Output.CreateStream {
			sc := jetstream.StreamConfig{Name: pc.outputStreamName(s), Subjects: []string{wild}, Duplicates: pc.Output.Duplicates,
				Replicas: pc.Output.Replicas, MaxAge: pc.Output.MaxAge, MaxBytes: limitBytes(pc.Output.MaxBytes),
				AllowBatchPublish: pc.Output.KeyInFlight > 1}
			if len(pc.Input.ShardTags) > s && n > 1 && len(pc.Input.ShardTags[s]) > 0 {
				sc.Placement = &jetstream.Placement{Tags: pc.Input.ShardTags[s]}
			}
			if err := p.retry(ctx, "create output stream", func(ctx context.Context) error { return ensureStream(ctx, p.js, sc) }); err != nil {
				return fmt.Errorf("processor: pipeline %s: output stream %s: %w", pc.Name, sc.Name, err)
			}
		}
		if validSubject(wild, true) {
			name, err := p.capturingStream(ctx, "find output stream", wild)
			if err != nil {
				return fmt.Errorf("processor: pipeline %s: find the stream of output subject %s: %w", pc.Name, wild, err)
			}
			io.outJS, io.outStream = name != "", name
		}
		if pc.Output.KeyInFlight > 1 {
			why, err := p.laneRefusal(ctx, *io)
			if err != nil {
				return fmt.Errorf("processor: pipeline %s: output stream %s: %w", pc.Name, io.outStream, err)
			}
			io.lane = why == ""
			switch {
			case io.lane:
			case pc.Output.keyInFlightDefault:
				p.log.Info("outputs without a lane: one output in flight per key (output.key_in_flight: 1 says so and silences this line)",
					zap.String("pipeline", pc.Name), zap.String("why", why))
			default:
				p.log.Warn("output.key_in_flight > 1 needs an output lane; falling back to one output in flight per key",
					zap.String("pipeline", pc.Name), zap.Int("key_in_flight", pc.Output.KeyInFlight), zap.String("why", why))
			}
		}
	}
	for s := n; s < len(pl.io); s++ {
		o := pl.io[0]
		pl.io[s].outJS, pl.io[s].outStream, pl.io[s].lane = o.outJS, o.outStream, o.lane
	}
	return nil
}

// capturingStream returns the name of the stream that captures every
// subject of the pattern wild, or "" when none does (a stream whose
// subjects only overlap the pattern does not count: publishing through
// JetStream would fail for the others). It retries transient errors,
// logging them as what.
func (p *Processor) capturingStream(ctx context.Context, what, wild string) (string, error) {
	var name string
	err := p.retry(ctx, what, func(ctx context.Context) (err error) {
		name, err = publish.Find(ctx, p.js, wild)
		return err
	})
	return name, err
}

// laneRefusal says why pl's outputs cannot go through a lane ("" when
// they can): the output stream must exist, allow batch publishing, answer
// publishes, and not discard new messages at a limit (a store that refuses
// one message of a batch and takes the next breaks the prefix a lane
// relies on).
func (p *Processor) laneRefusal(ctx context.Context, pl shardIO) (string, error) {
	if !pl.outJS {
		return "no JetStream stream captures the output subjects (core NATS outputs)", nil
	}
	var cfg jetstream.StreamConfig
	err := p.retry(ctx, "check output stream", func(ctx context.Context) error {
		st, err := p.js.Stream(ctx, pl.outStream)
		if err == nil {
			cfg = st.CachedInfo().Config
		}
		return err
	})
	switch {
	case err != nil:
		return "", err
	case !cfg.AllowBatchPublish:
		return fmt.Sprintf("output stream %s does not allow batch publishing (allow_batched; nats-server ≥ 2.12: nats stream edit %s --allow-fast, or let the processor create the stream)", pl.outStream, pl.outStream), nil
	case cfg.NoAck:
		return fmt.Sprintf("output stream %s does not acknowledge publishes (no_ack)", pl.outStream), nil
	case cfg.Discard == jetstream.DiscardNew && (cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxMsgsPerSubject > 0):
		return fmt.Sprintf("output stream %s discards new messages at its limits", pl.outStream), nil
	}
	return "", nil
}

// setupDeadLetters finds the stream that captures pl's dead letters, or
// creates one (dead_letters.create_stream, the default) when none does:
// one for every shard, or one per shard when the dead-letter subject has
// a {shard} token.
func (p *Processor) setupDeadLetters(ctx context.Context, pl *pipeline) error {
	pc := pl.cfg
	n := pc.outputShards(pc.DeadLetter)
	for s := range n {
		wild := expandShard(pc.DeadLetter, pc.Name, "*", s)
		if !validSubject(wild, true) {
			continue
		}
		find := func() (string, error) { return p.capturingStream(ctx, "find dead-letter stream", wild) }
		name, err := find()
		if err != nil {
			return fmt.Errorf("processor: pipeline %s: find the stream of dead-letter subject %s: %w", pc.Name, wild, err)
		}
		if name == "" && pc.DeadLetters.CreateStream != nil && *pc.DeadLetters.CreateStream {
			sc := jetstream.StreamConfig{Name: pc.deadLetterStreamName(s), Subjects: []string{wild},
				Description: "kpcastream dead letters of pipeline " + pc.Name,
				Replicas:    pc.DeadLetters.Replicas, MaxAge: max(pc.DeadLetters.MaxAge, 0), MaxBytes: limitBytes(max(pc.DeadLetters.MaxBytes, 0)),
				Discard: jetstream.DiscardOld}
			if err := p.retry(ctx, "create dead-letter stream", func(ctx context.Context) error { return ensureStream(ctx, p.js, sc) }); err != nil {
				return fmt.Errorf("processor: pipeline %s: dead-letter stream %s on %s: %w (set dead_letters.create_stream: false, or create a stream that captures %s)",
					pc.Name, sc.Name, wild, err, wild)
			}
			if name, err = find(); err != nil {
				return fmt.Errorf("processor: pipeline %s: find the stream of dead-letter subject %s: %w", pc.Name, wild, err)
			}
		}
		pl.io[s].dlJS = name != ""
		if name == "" {
			p.log.Warn("dead letters are not stored: no stream captures them", zap.String("pipeline", pc.Name), zap.String("subject", wild))
		}
	}
	for s := n; s < len(pl.io); s++ {
		pl.io[s].dlJS = pl.io[0].dlJS
	}
	return nil
}

// partitionTransform is the input stream's subject transform of pc: nil
// for one partition, else the subject with its wildcards kept and the
// partition of the key token appended, e.g. "sensors.*.features" →
// "sensors.{{wildcard(1)}}.features.{{partition(8,1)}}".
func partitionTransform(pc PipelineConfig) *jetstream.SubjectTransformConfig {
	if pc.Partitions <= 1 {
		return nil
	}
	toks := strings.Split(pc.Input.Subject, ".")
	keyWild := 0
	wild := 0
	for i, t := range toks {
		if t == "*" {
			wild++
			if i == *pc.KeyToken {
				keyWild = wild
			}
			toks[i] = fmt.Sprintf("{{wildcard(%d)}}", wild)
		}
	}
	dest := strings.Join(toks, ".") + fmt.Sprintf(".{{partition(%d,%d)}}", pc.Partitions, keyWild)
	return &jetstream.SubjectTransformConfig{Source: pc.Input.Subject, Destination: dest}
}

// ensureInputStream creates pc's input stream when create_stream says so,
// and checks that the stream exists with the partition transform that
// pc.Partitions needs.
func (p *Processor) ensureInputStream(ctx context.Context, pc PipelineConfig, sc jetstream.StreamConfig) error {
	st, err := p.js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && pc.Input.CreateStream {
		if _, err = p.js.CreateStream(ctx, sc); err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = p.js.Stream(ctx, sc.Name)
		}
	}
	if err != nil {
		return err
	}
	if pc.Input.Shards > 1 {
		return checkShardStream(st.CachedInfo().Config, sc)
	}
	got := st.CachedInfo().Config.SubjectTransform
	want := sc.SubjectTransform
	switch {
	case want == nil && got != nil && got.Source == pc.Input.Subject:
		return fmt.Errorf("stream %s transforms %s to %s, but the pipeline has partitions: 1; set partitions to the stream's count",
			sc.Name, got.Source, got.Destination)
	case want != nil && (got == nil || got.Source != want.Source || got.Destination != want.Destination):
		have := "no subject transform"
		if got != nil {
			have = fmt.Sprintf("the transform %s → %s", got.Source, got.Destination)
		}
		return fmt.Errorf("stream %s has %s; partitions: %d needs %s → %s (partitions are fixed when the stream is created: create a new stream with create_stream, see README, Scaling out)",
			sc.Name, have, pc.Partitions, want.Source, want.Destination)
	}
	return nil
}

// checkShardStream checks that an existing shard stream captures exactly
// the subjects of its partitions (want.Subjects), without a transform of
// them: the servers' subject mapping has partitioned them already.
func checkShardStream(got, want jetstream.StreamConfig) error {
	have := slices.Clone(got.Subjects)
	need := slices.Clone(want.Subjects)
	slices.Sort(have)
	slices.Sort(need)
	if !slices.Equal(have, need) {
		return fmt.Errorf("stream %s captures %v; its shard needs exactly %v (the subjects of its partitions; a stream of another layout? see README, Sharding)",
			want.Name, got.Subjects, want.Subjects)
	}
	if t := got.SubjectTransform; t != nil && t.Source != "" {
		return fmt.Errorf("stream %s transforms %s to %s; a shard stream stores its subjects as they come (the servers' subject mapping partitions them)",
			want.Name, t.Source, t.Destination)
	}
	return nil
}

// ensureStream creates the stream sc unless a stream of that name exists.
func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	_, err := js.Stream(ctx, sc.Name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = js.CreateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil
	}
	return err
}

// limitBytes maps a MaxBytes setting (0: no limit) to JetStream's (-1).
func limitBytes(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}
