package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// manyKeys is how many keys the worlds of this file spread their messages
// over: far more than memory_budget holds in memory (issue 30).
const manyKeys = 400

// manyKeysWorld is a world of manyKeys keys whose processes hold about two
// keys per worker in memory (memory_budget 600000 B over 4 partitions of
// one worker each: (150000 − 100 keys · 1 KiB)/size of a key) and the rest
// in their local tier under its data_dir, so that eviction to disk,
// reading back from disk, and the restores of moved partitions from the
// snapshots all happen under the faults. It returns the local tier's
// directory.
func manyKeysWorld(t *testing.T, edit func(string) string) (*world, string) {
	dir := t.TempDir()
	w := newWorldEdit(t, func(s string) string {
		if edit != nil {
			s = edit(s)
		}
		return manyKeysConfig(t, s, dir)
	})
	w.keys, w.data = nil, map[string][][]float64{}
	for i := range manyKeys {
		k := fmt.Sprintf("k%03d", i)
		w.keys = append(w.keys, k)
		w.data[k] = nil
	}
	return w, filepath.Join(dir, "local")
}

// manyKeysConfig edits the test configuration cfg (config) for a
// many-keys world: memory_budget 600000 B under the snapshot policy, and
// data_dir dir, whose "local" directory holds the local tier.
func manyKeysConfig(t testing.TB, cfg, dir string) string {
	t.Helper()
	const snap = "    snapshot: {every_messages: 10, every: -1s}\n"
	if !strings.Contains(cfg, snap) {
		t.Fatalf("the test config has no line %q", snap)
	}
	cfg = strings.Replace(cfg, snap, snap+"    memory_budget: 600000\n", 1)
	return cfg + fmt.Sprintf("data_dir: %q\n", dir)
}

// tierFiles lists the local tier's files in dir.
func tierFiles(dir string) []string {
	f, _ := filepath.Glob(filepath.Join(dir, "proc-p*-e*-w*.db"))
	return f
}

// TestKillOwnerManyKeys is TestKillOwner with keys far beyond the live
// set: the killed member's keys, many of them in its local tier, are
// restored by the survivor from their snapshots and the replay, which
// never reads the dead member's local files; every key ends with the
// state of an uninterrupted run and every output is there once.
func TestKillOwnerManyKeys(t *testing.T) {
	w, local := manyKeysWorld(t, nil)
	a, b := start(t, w.cfg), start(t, w.cfg)
	ida, idb := w.memberOf(a.cmd.Process.Pid), w.memberOf(b.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "both own partitions", func() bool { return w.count(ida) == 2 && w.count(idb) == 2 })
	w.publishAsync(1500)
	// Keys went to disk: the files grew past the empty store's few pages.
	waitFor(t, 30*time.Second, "local tier files of both members holding keys", func() bool {
		big := 0
		for _, f := range tierFiles(local) {
			if fi, err := os.Stat(f); err == nil && fi.Size() >= 64<<10 {
				big++
			}
		}
		return len(tierFiles(local)) == partitions && big > 0
	})
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = a.cmd.Process.Wait()
	w.publishAsync(500)
	waitFor(t, 20*time.Second, "survivor owns every partition", func() bool { return w.count(idb) == partitions })
	w.publishAsync(1000)
	waitFor(t, 60*time.Second, "drained", w.drained)
	b.stop(t)
	w.check()
	// The survivor removed its files at its stop; the dead member's are
	// left for the next start in the directory to remove.
	if n := len(tierFiles(local)); n != 2 {
		t.Errorf("%d local tier files after the stop, want the killed member's 2: %v", n, tierFiles(local))
	}
	c := start(t, w.cfg)
	idc := w.memberOf(c.cmd.Process.Pid)
	waitFor(t, 20*time.Second, "a new member owns every partition", func() bool { return w.count(idc) == partitions })
	c.stop(t)
	if left := tierFiles(local); len(left) != 0 {
		t.Errorf("local tier files left after a clean start and stop: %v", left)
	}
}

// TestPausedOwnerManyKeys is TestPausedOwner with keys far beyond the
// live set: the frozen member's local tier, written under its old epoch,
// is never read by the new owners, and its writes after SIGCONT are
// fenced.
func TestPausedOwnerManyKeys(t *testing.T) {
	w, _ := manyKeysWorld(t, nil)
	pausedOwner(t, w)
}
