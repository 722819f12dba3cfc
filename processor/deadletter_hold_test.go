package processor

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestDeadLetterHoldsCheckpoint: while a bad input's dead letter cannot
// be stored — the dead-letter stream is gone and a silent subscriber
// takes its subject, so every attempt times out and is retried for
// snapshot_timeout — the partition's
// renewals keep its checkpoint at the input, and it passes the input only
// once the dead letter has landed (issue 28). Before, the machine
// released the input's hold when it emitted the Reject: the renewals
// wrote a checkpoint past it at once, and a crash (or a fence that
// stopped the dead letter) left the input neither dead-lettered nor
// replayed.
func TestDeadLetterHoldsCheckpoint(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("dlhold")
	pc.Partitions = 1
	pc.Snapshot = SnapshotPolicy{EveryMessages: 1, Every: -1} // the key's state saved at once: its hold goes
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}, Workers: 1, LeaseTTL: 3 * time.Second, CheckpointEvery: 100 * time.Millisecond})
	defer func() {
		if err := r.stop(); err != nil {
			t.Error(err)
		}
	}()
	subj := "in.dlhold.k"
	warm := vectors(3, pcaWarm)
	for i, x := range warm {
		e.publish(t, subj, encodeObs(t, "json", x, fmt.Sprint(i)), "")
	}
	waitFor(t, 10*time.Second, "warm-up outputs acknowledged", func() bool { return e.drained(t, pc) })
	bad := uint64(len(warm) + 1) // the bad input's stream sequence
	waitFor(t, 5*time.Second, "the checkpoint past the warm-up", func() bool { return e.records(t, pc)[0].Checkpoint == bad })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := r.p.pipes[0].cfg.deadLetterStreamName(0)
	st, err := e.js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("dead-letter stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	silent, err := e.nc.SubscribeSync("kpca.dlq.dlhold")
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, subj, []byte("{not json"), "")
	// Renewals every 100 ms for 1.5 s, while the dead letter is retried.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cp := e.records(t, pc)[0].Checkpoint; cp > bad {
			t.Fatalf("checkpoint %d while the dead letter of %d is not stored, want ≤ %d", cp, bad, bad)
		}
	}
	if n, _, _ := silent.Pending(); n == 0 {
		t.Fatal("no dead-letter attempt reached the silent subscriber")
	}
	if err := silent.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, info.Config); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the dead letter stored", func() bool { return e.streamMsgs(t, name) == 1 })
	waitFor(t, 5*time.Second, "the checkpoint past the dead-lettered input", func() bool { return e.records(t, pc)[0].Checkpoint == bad+1 })
	if got := r.stats(pc.Name).DeadLettered; got != 1 {
		t.Errorf("dead-lettered %d, want 1", got)
	}
}
