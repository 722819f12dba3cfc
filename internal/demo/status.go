package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/words"
	"github.com/kpcastream/kpcastream/processor"
)

// status prints the status every interval: a line of rates, then a
// line per key (the first maxKeys) with its explained variance, top
// eigenvalues (from the model endpoint), novelty scores and basis version
// of its latest output.
func status(ctx context.Context, nc *nats.Conn, o *Options, st *stats, w io.Writer) error {
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	start := time.Now()
	var lastIn, lastOut int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		in, out := st.in.Load(), st.out.Load()
		secs := o.Every.Seconds()
		st.mu.Lock()
		last := make(map[string]codec.Output, len(st.last))
		for k, v := range st.last {
			last[k] = v
		}
		st.mu.Unlock()
		line := fmt.Sprintf("%5.0fs phase %d  in %5.0f/s  out %5.0f/s  dlq %d", time.Since(start).Seconds(), st.phase.Load(),
			float64(in-lastIn)/secs, float64(out-lastOut)/secs, st.dlq.Load())
		lastIn, lastOut = in, out
		if b := budget(ctx, nc); b != "" {
			line += "  budget " + b
		}
		line += st.cls.line()
		shown := min(o.Keys, maxKeys)
		for i := range shown {
			key := fmt.Sprintf("sensor-%d", i)
			out, ok := last[key]
			if !ok {
				line += "\n        " + key + ": warming up"
				continue
			}
			line += fmt.Sprintf("\n        %s: explained %.3f", key, out.Explained)
			if eig := eigenvalues(ctx, nc, key); eig != nil {
				line += "  eig"
				for _, v := range eig {
					line += fmt.Sprintf(" %.4f", v)
				}
			}
			line += fmt.Sprintf("  spe %.4f  t2 %.2f  basis v%d", out.SPE, out.T2, out.BasisVersion)
		}
		if o.Keys > shown {
			line += fmt.Sprintf("\n        … and %s more (see the live page)", words.Plural(o.Keys-shown, "key"))
		}
		fmt.Fprintln(w, line)
	}
}

// maxKeys bounds the keys of the status block.
const maxKeys = 16

// eigenvalues asks the micro service for the key's model export.
func eigenvalues(ctx context.Context, nc *nats.Conn, key string) []float64 {
	req, _ := json.Marshal(map[string]string{"pipeline": "demo", "key": key})
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, "kpcastream.model", req)
	if err != nil || msg.Header.Get("Nats-Service-Error") != "" {
		return nil
	}
	m, err := codec.DecodeModel(msg.Data)
	if err != nil {
		return nil
	}
	return m.Eigenvalues
}

// owners prints which member owns each partition whenever it changes,
// from the stats endpoint (summed over the members).
func owners(ctx context.Context, nc *nats.Conn, every time.Duration, w io.Writer) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := ""
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		stats := pipelineStats(ctx, nc, 2*time.Second)
		if stats == nil {
			continue
		}
		members := map[string]int{}
		for _, p := range stats[0].Partitions {
			members[p.Member]++
		}
		var parts []string
		for _, p := range stats[0].Partitions {
			parts = append(parts, fmt.Sprintf("p%d→%s(e%d)", p.Partition, p.Member[:min(6, len(p.Member))], p.Epoch))
		}
		line := fmt.Sprintf("%s: %s", words.Plural(len(members), "member"), strings.Join(parts, " "))
		if line != last {
			fmt.Fprintf(w, "%5.0fs owners  %s\n", time.Since(start).Seconds(), line)
			last = line
		}
	}
}

// budget returns the budget advice of the pipeline's learners from the
// stats endpoint, e.g. "ok 2" or "tight 1, ok 1" ("" when unknown).
func budget(ctx context.Context, nc *nats.Conn) string {
	stats := pipelineStats(ctx, nc, 500*time.Millisecond)
	if stats == nil {
		return ""
	}
	var parts []string
	for _, a := range []string{"too_small", "tight", "ok"} {
		if n := stats[0].Budget[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
	}
	return strings.Join(parts, ", ")
}

// pipelineStats asks the stats endpoint (summed over the members) within
// timeout; nil when it did not answer or knows no pipeline.
func pipelineStats(ctx context.Context, nc *nats.Conn, timeout time.Duration) []processor.PipelineStats {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, "kpcastream.stats", nil)
	if err != nil || msg.Header.Get("Nats-Service-Error") != "" {
		return nil
	}
	var stats []processor.PipelineStats
	if json.Unmarshal(msg.Data, &stats) != nil || len(stats) == 0 {
		return nil
	}
	return stats
}
