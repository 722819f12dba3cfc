package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// The recorded layout of a pipeline's input: which streams hold its
// partitions. It is what makes a change of input.shards (or of the input
// streams) refused rather than a silent re-split (shards.go).

// layoutRecord is the value of layoutKey: the input streams (by shard),
// the partitions and the input subject a pipeline last started with.
type layoutRecord struct {
	Streams    []string `json:"streams"`
	Partitions int      `json:"partitions"`
	Subject    string   `json:"subject"`
}

// layoutKey is the coordination bucket's key of pipeline's layout record
// (outside the watched members.> and partitions.>).
func layoutKey(pipeline string) string { return "layouts." + pipeline }

// errLayoutChanged is matched by the error of a refused layout change.
var errLayoutChanged = errors.New("the input layout changed")

// setupInput checks pl's input streams against the recorded layout
// (checkLayout), creates the missing ones when create_stream says so —
// above every sequence of the old layout's streams, when the layout
// changes — checks that each has the subjects and transform its shard
// needs, and records the layout.
func (p *Processor) setupInput(ctx context.Context, pl *pipeline) error {
	pc := pl.cfg
	var (
		prev    *layoutRecord
		rev     uint64
		oldLast uint64
	)
	err := p.retry(ctx, "check input layout", func(ctx context.Context) (err error) {
		prev, rev, oldLast, err = p.checkLayout(ctx, pc)
		return err
	})
	if err != nil {
		return fmt.Errorf("processor: pipeline %s: %w", pc.Name, err)
	}
	for s, name := range pc.InputStreams() {
		sc := pc.inputStreamConfig(s)
		if oldLast > 0 {
			sc.FirstSeq = oldLast + 1
		}
		if err := p.retry(ctx, "check input stream", func(ctx context.Context) error { return p.ensureInputStream(ctx, pc, sc) }); err != nil {
			return fmt.Errorf("processor: pipeline %s: input stream %s: %w", pc.Name, name, err)
		}
	}
	if prev != nil && slices.Equal(prev.Streams, pc.InputStreams()) && prev.Partitions == pc.Partitions && prev.Subject == pc.Input.Subject {
		return nil
	}
	rec := layoutRecord{Streams: pc.InputStreams(), Partitions: pc.Partitions, Subject: pc.Input.Subject}
	v, _ := json.Marshal(rec)
	err = p.retry(ctx, "record input layout", func(ctx context.Context) error {
		var err error
		if rev == 0 {
			_, err = p.coord.kv.Create(ctx, layoutKey(pc.Name), v)
		} else {
			_, err = p.coord.kv.Update(ctx, layoutKey(pc.Name), v, rev)
		}
		if isRevisionMismatch(err) {
			// Another member wrote it meanwhile: fine if it wrote this layout.
			var cur *layoutRecord
			if cur, rev, err = p.readLayout(ctx, pc.Name); err == nil && (cur == nil || !slices.Equal(cur.Streams, rec.Streams)) {
				err = fmt.Errorf("%w: another member recorded the layout %v meanwhile", errLayoutChanged, cur)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("processor: pipeline %s: record the input layout: %w", pc.Name, err)
	}
	if prev != nil {
		p.log.Warn("input layout changed: the partitions now live in other streams", zap.String("pipeline", pc.Name),
			zap.Strings("from", prev.Streams), zap.Strings("to", rec.Streams), zap.Uint64("old_last_seq", oldLast))
	}
	return nil
}

// readLayout reads pipeline's layout record (nil when there is none) and
// its revision.
func (p *Processor) readLayout(ctx context.Context, pipeline string) (*layoutRecord, uint64, error) {
	e, err := p.coord.kv.Get(ctx, layoutKey(pipeline))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var r layoutRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("layout record %s holds %q: %w", layoutKey(pipeline), e.Value(), err)
	}
	return &r, e.Revision(), nil
}

// checkLayout compares pc's input streams with the layout the pipeline
// last ran under: the layout record, or — for a pipeline that ran under a
// version before the record (its partition 0 has an ownership record) —
// the one stream input.stream. The same streams (and, with several
// shards, the same partitions) pass. Other streams pass only as the end
// of the migration (README, Sharding): none of them was a stream of the
// old layout, the old streams still exist and no longer capture the
// input subject, and every new stream that exists starts above the old
// streams' last sequence; it returns that sequence (0 when the layout
// stays), above which create_stream starts the missing ones. Anything
// else is refused with an error saying how to migrate.
func (p *Processor) checkLayout(ctx context.Context, pc PipelineConfig) (prev *layoutRecord, rev, oldLast uint64, err error) {
	prev, rev, err = p.readLayout(ctx, pc.Name)
	if err != nil {
		return nil, 0, 0, err
	}
	old := prev
	if old == nil {
		_, gerr := p.coord.kv.Get(ctx, recordKey(pc, 0))
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
			return nil, 0, 0, nil // a new pipeline
		case gerr != nil:
			return nil, 0, 0, gerr
		}
		old = &layoutRecord{Streams: []string{pc.Input.Stream}, Subject: pc.Input.Subject}
	}
	streams := pc.InputStreams()
	if slices.Equal(old.Streams, streams) {
		if len(streams) > 1 && old.Partitions != pc.Partitions {
			return nil, 0, 0, p.layoutRefusal(pc, old, fmt.Sprintf("its %d partitions were spread over these streams as %d", pc.Partitions, old.Partitions))
		}
		return prev, rev, 0, nil
	}
	for _, s := range streams {
		if slices.Contains(old.Streams, s) {
			return nil, 0, 0, p.layoutRefusal(pc, old, fmt.Sprintf("stream %s belonged to the old layout too; the new layout needs streams of other names (another input.stream)", s))
		}
	}
	for _, name := range old.Streams {
		st, err := p.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && prev == nil {
			// No record: the old layout was only presumed (one stream,
			// input.stream), or its record was deleted by hand — the
			// documented override when the old streams are gone.
			p.log.Warn("no recorded input layout and no stream "+name+" to check the new streams against; taking the layout as it is",
				zap.String("pipeline", pc.Name), zap.Strings("streams", streams))
			continue
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, 0, 0, p.layoutRefusal(pc, old, fmt.Sprintf("the old stream %s is gone, so the new streams' sequences cannot be checked against it "+
				"(if every new stream starts above its last sequence, delete the key %s of bucket %s)", name, layoutKey(pc.Name), p.cfg.CheckpointBucket))
		}
		if err != nil {
			return nil, 0, 0, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return nil, 0, 0, err
		}
		for _, f := range info.Config.Subjects {
			if f == old.Subject || strings.HasPrefix(f, old.Subject+".") {
				return nil, 0, 0, p.layoutRefusal(pc, old, fmt.Sprintf("the old stream %s still captures %s (step 1: take its subjects away)", name, f))
			}
		}
		oldLast = max(oldLast, info.State.LastSeq)
	}
	for _, name := range streams {
		st, err := p.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue // created above oldLast, or missing (ensureInputStream says so)
		}
		if err != nil {
			return nil, 0, 0, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return nil, 0, 0, err
		}
		first := info.State.FirstSeq
		if info.State.Msgs == 0 {
			first = info.State.LastSeq + 1
		}
		if first <= oldLast {
			return nil, 0, 0, p.layoutRefusal(pc, old, fmt.Sprintf("the new stream %s starts at sequence %d, not above the old streams' last %d "+
				"(create it with first_seq %d, or delete it and let create_stream create it)", name, first, oldLast, oldLast+1))
		}
	}
	return prev, rev, oldLast, nil
}

// layoutRefusal is the error of a refused layout change.
func (p *Processor) layoutRefusal(pc PipelineConfig, old *layoutRecord, why string) error {
	return fmt.Errorf("%w: pipeline %s ran on the input streams %v and is configured with %v (input.stream %s, input.shards %d, partitions %d): %s. "+
		"A key's messages would change streams and so sequence spaces, and its learner would skip or re-apply them; "+
		"move to the new layout as in the README (Sharding, Changing shards): take the old streams' subjects away, "+
		"create the new streams above their last sequence (create_stream does it), let the old workers finish, then start the new ones",
		errLayoutChanged, pc.Name, old.Streams, pc.InputStreams(), pc.Input.Stream, pc.Input.Shards, pc.Partitions, why)
}
