package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// leaderGet returns the value of key in the coordination bucket, and its
// revision, as the leader of the bucket's stream holds it, through the stream's
// message-get API, which only the leader answers. A KV Get is a direct
// get, answered by any replica from its own copy: one still applying the
// leader's last writes answers an older value (nats-server issue 4710),
// even of a key this member has just written. A key with no value (none,
// or deleted) gives jetstream.ErrKeyNotFound.
func (p *Processor) leaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	bucket := p.cfg.CheckpointBucket
	req, err := json.Marshal(struct {
		LastBySubj string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return nil, 0, err
	}
	msg, err := p.js.Conn().RequestWithContext(ctx, apiPrefix(p.js.Options())+"STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("processor: leader's value of %s: %w", key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return nil, 0, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, 0, fmt.Errorf("processor: leader's value of %s: %w", key, resp.Error)
	case resp.Message == nil:
		return nil, 0, fmt.Errorf("processor: leader's value of %s: no message in the answer", key)
	}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			return nil, 0, fmt.Errorf("processor: leader's value of %s: %w", key, err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil, 0, jetstream.ErrKeyNotFound
		}
	}
	return resp.Message.Data, resp.Message.Seq, nil
}

// apiPrefix is the JetStream API subject prefix the jetstream client o
// uses ("$JS.API." by default).
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return "$JS.API."
}
