package monitorbench

import (
	"fmt"
	"os"

	"github.com/kpcastream/kpcastream/learners/monitor"
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
		if det["online trend"] < det["online normal"] {
			t.Errorf("online normal with the trend gate detects %.3f by SPE, without it %.3f: want at least as many", det["online trend"], det["online normal"])
		}
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

// TestTrendLambda is the trend gate's sensitivity to its EWMA weight λ
// (default 2/(confirm + 1) = 0.18): SPE detection of the slow faults
// (the simulated drift-x3, stationary and drifting, and satellite's ramp)
// and the false alarms on the simulated normal run, for λ from 0.05 to
// 0.5, against learn normal without the gate. It checks that every λ up
// to 0.3 (an EWMA remembering ≥ 6 observations) sees twice as much of
// satellite's ramp as no gate (the default is not a lucky pick; at 0.5,
// a memory of two observations, the outcome hangs on details: 7.6 % when
// the spread was measured every 100 additions, 49 % every 500), and that
// every λ keeps the monitor's own false alarms on a normal run about 2 %.
func TestTrendLambda(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: eight evaluations of the benchmark and satellite (about 7 s)")
	}
	var offRamp float64
	for _, lambda := range []float64{-1, 0.005, 0.01, 0, 0.05, 0.18, 0.3, 0.5} {
		label := fmt.Sprint(lambda)
		switch lambda {
		case -1:
			label = "off"
		case 0:
			label = fmt.Sprintf("%.3f (default)", monitor.DefaultTrendLambda(0.99, monitor.DefaultWindow(0.99)))
		}
		line := fmt.Sprintf("| %s |", label)
		for _, drift := range []float64{0, 0.0001} {
			s := Setup{N: 400, Run: 800, Onset: 160, K: 5, Budget: 100, Level: 0.99, Seed: 1, Drift: drift}
			m := Methods(s)[4].(*Online) // online trend
			if lambda < 0 {
				m.Monitor.Trend = monitor.TrendOff
			} else {
				m.Monitor.TrendLambda = lambda
			}
			rows, err := Evaluate(s, []Method{m})
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for _, r := range rows {
				switch r.Fault {
				case "normal":
					line += fmt.Sprintf(" %.1f %% |", 100*r.OwnFA)
					if r.OwnFA < 0.005 || r.OwnFA > 0.035 {
						t.Errorf("λ %s, drift %v: own false alarms on a normal run %.4f, want about 0.02", label, drift, r.OwnFA)
					}
				case "drift-x3":
					line += fmt.Sprintf(" %.1f %% |", 100*r.DetSPE)
				}
				sum += r.DetSPE
			}
			line += fmt.Sprintf(" %.2f |", sum)
		}
		var det map[string]float64
		if lambda < 0 {
			det = satellite(t, 0, false, false)
			offRamp = det["online normal ramp-0.01sd"]
			line += fmt.Sprintf(" %.1f %% |", 100*offRamp)
		} else {
			det = satellite(t, lambda, false, false)
			r := det["online trend ramp-0.01sd"]
			line += fmt.Sprintf(" %.1f %% |", 100*r)
			if lambda <= 0.3 && r < 2*offRamp {
				t.Errorf("λ %s: satellite ramp %.3f, without the gate %.3f: want at least twice", label, r, offRamp)
			}
		}
		t.Log(line)
	}
}
