package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitorbench "github.com/kpcastream/kpcastream/bench/monitor"
	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/kpcaeval"
	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestReplayDriftStream runs the README's replay example on the drift
// stream and checks the projections file, the model exports and the
// export's accuracy against batch KPCA of the last 2,000 rows.
func TestReplayDriftStream(t *testing.T) {
	data := filepath.Join(learnertest.DataDir(t), "drift_stream.csv")
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	proj := filepath.Join(dir, "proj.csv")
	code, _, stderr := runCmd(t, "replay", "--learner", "ikpca", "--kernel", "rbf", "--gamma", "0.5",
		"--components", "5", "--budget", "200", "--forget", "0.999", "--in", data, "--drop", "phase",
		"--out", proj, "--model-out", model, "--model-at", "10000,15000")
	if code != 0 {
		t.Fatalf("replay exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "replay: 20000 rows") {
		t.Errorf("stderr has no final progress line:\n%s", stderr)
	}
	if !strings.Contains(stderr, "replay: budget ok: stored ") {
		t.Errorf("stderr has no budget line with the advice ok (B = 200 holds the drift stream):\n%s", stderr)
	}
	x, n, d, _, err := learnertest.LoadCSV(data, []string{"phase"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		rows int
	}{{filepath.Join(dir, "model.10000.json"), 10000}, {filepath.Join(dir, "model.15000.json"), 15000}, {model, n}} {
		raw, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := codec.DecodeModel(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if m.Seen != int64(c.rows) || m.Learner != "ikpca" || len(m.Offsets) != 5 {
			t.Errorf("%s: seen %d learner %q k %d, want %d ikpca 5", c.path, m.Seen, m.Learner, len(m.Offsets), c.rows)
		}
		rep, err := kpcaeval.Compare(m, x[(c.rows-2000)*d:c.rows*d], 2000, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: similarity with batch KPCA of the last 2000 rows %.4f", filepath.Base(c.path), rep.Similarity)
		if rep.Similarity < 0.95 {
			t.Errorf("%s: similarity with batch KPCA of the last 2000 rows %.4f, want ≥ 0.95", c.path, rep.Similarity)
		}
	}
	recs := readCSVFile(t, proj)
	if got := strings.Join(recs[0], ","); got != "row,pass,z1,z2,z3,z4,z5,spe,t2,spe_limit,t2_limit,alarm,lspe,lspe_limit,lewma,lewma_limit" {
		t.Errorf("header %q", got)
	}
	if len(recs) != n+1 {
		t.Fatalf("%d projection lines, want %d", len(recs)-1, n)
	}
	last := recs[n]
	if last[0] != strconv.Itoa(n-1) || last[2] == "" {
		t.Errorf("last line %q: want row %d with a projection", last, n-1)
	}
	if recs[1][2] != "" {
		t.Errorf("first line %q: want empty projection before the learner is ready", recs[1])
	}
}

func TestReplayBatchMatchesReference(t *testing.T) {
	data := filepath.Join(learnertest.DataDir(t), "three_clusters.csv")
	dir := t.TempDir()
	model := filepath.Join(dir, "m.json")
	code, _, stderr := runCmd(t, "replay", "--learner", "batch", "--gamma", "10", "--components", "5",
		"--in", data, "--drop", "cluster", "--model-out", model, "--passes", "2", "--shuffle-seed", "3", "--progress", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	m, err := codec.DecodeModel(raw)
	if err != nil {
		t.Fatal(err)
	}
	x, n, d, _, err := learnertest.LoadCSV(data, []string{"cluster"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kpcaeval.Compare(m, x, n, d)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Similarity < 1-1e-9 || len(m.Points) != n {
		t.Errorf("batch replay: similarity %.12f with %d points, want 1 with %d", rep.Similarity, len(m.Points), n)
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("a,b,label\n1,2,0\n3,oops,1\n"), 0o644)
	short := filepath.Join(dir, "short.csv")
	os.WriteFile(short, []byte("a,b\n1,2\n3\n"), 0o644)
	good := filepath.Join(dir, "good.csv")
	os.WriteFile(good, []byte("a,b\n1,2\n3,4\n"), 0o644)
	model := filepath.Join(dir, "m.json")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no_input", []string{"replay", "--model-out", model}, 2, "--in is required"},
		{"no_model_out", []string{"replay", "--in", good}, 2, "--model-out is required"},
		{"bad_cell", []string{"replay", "--in", bad, "--drop", "label", "--model-out", model}, 1, `line 3, column 2 ("b"): "oops" is not a finite number`},
		{"short_row", []string{"replay", "--in", short, "--model-out", model}, 1, "line 3: 1 columns, want 2"},
		{"unknown_drop", []string{"replay", "--in", good, "--drop", "label", "--model-out", model}, 1, `--drop names column "label"`},
		{"bad_learner", []string{"replay", "--in", good, "--learner", "pca", "--model-out", model}, 1, `unknown learner "pca"`},
		{"bad_model_at", []string{"replay", "--in", good, "--model-out", model, "--model-at", "10,x"}, 2, `want positive row counts`},
		{"missing_file", []string{"replay", "--in", filepath.Join(dir, "nope.csv"), "--model-out", model}, 1, "no such file"},
		{"bad_rule", []string{"replay", "--in", good, "--learner", "kha", "--rule", "hebb", "--model-out", model}, 1, `unknown kha rule "hebb"`},
		{"beta_with_apex", []string{"replay", "--in", good, "--learner", "kha", "--rule", "apex", "--beta", "2", "--model-out", model}, 1, "beta: applies to kha rule gha only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Errorf("a failed replay left a model file: %v", err)
	}
	_ = learners.KindIKPCA
}

// TestReplayDriftStreamLearnNormal is TestReplayDriftStream with gated
// learning (issue 21): --learn normal, with --accept-after so that the
// abrupt change at row 10,000 is accepted as a new regime. The exports
// must match batch KPCA of the last 2,000 rows as the ungated replay's do,
// and the monitor must alarm at the change and rarely before it.
func TestReplayDriftStreamLearnNormal(t *testing.T) {
	data := filepath.Join(learnertest.DataDir(t), "drift_stream.csv")
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	proj := filepath.Join(dir, "proj.csv")
	code, _, stderr := runCmd(t, "replay", "--learner", "ikpca", "--kernel", "rbf", "--gamma", "0.5",
		"--components", "5", "--budget", "200", "--forget", "0.999", "--in", data, "--drop", "phase",
		"--out", proj, "--model-out", model, "--model-at", "10000,15000", "--learn", "normal", "--accept-after", "50", "--progress", "0")
	if code != 0 {
		t.Fatalf("replay exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "1 new regime(s) accepted") {
		t.Errorf("stderr does not report one accepted regime:\n%s", stderr)
	}
	x, n, d, _, err := learnertest.LoadCSV(data, []string{"phase"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		rows int
	}{{filepath.Join(dir, "model.10000.json"), 10000}, {filepath.Join(dir, "model.15000.json"), 15000}, {model, n}} {
		raw, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := codec.DecodeModel(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if m.Monitor == nil || m.Monitor.Learn != "normal" || m.Monitor.SPELimit <= 0 {
			t.Errorf("%s: monitor section %+v, want learn normal with limits", c.path, m.Monitor)
		}
		rep, err := kpcaeval.Compare(m, x[(c.rows-2000)*d:c.rows*d], 2000, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: similarity with batch KPCA of the last 2000 rows %.4f, seen %d", filepath.Base(c.path), rep.Similarity, m.Seen)
		if rep.Similarity < 0.95 {
			t.Errorf("%s: similarity with batch KPCA of the last 2000 rows %.4f, want ≥ 0.95", c.path, rep.Similarity)
		}
	}
	recs := readCSVFile(t, proj)
	alarmCol := column(t, recs[0], "alarm")
	before, firstAfter := 0, -1
	for _, r := range recs[1:] {
		row, _ := strconv.Atoi(r[0])
		if r[alarmCol] == "" {
			continue
		}
		if row < 10000 {
			before++
		} else if firstAfter < 0 {
			firstAfter = row
		}
	}
	t.Logf("alarms before the change: %d of 10000 rows; first alarm after it: row %d", before, firstAfter)
	if before > 300 || firstAfter < 10000 || firstAfter > 10010 {
		t.Errorf("alarms before the change %d (want ≤ 300, about 2 %% of the rows after the warm-up for two limits), first after it at row %d (want within 10 rows of 10000)", before, firstAfter)
	}
}

// TestReplayFaultColumn replays a simulated process (bench/monitor) with a
// step fault and a fault column, as an outside checker would: --learn
// normal with --standardize, detection read from the --out file's spe and
// alarm columns and from the stderr summary.
func TestReplayFaultColumn(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "process.csv")
	var b strings.Builder
	b.WriteString("x1,x2,x3,fault\n")
	p := monitorbench.NewProcess(5, 0)
	x := make([]float64, 3)
	const n, onset = 1400, 1000
	for i := range n {
		p.Next(x)
		fault := 0
		if i >= onset {
			monitorbench.Faults[3].Apply(x, i-onset) // step of x₃ by +1
			fault = 1
		}
		fmt.Fprintf(&b, "%g,%g,%g,%d\n", 100*x[0], x[1], 1e-3*x[2], fault) // scales 10⁵ apart
	}
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.csv")
	code, _, stderr := runCmd(t, "replay", "--in", data, "--fault-column", "fault", "--components", "5", "--budget", "100",
		"--standardize", "--learn", "normal", "--out", out, "--model-out", filepath.Join(dir, "m.json"), "--progress", "0",
		"--report", filepath.Join(dir, "report.html"), "--report-window", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The report shows the same detection under its header.
	if page, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(page), `"detection":"detection against column fault: 400 faulty rows judged`) {
		t.Errorf("the report does not carry the detection line (%v)", err)
	}
	// … and the monitor's summary, with where the warm-up ended (issue 31);
	// the default warm-up of budget 100 is 200 rows.
	if page, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(page), `"monitor":"monitor (learn normal, level 0.99): 1400 rows`) ||
		!strings.Contains(string(page), "warm-up (rows taken as normal) ended at row 200 after 200 rows learned") {
		t.Errorf("the report does not carry the monitor's line with the warm-up's end (%v)", err)
	}
	if !strings.Contains(stderr, "warm-up (rows taken as normal) ended at row 200 after 200 rows learned") {
		t.Errorf("stderr does not say where the warm-up ended:\n%s", stderr)
	}
	m := regexp.MustCompile(`detection against column fault: 400 faulty rows judged, ([0-9.]+) % alarmed by SPE, [0-9.]+ % by either limit; (\d+) normal rows judged, ([0-9.]+) % alarmed`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no detection line in stderr:\n%s", stderr)
	}
	det, _ := strconv.ParseFloat(m[1], 64)
	fa, _ := strconv.ParseFloat(m[3], 64)
	t.Logf("SPE alarms on faulty rows %.1f %%, alarms on normal rows %.1f %% (%s judged)", det, fa, m[2])
	if det < 80 || fa > 4 {
		t.Errorf("detection %.1f %% (want ≥ 80), false alarms %.1f %% (want ≤ 4, two limits at 1 %%)", det, fa)
	}
	// The --out file: the fault column is not a feature, spe and alarm are there.
	recs := readCSVFile(t, out)
	if h := strings.Join(recs[0], ","); h != "row,pass,z1,z2,z3,z4,z5,spe,t2,spe_limit,t2_limit,alarm,contrib,lspe,lspe_limit,lewma,lewma_limit" || len(recs) != n+1 {
		t.Fatalf("header %q, %d lines", h, len(recs)-1)
	}
	// contrib names an alarm's variables (issue 31), nothing without an
	// alarm. On this three-variable curve the stepped x₃ (feature 2) ranks
	// first on 93 % of the alarmed faulty rows (305 of 329; the others
	// name x₁ or x₂, which can also bring the point back towards the
	// curve; 58 % while the index's terms vanished below their limits):
	// the test wants 80 %. (On the 20-sensor plant of bench/monitor the
	// faulty sensor ranks first in 97.7 %.)
	var alarmed, x3First int
	for _, r := range recs[1:] {
		alarm, contrib := r[column(t, recs[0], "alarm")], r[column(t, recs[0], "contrib")]
		if (alarm == "") != (contrib == "") {
			t.Fatalf("row %s: alarm %q, contrib %q: want contributions exactly on an alarm", r[0], alarm, contrib)
		}
		if row, _ := strconv.Atoi(r[0]); row >= onset && alarm != "" {
			alarmed++
			if strings.HasPrefix(contrib, "2:") {
				x3First++
			}
		}
	}
	t.Logf("x3 ranked first on %d of %d alarmed faulty rows", x3First, alarmed)
	if alarmed == 0 || 5*x3First < 4*alarmed {
		t.Errorf("x3 ranked first on %d of %d alarmed faulty rows, want ≥ 80 %%", x3First, alarmed)
	}
	if code, _, stderr := runCmd(t, "replay", "--in", data, "--fault-column", "fault", "--passes", "2", "--model-out", filepath.Join(dir, "m2.json")); code == 0 || !strings.Contains(stderr, "--fault-column needs one in-order pass") {
		t.Errorf("--fault-column with --passes 2: exit %d, stderr %q", code, stderr)
	}
}

// TestReplayKHARules replays a small stream through kha with each of
// Kashima's rules (--rule, --beta) and checks that each writes a model
// whose components differ from GHA's (the flag reaches the learner).
func TestReplayKHARules(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	var b strings.Builder
	b.WriteString("a,b,c\n")
	for i := range 300 {
		th := float64(i) * 0.37
		fmt.Fprintf(&b, "%.6f,%.6f,%.6f\n", math.Cos(th), 0.5*math.Sin(th), 0.1*math.Sin(3*th))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	replayDistinctModels(t, in, [][]string{{}, {"--rule", "gha", "--beta", "2"}, {"--rule", "oja"}, {"--rule", "apex"}})
}

// TestReplayKHAGainDictionary replays the stream of TestReplayKHARules
// (300 rows, B 60: the kmeans set is installed at 120 and 240 rows)
// through kha with --gain and --dictionary, and checks that every
// combination writes a different model (the flags reach the learner) and
// that a bad value or another learner is refused with the learner's error
// naming the field.
func TestReplayKHAGainDictionary(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	var b strings.Builder
	b.WriteString("a,b,c\n")
	for i := range 300 {
		th := float64(i) * 0.37
		fmt.Fprintf(&b, "%.6f,%.6f,%.6f\n", math.Cos(th), 0.5*math.Sin(th), 0.1*math.Sin(3*th))
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	replayDistinctModels(t, in, [][]string{{}, {"--gain", "smd"}, {"--dictionary", "kmeans"}, {"--gain", "smd", "--dictionary", "kmeans"}})
	same := replayDistinctModels(t, in, [][]string{{"--gain", "et", "--dictionary", "first"}})
	if def := replayDistinctModels(t, in, [][]string{{}}); same[0] != def[0] {
		t.Error("--gain et --dictionary first wrote another model than the defaults")
	}
	model := filepath.Join(dir, "bad.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--learner", "kha", "--gain", "adam"}, `unknown kha gain "adam"`},
		{[]string{"--learner", "kha", "--dictionary", "random"}, `unknown kha dictionary "random"`},
		{[]string{"--learner", "kha", "--gain", "smd", "--rule", "oja"}, "gain"},
		{[]string{"--gain", "smd"}, "applies to learner kha only"},
		{[]string{"--dictionary", "kmeans"}, "applies to learner kha only"},
	} {
		code, _, stderr := runCmd(t, append([]string{"replay", "--in", in, "--model-out", model}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("replay %v: exit %d, stderr %q, want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// replayDistinctModels replays in through kha (B 60, k 3) once per
// argument list and fails unless the exported models all differ; it
// returns them in order.
func replayDistinctModels(t *testing.T, in string, argLists [][]string) []string {
	t.Helper()
	dir := t.TempDir()
	var got []string
	models := map[string]string{}
	for _, args := range argLists {
		out := filepath.Join(dir, fmt.Sprintf("m%d.json", len(models)))
		code, _, stderr := runCmd(t, append([]string{"replay", "--in", in, "--learner", "kha", "--budget", "60", "--components", "3", "--model-out", out}, args...)...)
		if code != 0 {
			t.Fatalf("replay %v: exit %d, stderr %q", args, code, stderr)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for prev, m := range models {
			if m == string(raw) {
				t.Errorf("replay %v wrote the same model as %s", args, prev)
			}
		}
		models[fmt.Sprint(args)] = string(raw)
		got = append(got, string(raw))
	}
	return got
}

// TestReplayTrend replays satellite's rows in a random order (500 to
// learn, then a run of 960) with a slow ramp on one variable (0.01 of its
// standard deviation per row from row 160 of the run) as an outside
// checker would (--standardize --learn normal, the spe column of --out,
// k 20, B 200, rbf γ = 1/d),
// with the trend gate (the default) and with --trend off: the gate must
// see more of the ramp (bench/RESULTS.md §10: 53 % against 8 %). Limits
// are drawn, as the checker draws them, from the spe column of a normal
// run replayed the same way.
func TestReplayTrend(t *testing.T) {
	x, n, d, _, err := learnertest.LoadCSV(filepath.Join(learnertest.DataDir(t), "satellite.csv"), []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	const train, run, onset, col = 500, 960, 160, 20
	if n < train+2*run {
		t.Fatalf("satellite has %d rows", n)
	}
	perm := rand.New(rand.NewPCG(3, 3)).Perm(n)
	var m, q float64
	for i := range train {
		m += x[perm[i]*d+col] / train
	}
	for i := range train {
		v := x[perm[i]*d+col] - m
		q += v * v / train
	}
	sd := math.Sqrt(q)
	dir := t.TempDir()
	write := func(name string, from int, ramp bool) string {
		var b strings.Builder
		for j := range d {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "x%d", j)
		}
		b.WriteByte('\n')
		for i := range train + run {
			r := perm[i]
			if i >= train {
				r = perm[from+i-train]
			}
			for j := range d {
				v := x[r*d+j]
				if ramp && j == col && i-train >= onset {
					v += 0.01 * float64(i-train-onset+1) * sd
				}
				if j > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%g", v)
			}
			b.WriteByte('\n')
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	normal, faulty := write("normal.csv", train, false), write("ramp.csv", train+run, true)
	spe := func(data string, extra ...string) ([]float64, string) {
		out := filepath.Join(dir, "out.csv")
		args := append([]string{"replay", "--in", data, "--components", "20", "--budget", "200", "--gamma", fmt.Sprint(1 / float64(d)),
			"--standardize", "--learn", "normal", "--out", out, "--model-out", filepath.Join(dir, "m.json"), "--progress", "0"}, extra...)
		code, _, stderr := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		recs := readCSVFile(t, out)
		c := slices.Index(recs[0], "spe")
		var v []float64
		for _, r := range recs[1+train:] {
			s, err := strconv.ParseFloat(r[c], 64)
			if err != nil {
				t.Fatalf("spe cell %q: %v", r[c], err)
			}
			v = append(v, s)
		}
		return v, stderr
	}
	detect := func(extra ...string) (det, fa float64, stderr string) {
		nv, _ := spe(normal, extra...)
		lim := slices.Sorted(slices.Values(nv))[int(math.Ceil(0.99*run))-1]
		fv, stderr := spe(faulty, extra...)
		for i, v := range fv {
			if v > lim {
				if i >= onset {
					det++
				} else {
					fa++
				}
			}
		}
		return det / (run - onset), fa / onset, stderr
	}
	// The trend gate alone (--linear=false): the linear residual's EWMA,
	// on by default, also stops the kernel learning the ramp (its alarms
	// are not learned), so it is checked separately below.
	detOn, faOn, stderr := detect("--linear=false")
	detOff, faOff, _ := detect("--linear=false", "--trend", "off")
	detLin, faLin, _ := detect("--trend", "off")
	t.Logf("ramp rows above the normal run's 99 %% SPE quantile: trend gate %.1f %%, --trend off %.1f %%, --trend off with the linear residual %.1f %% (false alarms before the ramp %.1f %%, %.1f %%, %.1f %%)",
		100*detOn, 100*detOff, 100*detLin, 100*faOn, 100*faOff, 100*faLin)
	if detOn < detOff+0.2 || faOn > 0.03 {
		t.Errorf("trend gate detects %.3f (false alarms %.3f), --trend off %.3f: want 20 points more at ≤ 3 %% false alarms", detOn, faOn, detOff)
	}
	if detLin < detOff+0.2 || faLin > 0.03 {
		t.Errorf("--trend off with the linear residual detects %.3f (false alarms %.3f), without it %.3f: want 20 points more at ≤ 3 %% false alarms", detLin, faLin, detOff)
	}
	if !strings.Contains(stderr, "held by the trend gate") {
		t.Errorf("summary line does not count the rows held by the trend gate:\n%s", stderr)
	}
	for _, bad := range [][]string{{"--trend", "cusum"}, {"--trend-lambda", "2"}, {"--trend", "off", "--trend-lambda", "0.1"}} {
		args := append([]string{"replay", "--in", normal, "--learn", "normal", "--model-out", filepath.Join(dir, "m.json")}, bad...)
		if code, _, stderr := runCmd(t, args...); code == 0 || !strings.Contains(stderr, "--trend") {
			t.Errorf("%v: exit %d, stderr %q; want an error naming the flag", bad, code, stderr)
		}
	}
}

// syncer is a learner that can catch up on deferred work on demand.
type syncer interface{ Sync(maxIter int) error }
