package main

import (
	"bufio"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// findChromium returns the path of a headless-capable Chromium, or "".
func findChromium() string {
	if p := os.Getenv("KPCASTREAM_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// needChromium returns Chromium's path. Without one the test fails in CI
// (CI=true: .ci/run installs Debian's chromium) and is skipped, loudly,
// elsewhere.
func needChromium(t *testing.T) string {
	t.Helper()
	c := findChromium()
	if c != "" {
		return c
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but no chromium in PATH: the page test needs it (.ci/run installs Debian's chromium package)")
	}
	t.Skip("SKIPPED: no chromium in PATH, the live page is NOT tested; install it (apt-get install -y chromium) or set KPCASTREAM_CHROMIUM")
	return ""
}

// lineWriter hands the lines written to it to the test (dropping them
// when nobody reads).
type lineWriter struct{ ch chan string }

func (w *lineWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		select {
		case w.ch <- l:
		default:
		}
	}
	return len(b), nil
}

// TestUIScreenshot is the page's end-to-end test: it starts the demo (a
// drifting stream), opens /ui/ in headless Chromium once the key has a
// record that spans the stream's first abrupt change, checks that the API
// marked the change (a drift event), that no JavaScript error occurred,
// that every chart drew data and that the page's self-check found nothing
// (every chart with axis titles and its whole legend: data-charts,
// data-selfcheck, data-ready), and saves a screenshot
// (KPCASTREAM_UI_SCREENSHOT names the file; the README's is made with
// KPCASTREAM_UI_WAIT=40s).
func TestUIScreenshot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo and a browser")
	}
	chrome := needChromium(t)
	wait := 12 * time.Second // the stream changes 10 s after it starts
	if s := os.Getenv("KPCASTREAM_UI_WAIT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("KPCASTREAM_UI_WAIT: %v", err)
		}
		wait = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWriter{ch: make(chan string, 1024)}
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"demo", "--duration", (wait + 90*time.Second).String(), "--port", "-1", "--http", "127.0.0.1:0",
			"--rate", "1000", "--drift-every", "10s"}, out, io.Discard)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("demo exit %d", code)
		}
	}()
	var base string
	re := regexp.MustCompile(`live page (http://\S+/ui/)`)
	for base == "" {
		select {
		case l := <-out.ch:
			if m := re.FindStringSubmatch(l); m != nil {
				base = m[1]
			}
		case code := <-done:
			done <- code
			t.Fatalf("demo stopped (exit %d) before printing the page's address", code)
		case <-time.After(30 * time.Second):
			t.Fatal("the demo printed no page address within 30s")
		}
	}
	go func() { // drain the status lines
		for range out.ch {
		}
	}()
	api := strings.TrimSuffix(base, "ui/") + "api/v1/"

	// Watch the key as soon as it is loaded, then let its record fill.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(api + "series?pipeline=demo&key=sensor-0")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("series of sensor-0 not available within 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for end := time.Now().Add(wait); time.Now().Before(end); { // renew the watch (30s) as the page would
		time.Sleep(min(5*time.Second, time.Until(end)))
		if resp, err := http.Get(api + "series?pipeline=demo&key=sensor-0"); err == nil {
			resp.Body.Close()
		}
	}
	type series struct {
		Count   int64 `json:"count"`
		Buckets struct {
			X   []int64   `json:"x"`
			SPE []float64 `json:"spe"`
		} `json:"buckets"`
		Events []struct {
			Kind string `json:"kind"`
		} `json:"events"`
	}
	drifts := func(v *series) int {
		n := 0
		for _, e := range v.Events {
			if e.Kind == "drift" {
				n++
			}
		}
		return n
	}
	// The record must span a change of the stream (every 10 s) with 5
	// buckets before it for a marker. Wall time alone does not say how much
	// of the stream it holds: under load (CI runs this with the race
	// detector beside other tests) the worker lags the publisher, and 14 s
	// of record once held under 10 s of the stream, flat. So wait, up to a
	// minute more, until the record holds a drift event or 25 s of the
	// key's stream (500 observations a second): 25 s hold a change at least
	// 10 s after the record's start.
	const covered = 25 * 500
	var v series
	for more := time.Now().Add(60 * time.Second); ; {
		v = series{}
		getJSON(t, api+"series?pipeline=demo&key=sensor-0", &v)
		if drifts(&v) > 0 || v.Count >= covered || time.Now().After(more) {
			break
		}
		time.Sleep(time.Second) // the series call also renews the watch
	}
	if v.Count == 0 || len(v.Buckets.X) < 2 {
		t.Fatalf("the watched key recorded %d observations in %d buckets", v.Count, len(v.Buckets.X))
	}
	// The demo changed 0 times in 62 s for the old rule (issue 23).
	switch {
	case drifts(&v) > 0:
	case v.Count >= covered:
		t.Errorf("no drift event in %d observations (%d s of the key's stream, which changes every 10 s; mean SPE per second %.3g)",
			v.Count, v.Count/500, v.Buckets.SPE)
	default:
		t.Errorf("the record holds %d observations (%d s of the key's stream) after %d s: the worker lags the demo's 1,000 msgs/s too far to judge the drift marker",
			v.Count, v.Count/500, len(v.Buckets.X))
	}

	dir := t.TempDir()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1110",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--virtual-time-budget=4000", "--enable-logging=stderr", "--v=0"}
	run := func(extra ...string) (string, string) {
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, chrome, append(append(args, extra...), base)...)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstderr:\n%s", chrome, err, se.String())
		}
		return so.String(), se.String()
	}
	dom, logs := run("--dump-dom")
	charts := pageProblems(t, "live page", dom, logs) // JavaScript errors, the self-check, data-ready
	for _, c := range []string{"spectrum", "eig", "scatter", "spe", "t2", "dict", "rate", "lat"} {
		if charts[c] <= 0 {
			t.Errorf("chart %s is empty (points %d)", c, charts[c])
		}
	}
	if !strings.Contains(dom, "sensor-1") {
		t.Error("the key list does not show sensor-1")
	}

	shot := os.Getenv("KPCASTREAM_UI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(dir, "ui.png")
	}
	shot, _ = filepath.Abs(shot) // chromium resolves it against its own directory
	run("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(bufio.NewReader(f))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>12)<<8|(g>>12)<<4|bl>>12] = true
		}
	}
	if b.Dx() < 1000 || len(colours) < 20 {
		t.Errorf("screenshot %dx%d with %d colours: blank page?", b.Dx(), b.Dy(), len(colours))
	}
	t.Logf("screenshot %s (%dx%d), charts %v, %d drift events in %d buckets", shot, b.Dx(), b.Dy(), charts, drifts(&v), len(v.Buckets.X))
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
