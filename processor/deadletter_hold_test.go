package processor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// dlHold is a running one-partition pipeline whose learner is warm and
// whose dead letters can be made to hang.
type dlHold struct {
	e    *env
	r    *running
	pc   PipelineConfig
	name string // the dead-letter stream
	cfg  jetstream.StreamConfig
	subj string
}

func startDLHold(t *testing.T, name string, observe **observer.ObservedLogs) *dlHold {
	e := newEnv(t)
	pc := pipelineConfig(name)
	pc.Partitions = 1
	pc.Snapshot = SnapshotPolicy{EveryMessages: 1, Every: -1} // the key's state saved at once: its hold goes
	if observe != nil {
		var core zapcore.Core
		core, *observe = observer.New(zap.InfoLevel)
		e.observe = core
	}
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1, LeaseTTL: 3 * time.Second, CheckpointEvery: 100 * time.Millisecond})
	e.observe = nil
	d := &dlHold{e: e, r: r, pc: pc, name: r.p.pipes[0].cfg.deadLetterStreamName(0), subj: "in." + name + ".k"}
	warm := vectors(3, pcaWarm)
	for i, x := range warm {
		e.publish(t, d.subj, encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	waitFor(t, 10*time.Second, "warm-up outputs acknowledged", func() bool { return e.drained(t, pc) })
	waitFor(t, 5*time.Second, "the checkpoint past the warm-up", func() bool { return e.records(t, pc)[0].Checkpoint == uint64(len(warm)+1) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.js.Stream(ctx, d.name)
	if err != nil {
		t.Fatalf("dead-letter stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.cfg = info.Config
	return d
}

// hang takes the dead-letter stream away and puts a silent subscriber on
// its subject: every attempt times out, and is retried.
func (d *dlHold) hang(t *testing.T) *nats.Subscription {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.e.js.DeleteStream(ctx, d.name); err != nil {
		t.Fatal(err)
	}
	silent, err := d.e.nc.SubscribeSync("kpca.dlq." + d.pc.Name)
	if err != nil {
		t.Fatal(err)
	}
	return silent
}

// restore puts the dead-letter stream back.
func (d *dlHold) restore(t *testing.T, silent *nats.Subscription) {
	if err := silent.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.e.js.CreateStream(ctx, d.cfg); err != nil {
		t.Fatal(err)
	}
}

// TestDeadLetterHoldsCheckpoint: while a bad input's dead letter cannot
// be stored — every attempt times out and is retried for
// snapshot_timeout — the partition's renewals keep its checkpoint at the
// input, and it passes the input only once the dead letter has landed
// (issue 28). Before, the machine released the input's hold when it
// emitted the Reject: the renewals wrote a checkpoint past it at once,
// and a crash (or a fence that stopped the dead letter) left the input
// neither dead-lettered nor replayed.
func TestDeadLetterHoldsCheckpoint(t *testing.T) {
	d := startDLHold(t, "dlhold", nil)
	defer func() {
		if err := d.r.stop(); err != nil {
			t.Error(err)
		}
	}()
	bad := d.e.records(t, d.pc)[0].Checkpoint // the bad input's stream sequence
	silent := d.hang(t)
	d.e.publish(t, d.subj, []byte("{not json"), "")
	// Renewals every 100 ms for 1.5 s, while the dead letter is retried.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cp := d.e.records(t, d.pc)[0].Checkpoint; cp > bad {
			t.Fatalf("checkpoint %d while the dead letter of %d is not stored, want ≤ %d", cp, bad, bad)
		}
	}
	if n, _, _ := silent.Pending(); n == 0 {
		t.Fatal("no dead-letter attempt reached the silent subscriber")
	}
	d.restore(t, silent)
	waitFor(t, 10*time.Second, "the dead letter stored", func() bool { return d.e.streamMsgs(t, d.name) == 1 })
	waitFor(t, 5*time.Second, "the checkpoint past the dead-lettered input", func() bool { return d.e.records(t, d.pc)[0].Checkpoint == bad+1 })
	if got := d.r.stats(d.pc.Name).DeadLettered; got != 1 {
		t.Errorf("dead-lettered %d, want 1", got)
	}
}

// TestDeadLetterCancelledByFence: a fenced stop cancels the workers'
// context, which ends a dead letter's attempt in flight. The input goes
// back (a nak, its hold kept) and the partition's next epoch dead-letters
// it. Before, the attempt's context error was taken for a failed dead
// letter: logged, and the input terminated — with the checkpoint already
// past it, the bad input was lost.
func TestDeadLetterCancelledByFence(t *testing.T) {
	var logs *observer.ObservedLogs
	d := startDLHold(t, "dlcancel", &logs)
	defer func() {
		if err := d.r.stop(); err != nil {
			t.Error(err)
		}
	}()
	pt := d.r.p.pipes[0].parts[0].Load()
	silent := d.hang(t)
	d.e.publish(t, d.subj, []byte("{not json"), "")
	waitFor(t, 5*time.Second, "an attempt of the dead letter in flight", func() bool { n, _, _ := silent.Pending(); return n > 0 })
	pt.fence.Revoke() // publish_attempt is 2 s: the attempt is still in flight
	waitFor(t, 10*time.Second, "the fenced partition stopped", func() bool { return closed(&pt.done) })
	if n := logs.FilterMessage("publish dead letter").Len(); n != 0 {
		t.Errorf("%d dead letters logged as failed and their input terminated, want none (the input goes back)", n)
	}
	if got := d.r.stats(d.pc.Name).DeadLettered; got != 0 {
		t.Errorf("dead-lettered %d by the fenced epoch, want 0", got)
	}
	d.restore(t, silent)
	// The member takes the partition again (a new epoch) and replays the
	// input from the checkpoint.
	// (The worker counts a dead letter after the stream acknowledged it.)
	waitFor(t, 15*time.Second, "the dead letter stored and counted by the next epoch", func() bool {
		return d.e.streamMsgs(t, d.name) == 1 && d.r.stats(d.pc.Name).DeadLettered == 1
	})
}

// TestDeadLetterStreamMissing: with the dead-letter stream deleted, a
// dead letter's publish answers "no response from stream" (no server
// answers for the subject). The input is kept — given back, its
// checkpoint held — with an error naming the subject, and dead-lettered
// once the stream is there again. Before, the failure was taken for
// final: logged, and the input terminated, stored nowhere (lost).
func TestDeadLetterStreamMissing(t *testing.T) {
	var logs *observer.ObservedLogs
	d := startDLHold(t, "dlgone", &logs)
	defer func() {
		if err := d.r.stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.e.js.DeleteStream(ctx, d.name); err != nil {
		t.Fatal(err)
	}
	d.e.publish(t, d.subj, []byte("{not json"), "")
	bad := uint64(pcaWarm + 1) // its stream sequence
	waitFor(t, 10*time.Second, "the input refused twice for the missing stream", func() bool {
		return logs.FilterField(zap.String("reason", "no_stream")).FilterMessage("message refused, will be redelivered").Len() >= 2
	})
	l := logs.FilterField(zap.String("reason", "no_stream")).All()[0]
	if l.Level != zap.ErrorLevel || !strings.Contains(fmt.Sprint(l.ContextMap()["error"]), `"kpca.dlq.dlgone"`) {
		t.Errorf("refusal logged at %v, %v; want an error naming the dead-letter subject", l.Level, l.ContextMap())
	}
	if n := logs.FilterMessage("publish dead letter").Len(); n != 0 {
		t.Errorf("%d dead letters given up and their inputs terminated, want none", n)
	}
	if cp := d.e.records(t, d.pc)[0].Checkpoint; cp != bad {
		t.Errorf("checkpoint %d while the input is kept, want %d", cp, bad)
	}
	if _, err := d.e.js.CreateStream(ctx, d.cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the dead letter stored once the stream is back, and the checkpoint past it", func() bool {
		return d.e.streamMsgs(t, d.name) == 1 && d.r.stats(d.pc.Name).DeadLettered == 1 && d.e.records(t, d.pc)[0].Checkpoint == bad+1
	})
}
