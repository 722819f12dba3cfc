package clustertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/snapshot"
)

// leaderRevision asks the leader of the bucket's stream for the revision
// of the last value of key (0: none). A KV Get is a direct get, which any
// replica of an R3 bucket answers from its own copy (AllowDirect, the
// nats.go default): a follower still applying the last writes answers an
// older value (nats-server issue 4710). The stream's message-get API is
// answered by the leader alone, which stored every acknowledged write.
func leaderRevision(ctx context.Context, nc *nats.Conn, bucket, key string) (uint64, error) {
	k, err := snapshot.EncodeKey(key)
	if err != nil {
		return 0, err
	}
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + k})
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("message get of %s: %w", key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return 0, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("message get of %s: %d %s", key, resp.Error.ErrCode, resp.Error.Desc)
	case resp.Message == nil:
		return 0, fmt.Errorf("message get of %s: no message in %s", key, msg.Data)
	}
	return resp.Message.Seq, nil
}

// loadLatest returns the snapshot of pipeline's key that the bucket's
// stream leader holds: it reads the leader's revision, then loads through
// the store (whose direct gets decode the value, inline or manifest)
// until the answer is at that revision. A replica that answered older is
// logged, with how long it took to catch up.
func loadLatest(ctx context.Context, t *testing.T, nc *nats.Conn, store *snapshot.Store, pipeline, key string) (*codec.Snapshot, error) {
	t.Helper()
	full := snapshot.JoinKey(pipeline, key)
	var want uint64
	call(ctx, t, "leader's revision of "+full, func(ctx context.Context) (err error) {
		want, err = leaderRevision(ctx, nc, store.Config().Bucket, full)
		return err
	})
	var snap *codec.Snapshot
	var rev, first uint64
	var err error
	start := time.Now()
	waitFor(t, 30*time.Second, fmt.Sprintf("snapshot of %s at the leader's revision %d", key, want), func() bool {
		ctx, cancel := request(ctx)
		defer cancel()
		snap, rev, err = store.Load(ctx, full)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return false
		case err != nil:
			return true
		}
		if first == 0 {
			first = rev
		}
		return rev >= want
	})
	if err == nil && first < want {
		t.Logf("key %s: a direct get answered revision %d while the stream leader held %d (a replica behind); at %d after %v",
			key, first, want, rev, time.Since(start).Round(time.Millisecond))
	}
	return snap, err
}

// explainLag logs, for a key whose stored snapshot lacks some of its
// messages (seqs, ascending), the partition's ownership record and whether
// its checkpoint still covers the first missing message (a replay from it
// would apply it: the state lags, nothing is lost) or passed it (an
// exactly-once hole: no owner would apply it again), then every worker's
// log lines, down to debug, of the key and of its partition.
func explainLag(ctx context.Context, t *testing.T, ckpt jetstream.KeyValue, ws []*worker, pipeline, key string, seqs []uint64, snap *codec.Snapshot) {
	t.Helper()
	// The first message the snapshot lacks: after its LastSeq, or (Seen
	// short with LastSeq right) somewhere before: 0, unknown.
	var missing uint64
	if i, _ := slices.BinarySearch(seqs, snap.LastSeq+1); i < len(seqs) {
		missing = seqs[i]
	}
	part := ""
	for _, w := range ws {
		if w == nil {
			continue
		}
		for _, e := range w.logs.All() {
			if m := e.ContextMap(); m["key"] == key && m["partition"] != nil {
				part = fmt.Sprint(m["partition"])
			}
		}
	}
	switch {
	case part == "":
		t.Logf("key %s: no log line names its partition", key)
	case missing == 0:
		t.Logf("key %s (partition %s): its last message is in its snapshot, an earlier one is not (Seen short)", key, part)
	default:
		var rec jetstream.KeyValueEntry
		call(ctx, t, "the record of partition "+part, func(ctx context.Context) (err error) {
			rec, err = ckpt.Get(ctx, fmt.Sprintf("partitions.%s.%s", pipeline, part))
			return err
		})
		var r struct {
			Checkpoint uint64 `json:"checkpoint"`
		}
		_ = json.Unmarshal(rec.Value(), &r)
		verdict := "covers it: a replay applies it (the state lags, nothing lost)"
		if r.Checkpoint > missing {
			verdict = "passed it: no owner applies it again (an exactly-once hole)"
		}
		t.Logf("key %s (partition %s): first missing sequence %d; the partition's record (revision %d) %s; its checkpoint %s",
			key, part, missing, rec.Revision(), rec.Value(), verdict)
	}
	type line struct {
		w string
		e observer.LoggedEntry
	}
	var lines []line
	for _, w := range ws {
		if w == nil {
			continue
		}
		for _, e := range w.logs.All() {
			m := e.ContextMap()
			if m["key"] == key || (part != "" && m["key"] == nil && fmt.Sprint(m["partition"]) == part) {
				lines = append(lines, line{w.name, e})
			}
		}
	}
	sort.SliceStable(lines, func(a, b int) bool { return lines[a].e.Time.Before(lines[b].e.Time) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s %s %s %s %v\n", l.e.Time.UTC().Format("15:04:05.000"), l.w, l.e.Level, l.e.Message, l.e.ContextMap())
	}
	t.Logf("key %s and its partition %s, every worker's lines:\n%s", key, part, b.String())
}
