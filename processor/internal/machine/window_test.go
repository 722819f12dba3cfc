package machine

import (
	"slices"
	"testing"
	"time"
)

// group returns an output group of input seq with n messages whose
// subjects name the seq and the index, so a script can read what is sent.
func group(seq uint64, n int) *outGroup[uint64, string] {
	g := &outGroup[uint64, string]{seq: seq, in: seq, result: "ok"}
	for i := range n {
		g.msgs = append(g.msgs, subjectOf(seq, i))
	}
	return g
}

func subjectOf(seq uint64, i int) string { return string(rune('a'+seq)) + string(rune('0'+i)) }

// TestWindowKeyOrder scripts one key's outputs through failures in every
// position: whatever fails, the next message sent is the first one not
// acknowledged, so the stream receives the key's outputs in input order.
func TestWindowKeyOrder(t *testing.T) {
	// Each script: which attempts fail (by attempt number, 0-based).
	for _, tc := range []struct {
		name  string
		fails []int
	}{
		{"none", nil},
		{"first", []int{0}},
		{"middle of a group", []int{1}},
		{"last of a group", []int{2}},
		{"twice in a row", []int{3, 4}},
		{"every other", []int{0, 2, 4, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &window{limit: 100}
			q := &outQueue[uint64, string]{}
			var sent, landed []string
			var inputs []uint64
			now := t0
			if !push(w, q, group(1, 3)) {
				t.Fatal("first push: not ready")
			}
			first := q.send()
			if push(w, q, group(2, 1)) || push(w, q, group(3, 2)) {
				t.Fatal("a push while the key has a message in flight must not send")
			}
			if w.pending != 6 {
				t.Fatalf("pending %d, want 6", w.pending)
			}
			for attempt := 0; len(q.groups) > 0; attempt++ {
				if attempt > 50 {
					t.Fatal("no progress")
				}
				m := first
				if attempt > 0 {
					if !q.ready(now) {
						t.Fatalf("attempt %d: not ready at %v (retry at %v)", attempt, now, q.retryAt)
					}
					m = q.send()
				}
				sent = append(sent, m)
				if q.ready(now) {
					t.Fatal("ready with a message in flight")
				}
				if slices.Contains(tc.fails, attempt) {
					q.failed(false)
					at := q.endRound(now)
					if q.ready(now) {
						t.Fatal("ready before the retry backoff")
					}
					now = at
					continue
				}
				landed = append(landed, m)
				if done, _ := acked(w, q); done != nil {
					inputs = append(inputs, done.seq)
				}
			}
			want := []string{subjectOf(1, 0), subjectOf(1, 1), subjectOf(1, 2), subjectOf(2, 0), subjectOf(3, 0), subjectOf(3, 1)}
			if !slices.Equal(landed, want) {
				t.Errorf("landed %v, want %v (sent %v)", landed, want, sent)
			}
			if !slices.Equal(inputs, []uint64{1, 2, 3}) {
				t.Errorf("inputs acked %v, want [1 2 3] (each once its last output landed)", inputs)
			}
			if w.pending != 0 || len(sent) != 6+len(tc.fails) {
				t.Errorf("pending %d, sent %d; want 0 and %d", w.pending, len(sent), 6+len(tc.fails))
			}
		})
	}
}

// TestWindowHeldSaves: a snapshot job handed over while the key has
// outputs queued waits for the outputs of every message it holds, not
// for later ones; one handed over with nothing queued is not held.
func TestWindowHeldSaves(t *testing.T) {
	w := &window{limit: 4}
	q := &outQueue[uint64, string]{}
	if q.hold(Job{ID: 9}) {
		t.Fatal("held with nothing queued")
	}
	push(w, q, group(1, 1))
	push(w, q, group(2, 2))
	j1 := Job{ID: 1}
	if !q.hold(j1) { // holds messages 1 and 2
		t.Fatal("not held with outputs queued")
	}
	push(w, q, group(3, 1))
	j2 := Job{ID: 2}
	q.hold(j2) // holds 3 as well
	if !w.full() {
		t.Errorf("pending %d of limit 4: want full", w.pending)
	}
	step := func(wantDone uint64, want ...Job) {
		t.Helper()
		q.send()
		done, saves := acked(w, q)
		if (done == nil) != (wantDone == 0) || (done != nil && done.seq != wantDone) {
			t.Fatalf("done %v, want %d", done, wantDone)
		}
		if !slices.Equal(saves, want) {
			t.Fatalf("released %v, want %v", saves, want)
		}
	}
	step(1)     // 1 done; 2 still queued: j1 waits
	step(0)     // first of 2
	step(2, j1) // 2 done: j1 released, j2 waits for 3
	if w.full() {
		t.Error("still full with one output pending")
	}
	// A failure of 3 does not release j2.
	q.send()
	q.failed(true)
	q.endRound(t0)
	if !q.hopeless() {
		t.Error("a refused head: hopeless for shutdown")
	}
	if !q.ready(t0.Add(time.Second)) {
		t.Fatal("not ready after the backoff")
	}
	step(3, j2)
	if q.hopeless() || len(q.groups) != 0 || len(q.held) != 0 || w.pending != 0 {
		t.Errorf("after the last ack: %+v, pending %d", q, w.pending)
	}
}

func TestRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, 20 * time.Millisecond}, {2, 40 * time.Millisecond}, {3, 80 * time.Millisecond}, {6, 640 * time.Millisecond}, {7, time.Second}, {100, time.Second}} {
		if got := retryBackoff(tc.n); got != tc.want {
			t.Errorf("retryBackoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}
