package e2e

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBench runs "kpcastream bench" end to end on its embedded server with
// tiny counts, in JetStream (preloaded and fixed-rate) and core NATS mode,
// and checks that both pipelines delivered every measured message.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server")
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"jetstream", nil},
		{"jetstream-rate", []string{"--rate", "2000", "--storage", "memory"}},
		{"core", []string{"--core", "--rate", "5000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--count", "300", "--keys", "2", "--budget", "16", "--dim", "4",
				"--components", "2", "--progress", "1ms", "--idle-timeout", "20s"}, tc.args...)
			var stdout, stderr syncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := Run(ctx, args, &stdout, &stderr); err != nil {
				t.Fatalf("Run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			out := stdout.String()
			for _, name := range []string{"bare", "ikpca"} {
				row := regexp.MustCompile(`(?m)^` + name + `\s+(\d+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+\d+\s+([\d.]+)\s+[\d.]+\s+(\d+)$`).FindStringSubmatch(out)
				if row == nil {
					t.Fatalf("no result row for %s in\n%s", name, out)
				}
				if rate, _ := strconv.Atoi(row[1]); rate <= 0 {
					t.Errorf("%s: msgs/s = %s, want > 0", name, row[1])
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
