package sim

import (
	"flag"
	"fmt"
	"regexp"
	"sort"
	"testing"
)

var census = flag.Int("census", 0, "TestCensus: run this many seeds and count the kinds of their first violations")

// TestCensus counts, over -census seeds, the kinds of violation found
// and the first seed of each: a finding's rate, before and after a fix.
func TestCensus(t *testing.T) {
	if *census == 0 {
		t.Skip("run with -census=N")
	}
	digits := regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ms|s|µs)?`)
	kinds := map[string]int{}
	firstSeed := map[string]uint64{}
	for s := uint64(1); s <= uint64(*census); s++ {
		r := Run(Options{Seed: s})
		if len(r.Violations) == 0 {
			continue
		}
		v := r.Violations[0]
		if i := len("t="); len(v) > i {
			if j := regexp.MustCompile(`^t=[^ ]+ `).FindStringIndex(v); j != nil {
				v = v[j[1]:]
			}
		}
		k := digits.ReplaceAllString(v, "N")
		if len(k) > 90 {
			k = k[:90]
		}
		kinds[k]++
		if _, ok := firstSeed[k]; !ok {
			firstSeed[k] = s
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return kinds[ks[i]] > kinds[ks[j]] })
	for _, k := range ks {
		fmt.Printf("%5d  first seed %5d  %s\n", kinds[k], firstSeed[k], k)
	}
}
