package monitorbench

import (
	"os"
	"testing"
)

// TestProcessMonitoring runs the benchmark on the stationary and on the
// drifting process and prints the tables (bench/RESULTS.md §10). It checks
// that learning normal detects more faulty samples by SPE than learning
// always (summed over the faults) and that the monitor's own two limits
// raise about 2 % false alarms (either limit, 1 % each) on a normal run of
// 800 samples (0.5–3.5 %: the ±0.5-point check of each limit over 12,000
// samples is learners/monitor's TestFalseAlarmRate). The comparison with batch KPCA is reported, not
// asserted: see RESULTS.md for where the target is met and where not.
func TestProcessMonitoring(t *testing.T) {
	for _, s := range []Setup{
		{N: 400, Run: 800, Onset: 160, K: 5, Budget: 100, Level: 0.99, Seed: 1},
		{N: 400, Run: 800, Onset: 160, K: 5, Budget: 100, Level: 0.99, Seed: 1, Drift: 0.0001},
	} {
		s.TrendLambda = envLambda()
		rows, err := Evaluate(s, Methods(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("drift %v per sample: N %d, runs of %d with the fault from sample %d, k %d, B %d, level %v",
			s.Drift, s.N, s.Run, s.Onset, s.K, s.Budget, s.Level)
		WriteTable(os.Stdout, rows)
		det := map[string]float64{}
		for _, r := range rows {
			if r.Fault != "normal" {
				det[r.Method] += r.DetSPE
			}
		}
		t.Logf("SPE detection summed over the faults: %v", det)
		if det["online always"] >= det["online normal"] {
			t.Errorf("online always detects %.3f by SPE, online normal %.3f: want fewer", det["online always"], det["online normal"])
		}
		for _, r := range rows {
			if r.Method == "online normal" && r.Fault == "normal" && (r.OwnFA < 0.005 || r.OwnFA > 0.035) {
				t.Errorf("online normal: own false alarms (either limit) on a normal run %.4f, want about 0.02", r.OwnFA)
			}
		}
	}
}
