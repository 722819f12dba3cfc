package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// The view types below are the JSON of the micro endpoints and the HTTP
// API, re-exported by package processor under the same names: their
// fields and tags are a wire format.

// KeyRequest is the body of the model, snapshot and reset requests.
type KeyRequest struct {
	Pipeline string `json:"pipeline"`
	Key      string `json:"key"`
}

// PipelineStats is one pipeline's entry in the stats response. From
// Processor.Stats the counters are this instance's; from the stats
// endpoint they are summed over every member that answered (Instances),
// and Partitions lists every partition run by one of them.
type PipelineStats struct {
	Pipeline     string `json:"pipeline"`
	In           int64  `json:"in"`
	Out          int64  `json:"out"`
	Warming      int64  `json:"warming"`
	Skipped      int64  `json:"skipped"`
	DeadLettered int64  `json:"dead_lettered"`
	Naks         int64  `json:"naks"`
	Learners     int64  `json:"learners"`
	Pending      uint64 `json:"pending"`
	// Checkpoint is the lowest checkpoint of the partitions listed (the
	// sequence from which a restart of all of them would replay).
	Checkpoint uint64           `json:"checkpoint"`
	Instances  int              `json:"instances"`
	Partitions []PartitionStats `json:"partitions,omitempty"`
	// Budget counts the loaded learners by the budget advice of their last
	// message ("ok", "tight", "too_small"; see learners.BudgetAdvice).
	Budget map[string]int64 `json:"budget,omitempty"`
	// MemoryUsed is the bytes the loaded learners take (Learners × the
	// size of one key), Evictions the keys unloaded to make room since
	// the start (memory_budget, max_keys).
	MemoryUsed int64 `json:"memory_used"`
	Evictions  int64 `json:"evictions"`
	// KVWrites counts the snapshot writes (saves and claims) since the
	// start; LocalKeys and LocalBytes are the keys in the local tier on
	// disk and its files' size.
	KVWrites   int64 `json:"kv_writes"`
	LocalKeys  int64 `json:"local_keys"`
	LocalBytes int64 `json:"local_bytes"`
}

// PartitionStats describes one partition run by a member.
type PartitionStats struct {
	Partition  int    `json:"partition"`
	Member     string `json:"member"`
	Epoch      uint64 `json:"epoch,omitempty"`
	Checkpoint uint64 `json:"checkpoint,omitempty"`
	Pending    uint64 `json:"pending"`
}

// PipelineInfo is one pipeline's entry in the pipelines response.
type PipelineInfo struct {
	Name   string `json:"name"`
	Stream string `json:"stream,omitempty"`
	// Streams are the input's shard streams when it has several
	// (input.shards; partition p in Streams[p mod len(Streams)]).
	Streams    []string `json:"streams,omitempty"`
	Subject    string   `json:"subject"`
	Consumer   string   `json:"consumer,omitempty"` // prefix of the partitions' consumers: <consumer>-p<n>-e<epoch>
	Partitions int      `json:"partitions"`
	KeyToken   int      `json:"key_token"`
	Output     string   `json:"output"`
	OutputJS   bool     `json:"output_jetstream"`
	DeadLetter string   `json:"dead_letter"`
	Learner    string   `json:"learner"`
	Dim        int      `json:"dim"`
	Components int      `json:"components"`
	Budget     int      `json:"budget"`
	Kernel     string   `json:"kernel"`
	MaxKeys    int      `json:"max_keys"`
	// MemoryBudget is memory_budget (bytes of live learners on this
	// instance), KeyBytes the size of one live key, LiveMax the keys
	// that fit on an instance running every partition.
	MemoryBudget int64 `json:"memory_budget"`
	KeyBytes     int   `json:"key_bytes"`
	LiveMax      int   `json:"live_max"`
	// Owners are the members owning each partition, as this instance last
	// saw the coordination bucket ("" while a partition moves).
	Owners []string `json:"owners,omitempty"`
}

// KeyInfo describes a key loaded on this instance (GET /api/v1/keys).
type KeyInfo struct {
	Key       string `json:"key"`
	Partition int    `json:"partition"`
	Seen      int64  `json:"seen"`
	LastSeq   uint64 `json:"last_seq"`
	Stored    int    `json:"stored"`
	Advice    string `json:"advice,omitempty"`
	Watched   bool   `json:"watched"`
}

// PipelineView is one pipeline of GET /api/v1/pipelines.
type PipelineView struct {
	PipelineInfo
	// Keys is the number of learners loaded on this instance.
	Keys  int64         `json:"keys"`
	Stats PipelineStats `json:"stats"`
}

// mergeStats adds b's counters and partitions to a's entries of the same
// pipelines, appends the pipelines a lacks, and returns a.
func mergeStats(a, b []PipelineStats) []PipelineStats {
	for _, y := range b {
		i := slices.IndexFunc(a, func(x PipelineStats) bool { return x.Pipeline == y.Pipeline })
		if i < 0 {
			a = append(a, y)
			continue
		}
		x := &a[i]
		x.In += y.In
		x.Out += y.Out
		x.Warming += y.Warming
		x.Skipped += y.Skipped
		x.DeadLettered += y.DeadLettered
		x.Naks += y.Naks
		x.Learners += y.Learners
		x.MemoryUsed += y.MemoryUsed
		x.Evictions += y.Evictions
		x.KVWrites += y.KVWrites
		x.LocalKeys += y.LocalKeys
		x.LocalBytes += y.LocalBytes
		x.Pending += y.Pending
		x.Instances += y.Instances
		if y.Checkpoint != 0 && (x.Checkpoint == 0 || y.Checkpoint < x.Checkpoint) {
			x.Checkpoint = y.Checkpoint
		}
		x.Partitions = append(x.Partitions, y.Partitions...)
		for a, n := range y.Budget {
			if x.Budget == nil {
				x.Budget = map[string]int64{}
			}
			x.Budget[a] += n
		}
	}
	return a
}

// maxRequest bounds a control request's body.
const maxRequest = 64 << 10

// parseKeyRequest decodes a control request's body: empty, or one JSON
// object {"pipeline": …, "key": …} (other fields are ignored, as micro
// clients may add their own). Anything else is an ErrBadRequest naming
// what was wrong.
func parseKeyRequest(data []byte) (KeyRequest, error) {
	var kr KeyRequest
	if len(data) == 0 {
		return kr, nil
	}
	if len(data) > maxRequest {
		return kr, fmt.Errorf("processor: %w: body of %d bytes, at most %d", ErrBadRequest, len(data), maxRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&kr); err != nil {
		return KeyRequest{}, fmt.Errorf("processor: %w: body is not a JSON object {\"pipeline\":…,\"key\":…}: %v", ErrBadRequest, err)
	}
	if rest := bytes.Trim(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 { // JSON whitespace only
		return KeyRequest{}, fmt.Errorf("processor: %w: %d bytes of trailing data after the JSON object", ErrBadRequest, len(rest))
	}
	if !utf8.ValidString(kr.Pipeline) || !utf8.ValidString(kr.Key) {
		return KeyRequest{}, fmt.Errorf("processor: %w: pipeline and key must be valid UTF-8", ErrBadRequest)
	}
	return kr, nil
}
