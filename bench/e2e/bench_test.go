package e2e

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBench runs "kpcastream bench" end to end on its embedded server with
// tiny counts: the default (raw baseline, pass-through and ikpca, directly
// and over a 1 ms round trip, outputs to a deduplicating stream), a
// fixed-rate run with core NATS outputs, and core NATS input. It checks
// that every phase delivered every measured message, that the summary
// table has its rows and ratios, that the round-trip phases ran through
// the delaying proxy (their connection's RTT ≥ 1 ms, the direct ones'
// far less), and that each output stream holds each output once.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	const total = 300 + 2*32 // measured + keys × warm-up (2·budget)
	for _, tc := range []struct {
		name   string
		args   []string
		phases []string // summary rows, in order
		stored bool     // outputs go to a stream
	}{
		{"default", nil, []string{"raw", "bare", "ikpca", "raw@1ms", "bare@1ms", "ikpca@1ms"}, true},
		{"jetstream-rate-core-out", []string{"--rate", "2000", "--storage", "memory", "--output", "core", "--rtt", "0"},
			[]string{"raw", "bare", "ikpca"}, false},
		{"core", []string{"--core", "--rate", "5000", "--rtt", "0"}, []string{"bare", "ikpca"}, true},
		// Input published as fast as possible while the relay or the
		// processor consumes it (issue 29: the relay in the processor's shape).
		{"concurrent", []string{"--input", "concurrent", "--rtt", "0"}, []string{"raw", "bare", "ikpca"}, true},
		// Three shard streams (the embedded server gets the mapping): the
		// raw relay with a consumer per shard, the processor with
		// input.shards 3, outputs per shard; stored counts them all.
		{"shards", []string{"--shards", "3", "--partitions", "6", "--input", "concurrent", "--rtt", "0"}, []string{"raw", "bare", "ikpca"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--count", "300", "--keys", "2", "--budget", "16", "--dim", "4",
				"--components", "2", "--progress", "1ms", "--idle-timeout", "20s", "--duration", "0"}, tc.args...)
			var stdout, stderr syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := Run(ctx, args, &stdout, &stderr); err != nil {
				t.Fatalf("Run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if want := map[string]string{"default": "rate=max, input preloaded", "concurrent": "rate=max, input arriving concurrently", "shards": "partitions=6 shards=3 replicas=1"}[tc.name]; want != "" && !strings.Contains(out, want) {
				t.Errorf("the header does not say %q:\n%s", want, out)
			}
			sum := summaryRows(out)
			var names []string
			for _, r := range sum {
				names = append(names, r[0])
			}
			if !slices.Equal(names, tc.phases) {
				t.Fatalf("summary rows %v, want %v in\n%s", names, tc.phases, out)
			}
			for _, r := range sum {
				name, rtt, seen := r[0], r[1], r[2]
				seenMs, _ := strconv.ParseFloat(strings.TrimSuffix(seen, "ms"), 64)
				if rtt == "0" && !(seenMs < 1) || rtt == "1ms" && !(seenMs >= 1) {
					t.Errorf("%s: rtt %s, rtt seen %s: want < 1ms direct and ≥ 1ms through the proxy", name, rtt, seen)
				}
				if rate, _ := strconv.ParseFloat(r[3], 64); rate <= 0 {
					t.Errorf("%s: msgs/s = %s, want > 0", name, r[3])
				}
				wantRaw := "-"
				if slices.Contains(tc.phases, "raw") {
					wantRaw = "ratio"
					if strings.HasPrefix(name, "raw") {
						wantRaw = "1.00"
					}
				}
				if got := r[4]; wantRaw == "ratio" && !(got != "-" && got != "0.00") || wantRaw != "ratio" && got != wantRaw {
					t.Errorf("%s: × raw = %s, want %s", name, got, wantRaw)
				}
				if rtt == "0" && r[5] != "1.00" {
					t.Errorf("%s: × no rtt = %s, want 1.00", name, r[5])
				}
				if cpu, _ := strconv.ParseFloat(r[6], 64); cpu <= 0 {
					t.Errorf("%s: cpu µs/msg %s, want > 0", name, r[6])
				}
				if r[9] != "300" {
					t.Errorf("%s: %s measured outputs, want 300", name, r[9])
				}
				proxied := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+proxy writes left late by p50 [\d.]+ ms`).MatchString(out)
				if proxied != (rtt != "0") {
					t.Errorf("%s: proxy lateness line %v, want %v", name, proxied, rtt != "0")
				}
			}
			for _, name := range tc.phases {
				row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+(\d+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+\d+\s+([\d.]+)\s+[\d.]+\s+(\d+)\s+(\S+)$`).FindStringSubmatch(out)
				if row == nil {
					t.Fatalf("no result row for %s in\n%s", name, out)
				}
				p50, _ := strconv.ParseFloat(row[2], 64)
				p99, _ := strconv.ParseFloat(row[3], 64)
				if !(p50 > 0 && p99 >= p50) {
					t.Errorf("%s: p50 %v ms, p99 %v ms: want 0 < p50 ≤ p99", name, p50, p99)
				}
				if rss, _ := strconv.ParseFloat(row[5], 64); rss <= 0 {
					t.Errorf("%s: rss %v MiB, want > 0", name, rss)
				}
				if row[6] != "0" {
					t.Errorf("%s: lost %s messages, want 0", name, row[6])
				}
				stored := row[7]
				switch {
				case !tc.stored:
					if stored != "-" {
						t.Errorf("%s: stored %s with core NATS outputs, want -", name, stored)
					}
				case strings.HasPrefix(name, "ikpca"):
					// No output until the learner is ready: at least the measured ones.
					if n, _ := strconv.Atoi(stored); n < 300 || n > total {
						t.Errorf("%s: output stream holds %s, want 300..%d", name, stored, total)
					}
				case tc.name == "core":
					// Core NATS input: what a slow consumer missed is not there.
					if n, _ := strconv.Atoi(stored); n < 300 || n > total {
						t.Errorf("%s: output stream holds %s, want 300..%d", name, stored, total)
					}
				default:
					if stored != strconv.Itoa(total) {
						t.Errorf("%s: output stream holds %s, want %d (each output once)", name, stored, total)
					}
				}
			}
			if !strings.Contains(out, "ratio (b)/(a) msgs/s: ") {
				t.Errorf("no ratio line in\n%s", out)
			}
			if !strings.Contains(stderr.String(), "100% 300/300") {
				t.Errorf("progress bar never reached 300/300; stderr:\n%s", stderr.String())
			}
		})
	}
}

