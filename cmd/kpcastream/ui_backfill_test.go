package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
)

// TestUIBackfillNotes opens the live page of a key whose record is only
// what was read back from the output stream (its outputs were stored
// before the page watched it, none came after): the explained share is
// not "by 0" components, and the charts of the learner's state, which
// outputs do not carry, say so instead of staying blank (issue 33 row 12);
// the page's self-check accepts those charts and finds nothing else.
func TestUIBackfillNotes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded nats-server and a browser")
	}
	chrome := needChromium(t)
	dir := t.TempDir()
	natsPort, httpPort := freePort(t), freePort(t)
	cfgFile := opsConfig(t, dir, natsPort, httpPort, 4, "json")
	w := startRun(t, cfgFile, httpPort)
	defer w.stop(t)
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	warm(t, nc, "s1", 60, codec.JSON)
	deadline := time.Now().Add(15 * time.Second)
	for {
		si, err := js(t, nc).StreamInfo("OPSOUT")
		if err == nil && si.State.Msgs >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the output stream holds no 20 outputs after 15s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dom, logs := dumpDOM(t, chrome, fmt.Sprintf("http://127.0.0.1:%d/ui/#ops/s1", httpPort), 1400)
	charts := pageProblems(t, "live page after a backfill", dom, logs)
	if charts["spe"] <= 0 || charts["scatter"] <= 0 {
		t.Errorf("the outputs read back are not drawn: %v", charts)
	}
	note := regexp.MustCompile(`<small id="spec-note">([^<]*)<`).FindStringSubmatch(dom)
	if note == nil || strings.Contains(note[1], "by 0") || !strings.Contains(note[1], "explained") {
		t.Errorf("spectrum note %q, want the explained share without \"by 0\"", note)
	}
	for _, id := range []string{"c-spectrum", "c-dict", "c-lat"} {
		m := regexp.MustCompile(`<canvas id="` + id + `"[^>]*data-absent="([^"]*)"`).FindStringSubmatch(dom)
		if m == nil || !strings.Contains(m[1], "not in the outputs read back") {
			t.Errorf("%s has no note of why it is empty (data-absent %q)", id, m)
		}
	}
}

// TestChartRates: the live page's rates (KC.rates) leave out the last
// bucket while it fills, which dipped every rate line (issue 33 row 12),
// and the buckets read back from the output stream; the others are the
// bucket's count over its width and the counters' differences.
func TestChartRates(t *testing.T) {
	chrome := needChromium(t)
	js, err := fs.ReadFile(kpcaview.Assets(), "charts.js")
	if err != nil {
		t.Fatal(err)
	}
	page := `<!doctype html><html><head><meta charset="utf-8"></head><body><script>` + string(js) + `</script><script>
var b = {x: [0, 1000, 2000, 3000], width: [1000, 1000, 1000, 1000], n: [50, 100, 100, 30], in: [0, 500, 1500, 2500], dead: [0, 0, 2, 3]};
var out = {filling: KC.rates(b, 3300, 0), done: KC.rates(b, 4000, 0), since: KC.rates(b, 4000, 1000)};
document.documentElement.setAttribute("data-rates", JSON.stringify(out, function (k, v) { return typeof v === "number" && isNaN(v) ? "NaN" : v; }));
</script></body></html>`
	path := filepath.Join(t.TempDir(), "rates.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs := dumpDOM(t, chrome, "file://"+path, 900)
	var got map[string]map[string][]any
	if err := json.Unmarshal([]byte(htmlAttr(dom, "data-rates")), &got); err != nil {
		t.Fatalf("harness: %v\n%.500s\n%s", err, dom, logs)
	}
	want := map[string]map[string][]any{
		"filling": {"key": {50.0, 100.0, 100.0, "NaN"}, "in": {"NaN", 500.0, 1000.0, "NaN"}, "dead": {"NaN", 0.0, 2.0, "NaN"}},
		"done":    {"key": {50.0, 100.0, 100.0, 30.0}, "in": {"NaN", 500.0, 1000.0, 1000.0}, "dead": {"NaN", 0.0, 2.0, 1.0}},
		"since":   {"key": {50.0, 100.0, 100.0, 30.0}, "in": {"NaN", "NaN", 1000.0, 1000.0}, "dead": {"NaN", "NaN", 2.0, 1.0}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rates\n got %v\nwant %v", got, want)
	}
}
