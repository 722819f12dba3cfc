package sim

import "time"

// Stale reads. A KV Get of the coordination bucket or of the snapshot
// store is a direct get (AllowDirect, the nats.go default), answered by
// whichever replica of the R3 bucket the request reaches, from its own
// copy: a follower still applying the leader's last writes answers an
// older value (nats-server issue 4710; internal/clustertest
// TestLeaderRevisionAfterPut). Even a key the reading member has just
// written itself may come back older. Writes — put, create, update with
// its compare-and-set, delete — are decided by the leader at the latest
// revision. A watcher is an ordered consumer: its staleness is its delay,
// modelled by watchSend.
//
// So a read here returns the version of the key that was the latest at
// some moment in the last lag: any committed value, never one from the
// future, never an uncommitted one. Each read draws its own lag (two
// reads may reach two replicas: a later read can be older than an
// earlier one). A run draws how often reads are behind and by how much at
// most (a fault like the others); after the fault window, replicas that
// are behind are behind by a few milliseconds at most (staleQuiet).

// staleQuiet is the most a read lags once the faults are over.
const staleQuiet = 5 * time.Millisecond

// snapVer is one committed version of a key's snapshot.
type snapVer struct {
	s  *snapEntry
	at time.Duration
}

// drawStale draws the run's stale-read fault: none in a quarter of the
// runs, else a share of reads behind by up to 5 ms, 50 ms or 400 ms.
func (w *world) drawStale() {
	w.staleMax = [...]time.Duration{0, 5 * time.Millisecond, 50 * time.Millisecond, 400 * time.Millisecond}[w.rng.IntN(4)]
	w.staleP = [...]float64{0.2, 0.5, 1}[w.rng.IntN(3)]
}

// readLag is how far behind the leader the replica answering a read is.
func (w *world) readLag() time.Duration {
	if w.staleMax == 0 || !w.chance(w.staleP) {
		return 0
	}
	most := w.staleMax
	if !w.lossy {
		most = min(most, staleQuiet)
	}
	return w.between(0, most+1)
}

// kvRead is a Get of key from the coordination bucket: the version that
// was the latest lag ago (nil: none then, or deleted).
func (w *world) kvRead(key string) *kvEntry {
	lag := w.readLag()
	if lag == 0 {
		return w.kv[key]
	}
	h := w.kvHist[key]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].at <= w.now-lag {
			if h[i].rev != w.kv[key].rev {
				w.res.StaleReads++
			}
			e := h[i]
			return &e
		}
	}
	if len(h) > 0 {
		w.res.StaleReads++
	}
	return nil
}

// snapRead is a Load of key's snapshot: the version that was the latest
// lag ago (nil: none then).
func (w *world) snapRead(key string) *snapEntry {
	lag := w.readLag()
	if lag == 0 {
		return w.snaps[key]
	}
	h := w.snapHist[key]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].at <= w.now-lag {
			if h[i].s != w.snaps[key] {
				w.res.StaleReads++
			}
			return h[i].s
		}
	}
	if len(h) > 0 {
		w.res.StaleReads++
	}
	return nil
}