// summaryRows returns the fields of the summary table's rows (not the
// proxy's lateness lines under them).
func summaryRows(out string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "phase "):
			in = true
		case in && strings.HasPrefix(line, "raw = "):
			return rows
		case in:
			if f := strings.Fields(line); len(f) > 1 && f[1] != "proxy" {
				rows = append(rows, f)
			}
		}
	}
	return rows
}

// TestBenchDuration checks that --duration ends a measured window early:
// a pipeline over a 20 ms round trip cannot deliver 20,000 messages in
// 0.3 s, so its row reports fewer outputs, marked with *.
func TestBenchDuration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"--mode", "bare", "--rtt", "20ms", "--count", "20000", "--duration", "300ms", "--budget", "4",
		"--dim", "2", "--components", "1", "--storage", "memory", "--progress", "0"}
	start := time.Now()
	if err := Run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	rows := summaryRows(stdout.String())
	if len(rows) != 1 || rows[0][0] != "bare@20ms" {
		t.Fatalf("summary rows %v, want one bare@20ms in\n%s", rows, stdout.String())
	}
	outputs := rows[0][9]
	n, err := strconv.Atoi(strings.TrimSuffix(outputs, "*"))
	if !strings.HasSuffix(outputs, "*") || err != nil || n < 1 || n >= 20000 {
		t.Errorf("outputs %q, want 1..19999 marked *", outputs)
	}
	if seen := rows[0][2]; !strings.HasPrefix(seen, "2") || len(seen) < len("20.00ms") {
		t.Errorf("rtt seen %s, want ≈ 20ms", seen)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Run took %v with --duration 300ms", d)
	}
}

// TestBenchUsage checks that bad flags give the usage exit code and name the flag.
func TestBenchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "fast"}, "--mode"},
		{[]string{"--count", "0"}, "--count"},
		{[]string{"--components", "20", "--dim", "4"}, "--components"},
		{[]string{"--stream", "pink"}, "--stream"},
		{[]string{"--learner", "nope"}, "learner"},
		{[]string{"--rate", "-1"}, "--rate"},
		{[]string{"--mode", "raw", "--core"}, "--mode raw"},
		{[]string{"--mode", "raw,fast"}, "--mode"},
		{[]string{"--output", "kafka"}, "--output"},
		{[]string{"--rtt", "1ms,soon"}, "--rtt"},
		{[]string{"--rtt", "-1ms"}, "--rtt"},
		{[]string{"--duration", "-1s"}, "--duration"},
		{[]string{"--window", "0"}, "--window"},
		{[]string{"--max-ack-pending", "0"}, "--max-ack-pending"},
		{[]string{"--queue-size", "-1"}, "--queue-size"},
		{[]string{"--input", "trickle"}, "--input"},
		{[]string{"--shards", "4", "--partitions", "3"}, "--shards"},
		{[]string{"--shards", "2", "--core"}, "--shards"},
		{[]string{"--replicas", "6"}, "--replicas"},
		{[]string{"--input", "concurrent", "--rate", "1000"}, "--input concurrent"},
		{[]string{"--process-memory", "lots"}, "--process-memory"},
		{[]string{"--process-memory", "0"}, "--process-memory: want a positive number"},
		{[]string{"--process-memory", "2GiB", "--memory-limit", "auto"}, "--process-memory and --memory-limit"},
	} {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), tc.args, &stdout, &stderr); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: Run = %v, want ErrUsage", tc.args, err)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr does not name %q:\n%s", tc.args, tc.want, stderr.String())
		}
	}
}

// TestLatencyHist checks the quantiles of the log-bucketed histogram
// against exact ones within its 1 % bucket width.
func TestLatencyHist(t *testing.T) {
	var h latencyHist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}, {1, time.Second}} {
		got := h.quantile(tc.q)
		if rel := float64(got-tc.want) / float64(tc.want); rel < -0.011 || rel > 0.011 {
			t.Errorf("quantile(%v) = %v, want %v ± 1%%", tc.q, got, tc.want)
		}
	}
	if h.max != time.Second {
		t.Errorf("max = %v, want 1s", h.max)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads (the
// progress bar writes from its own goroutine).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
