package processor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/processor/internal/ops"
)

// TestUIAPI runs a processor with a real NATS server and checks the page
// and its API: pipelines, keys (search), a key's series after it was
// watched (only outputs after the watch are recorded), the SSE stream and
// the errors.
func TestUIAPI(t *testing.T) {
	e := newEnv(t)
	pc := pipelineConfig("ui")
	r := e.start(t, Config{Pipelines: []PipelineConfig{pc}})
	srv := httptest.NewServer(r.p.Handler())
	defer srv.Close()
	get := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, b)
			}
		}
		return resp.StatusCode
	}

	if code := get("/ui/", nil); code != http.StatusOK {
		t.Errorf("GET /ui/: %d", code)
	}
	for _, f := range []string{"app.js", "charts.js", "style.css"} {
		if code := get("/ui/"+f, nil); code != http.StatusOK {
			t.Errorf("GET /ui/%s: %d", f, code)
		}
	}

	publish := func(from, n int) {
		for i, x := range vectors(uint64(from), n) {
			key := []string{"alpha", "beta"}[i%2]
			e.publish(t, "in.ui."+key, encodeObs(t, "json", x, fmt.Sprint("o", from+i)), "")
		}
	}
	publish(0, 20)
	waitFor(t, 10*time.Second, "outputs", func() bool { return r.stats("ui").Out >= 20-2*(pcaWarm-1) })

	var pipes struct {
		Member    string         `json:"member"`
		Pipelines []PipelineView `json:"pipelines"`
	}
	if code := get("/api/v1/pipelines", &pipes); code != http.StatusOK || len(pipes.Pipelines) != 1 || pipes.Pipelines[0].Name != "ui" ||
		pipes.Pipelines[0].Keys != 2 || pipes.Pipelines[0].Stats.In != 20 || pipes.Member != r.p.ID() {
		t.Errorf("pipelines: %d %+v", code, pipes)
	}
	var keys struct {
		Total, Matched int
		Keys           []KeyInfo
	}
	if code := get("/api/v1/keys?pipeline=ui", &keys); code != http.StatusOK || keys.Total != 2 || len(keys.Keys) != 2 ||
		keys.Keys[0].Key != "alpha" || keys.Keys[0].Seen != 10 || keys.Keys[0].Watched {
		t.Errorf("keys: %d %+v", code, keys)
	}
	if code := get("/api/v1/keys?pipeline=ui&q=ET", &keys); code != http.StatusOK || keys.Total != 2 || keys.Matched != 1 || keys.Keys[0].Key != "beta" {
		t.Errorf("keys matching ET: %d %+v", code, keys)
	}

	// The first request reads the key's past outputs back from the output
	// stream: history at once, without the learner's state (Since: no
	// live output yet).
	var v kpcaview.KeyView
	past := int64(10 - (pcaWarm - 1)) // alpha's outputs so far: 10 messages, the first pcaWarm-1 warm up
	if code := get("/api/v1/series?pipeline=ui&key=alpha", &v); code != http.StatusOK || v.View == nil || v.Count != past ||
		v.Since != math.MaxInt64 || v.Components != 2 {
		t.Fatalf("series before any watched output: %d %+v (want %d read back, since max)", code, v, past)
	}
	// Reading back leaves no consumer on the output stream.
	if st, err := e.js.Stream(context.Background(), "ui_OUT"); err != nil {
		t.Fatal(err)
	} else if info, err := st.Info(context.Background()); err != nil || info.State.Consumers != 0 {
		t.Errorf("output stream after reading back: %v consumers (%v), want 0", info.State.Consumers, err)
	}
	publish(100, 20)
	waitFor(t, 10*time.Second, "outputs", func() bool { return r.stats("ui").Out >= 40-2*(pcaWarm-1) })
	if code := get("/api/v1/series?pipeline=ui&key=alpha", &v); code != http.StatusOK || v.Count != past+10 || len(v.Samples.SPE) != int(past)+10 ||
		len(v.Samples.Z) != 2 || len(v.Buckets.X) == 0 || v.Pipeline != "ui" || v.Key != "alpha" || v.WatchTTL != ops.WatchTTL.Milliseconds() ||
		v.Since <= 0 || v.Since == math.MaxInt64 || v.Since < v.Samples.X[past-1] {
		t.Errorf("series after 10 watched outputs: %d %+v (want %d outputs, learner state since the first live one)", code, v, past+10)
	}
	if code := get("/api/v1/keys?pipeline=ui&q=alpha", &keys); code != http.StatusOK || !keys.Keys[0].Watched {
		t.Errorf("watched key not marked: %+v", keys)
	}

	// Server-sent events.
	resp, err := http.Get(srv.URL + "/api/v1/stream?pipeline=ui&key=beta&every=100ms")
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("stream content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	events := 0
	for events < 2 && sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			var sv kpcaview.KeyView
			if err := json.Unmarshal([]byte(l[6:]), &sv); err != nil || sv.Key != "beta" {
				t.Errorf("event %q: %v", l, err)
			}
			events++
		}
	}
	resp.Body.Close()
	if events != 2 {
		t.Errorf("%d events from the stream: %v", events, sc.Err())
	}

	var apiErr struct{ Error string }
	for _, c := range []struct {
		path string
		code int
	}{
		{"/api/v1/series?pipeline=nope&key=a", http.StatusNotFound},
		{"/api/v1/series?pipeline=ui", http.StatusBadRequest},
		{"/api/v1/keys?pipeline=ui&limit=0", http.StatusBadRequest},
		{"/api/v1/stream?pipeline=ui&key=a&every=1ms", http.StatusBadRequest},
	} {
		if code := get(c.path, &apiErr); code != c.code || apiErr.Error == "" {
			t.Errorf("GET %s: %d %q, want %d with an error", c.path, code, apiErr.Error, c.code)
		}
	}
	for i := range ops.MaxWatched {
		get(fmt.Sprintf("/api/v1/series?pipeline=ui&key=k%d", i), nil)
	}
	if code := get("/api/v1/series?pipeline=ui&key=one-more", &apiErr); code != http.StatusTooManyRequests {
		t.Errorf("watching more than %d keys: %d %q", ops.MaxWatched, code, apiErr.Error)
	}
}
