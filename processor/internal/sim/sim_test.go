package sim

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	seed  = flag.Uint64("seed", 0, "replay this seed only (with -v: its trace)")
	seeds = flag.Int("seeds", 500, "how many seeds TestSim runs (from -first)")
	first = flag.Uint64("first", 1, "the first seed TestSim runs")
	clean = flag.Bool("nofaults", false, "with -seed: replay it without faults")
)

// TestSim runs the fleet's simulation for -seeds seeds and fails with a
// one-line replay command for each seed that breaks an invariant.
func TestSim(t *testing.T) {
	if *seed != 0 {
		var trace []string
		r := Run(Options{Seed: *seed, NoFaults: *clean, Trace: func(s string) { trace = append(trace, s) }})
		if testing.Verbose() {
			t.Log("\n" + strings.Join(trace, "\n"))
		}
		report(t, r)
		return
	}
	n := *seeds
	if testing.Short() {
		n = min(n, 100)
	}
	var mu sync.Mutex
	failed, staleSent, staleLanded, ownRetried, copies, staleReads := 0, 0, 0, 0, 0, 0
	var wg sync.WaitGroup
	next := make(chan uint64)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				r := Run(Options{Seed: s})
				mu.Lock()
				staleSent += r.StaleSent
				staleLanded += r.StaleLanded
				ownRetried += r.OwnSaveRetried
				copies += r.LetterCopies
				staleReads += r.StaleReads
				if len(r.Violations) > 0 {
					failed++
					if failed <= 10 {
						report(t, r)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for s := *first; s < *first+uint64(n); s++ {
		next <- s
	}
	close(next)
	wg.Wait()
	t.Logf("%d seeds, %d broke an invariant; snapshot writes of an ended epoch: %d reached the store, %d of them landed "+
		"(before the newer owner claimed the key; none over a newer epoch's); saves made again over their own epoch's earlier save: %d; "+
		"copies of dead-lettered inputs settled at once: %d; reads answered older than the latest (a replica behind): %d",
		n, failed, staleSent, staleLanded, ownRetried, copies, staleReads)
	if failed > 0 {
		t.Errorf("%d of %d seeds broke an invariant", failed, n)
	}
}

func report(t *testing.T, r Result) {
	t.Helper()
	if len(r.Violations) == 0 {
		return
	}
	t.Errorf("seed %d: %d violations, first: %s\n  notes: %s\n  replay: go test ./processor/internal/sim -run 'TestSim$' -seed=%d -v",
		r.Seed, len(r.Violations), r.Violations[0], fmt.Sprint(r.Notes), r.Seed)
}

// TestReplay checks that a seed replays bit for bit: two runs of one seed
// take the same number of events, end at the same time and find the same.
func TestReplay(t *testing.T) {
	for s := uint64(1); s <= 20; s++ {
		a, b := Run(Options{Seed: s}), Run(Options{Seed: s})
		if a.Events != b.Events || a.Drained != b.Drained || fmt.Sprint(a.Violations) != fmt.Sprint(b.Violations) {
			t.Fatalf("seed %d ran differently twice: %d/%d events, drained at %v/%v", s, a.Events, b.Events, a.Drained, b.Drained)
		}
	}
}

// TestNoFaults: without faults every seed is clean (the model itself
// keeps the invariants).
func TestNoFaults(t *testing.T) {
	for s := uint64(1); s <= 200; s++ {
		r := Run(Options{Seed: s, NoFaults: true})
		report(t, r)
	}
}
