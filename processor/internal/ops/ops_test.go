package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kpcastream/kpcastream/codec"
	"github.com/kpcastream/kpcastream/internal/kpcaview"
	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/processor/internal/ownership"
	"github.com/kpcastream/kpcastream/snapshot"
)

// fakeBackend is a processor with one pipeline "p" of 4 partitions, of
// which those in runs run here; its workers answer Control from replies.
type fakeBackend struct {
	runs    map[int]bool
	keys    []KeyInfo
	ready   bool
	replies map[Op]Reply
	errs    map[Op]error
	calls   []string // "op key n" of each Control that ran
}

func (f *fakeBackend) Member() string { return "m1" }
func (f *fakeBackend) Running() bool  { return f.ready }
func (f *fakeBackend) Ready() bool    { return f.ready }
func (f *fakeBackend) Stats() []PipelineStats {
	return []PipelineStats{{Pipeline: "p", In: 7, Learners: 2, Instances: 1}}
}
func (f *fakeBackend) Pipelines() []PipelineInfo {
	return []PipelineInfo{{Name: "p", Partitions: 4, MaxKeys: 10, Learner: "ikpca"}}
}
func (f *fakeBackend) Pipeline(name string) (Pipeline, error) {
	if name != "p" {
		return Pipeline{}, fmt.Errorf("processor: %w: unknown pipeline %q", ErrNotFound, name)
	}
	return Pipeline{Name: "p", Partitions: 4, MaxKeys: 10, Learner: learners.Config{Learner: "ikpca", Dim: 3, Components: 2, Budget: 8}}, nil
}
func (f *fakeBackend) Keys(context.Context, string) ([]KeyInfo, error) {
	return append([]KeyInfo(nil), f.keys...), nil
}
func (f *fakeBackend) SnapshotAll(context.Context, string) (int, error) { return 0, nil }
func (f *fakeBackend) Run(_ context.Context, op Op, _, key string, n int) (Reply, bool, error) {
	if !f.runs[n] {
		return Reply{}, false, nil
	}
	f.calls = append(f.calls, fmt.Sprint(op, " ", key, " ", n))
	return f.replies[op], true, f.errs[op]
}
func (f *fakeBackend) Runs(_ string, n int) bool { return f.runs[n] }
func (f *fakeBackend) OutputSubject(pipeline, key string) string {
	return "out." + pipeline + "." + key
}
func (f *fakeBackend) Members() Members { return nil }

// keyIn returns a key of partition n of 4.
func keyIn(t *testing.T, n int) string { return keysIn(t, n, 1)[0] }

// keysIn returns count keys of partition n of 4.
func keysIn(t *testing.T, n, count int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < count && i < 100*count; i++ {
		if k := fmt.Sprint("k", i); ownership.PartitionOf(k, 4) == n {
			out = append(out, k)
		}
	}
	if len(out) < count {
		t.Fatalf("%d keys of partition %d, want %d", len(out), n, count)
	}
	return out
}

// TestStatusOf is the table of service error codes, with the backend's
// errors marked by Mark keeping their text.
func TestStatusOf(t *testing.T) {
	noKey := errors.New("processor: no such key")
	for _, c := range []struct {
		err  error
		code string
	}{
		{ErrNotFound, "404"},
		{fmt.Errorf("processor: %w: unknown pipeline %q", ErrNotFound, "x"), "404"},
		{Mark(noKey, ErrNotFound), "404"},
		{ErrBadRequest, "400"},
		{fmt.Errorf("x: %w", snapshot.ErrConflict), "409"},
		{ErrUnavailable, "503"},
		{Mark(errors.New("processor: fenced"), ErrUnavailable), "503"},
		{context.DeadlineExceeded, "503"},
		{errors.New("other"), "500"},
	} {
		if got := StatusOf(c.err); got != c.code {
			t.Errorf("StatusOf(%v) = %s, want %s", c.err, got, c.code)
		}
	}
	m := Mark(fmt.Errorf("w: %w", noKey), ErrNotFound)
	if m.Error() != "w: processor: no such key" || !errors.Is(m, noKey) || !errors.Is(m, ErrNotFound) {
		t.Errorf("Mark: %q, is noKey %v, is ErrNotFound %v", m, errors.Is(m, noKey), errors.Is(m, ErrNotFound))
	}
	if Mark(nil, ErrNotFound) != nil || Mark(ErrNotFound, ErrNotFound) != ErrNotFound {
		t.Error("Mark of nil or of the code itself changed it")
	}
}

// TestControl checks the routing of a key request without other members:
// to the worker of a partition run here, else 503 naming the partition;
// an unknown pipeline or a missing key are refused before any worker.
func TestControl(t *testing.T) {
	f := &fakeBackend{runs: map[int]bool{1: true}, replies: map[Op]Reply{OpModel: {Data: []byte(`{"m":1}`)}},
		errs: map[Op]error{OpReset: Mark(errors.New("processor: no such key"), ErrNotFound)}}
	s := New(Config{Timeout: time.Second}, f, f, &Watches{})
	ctx := context.Background()
	here, away := keyIn(t, 1), keyIn(t, 2)
	r, err := s.Control(ctx, OpModel, "p", here, true)
	if err != nil || string(r.Data) != `{"m":1}` || len(f.calls) != 1 || f.calls[0] != "model "+here+" 1" {
		t.Fatalf("model of a key run here: %q, %v, calls %q", r.Data, err, f.calls)
	}
	if _, err := s.Control(ctx, OpReset, "p", here, false); StatusOf(err) != "404" || err.Error() != "processor: no such key" {
		t.Errorf("reset of a key with no learner: %v (%s)", err, StatusOf(err))
	}
	_, err = s.Control(ctx, OpModel, "p", away, true)
	want := fmt.Sprintf("processor: unavailable: partition 2 of pipeline p (key %q) has no running owner at the moment; retry", away)
	if StatusOf(err) != "503" || err.Error() != want {
		t.Errorf("key of a partition not run here: %v, want %s", err, want)
	}
	if _, err := s.Control(ctx, OpModel, "q", here, true); StatusOf(err) != "404" {
		t.Errorf("unknown pipeline: %v", err)
	}
	if _, err := s.Control(ctx, OpModel, "p", "", true); StatusOf(err) != "400" {
		t.Errorf("no key: %v", err)
	}
	if len(f.calls) != 2 {
		t.Errorf("workers asked %d times, want 2: %q", len(f.calls), f.calls)
	}
}

// TestWatches checks starting, renewing, the limit, stopping and expiry.
func TestWatches(t *testing.T) {
	ws := &Watches{}
	if ws.Any() || ws.Get("p", "k") != nil || ws.Watched("p", "k") {
		t.Fatal("an empty set watches something")
	}
	seed := []kpcaview.Observation{{X: 1, Seq: 1, Z: []float64{1, 2}, Age: -1}, {X: 2, Seq: 2, Z: []float64{3, 4}, Age: -1}}
	kw, err := ws.Start("p", "k", seed)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ws.Start("p", "k", nil); err != nil || again != kw {
		t.Fatalf("renewing gave another record (%v)", err)
	}
	if !ws.Watched("p", "k") || ws.Watched("q", "k") || ws.Watched("p", "j") || kw.View().Count != 2 {
		t.Fatalf("watched p/k %v q/k %v p/j %v, seeded %d", ws.Watched("p", "k"), ws.Watched("q", "k"), ws.Watched("p", "j"), kw.View().Count)
	}
	for i := range MaxWatched - 1 {
		if _, err := ws.Start("p", fmt.Sprint("other-", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ws.Start("p", "one too many", nil); !errors.Is(err, errTooManyWatches) {
		t.Errorf("watched more than %d keys: %v", MaxWatched, err)
	}
	ws.Stop()
	if ws.Any() || ws.Get("p", "k") != nil {
		t.Error("records kept after Stop")
	}

	kw, err = ws.Start("p", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	kw.timer.Reset(10 * time.Millisecond) // as if the TTL were 10ms
	deadline := time.Now().Add(5 * time.Second)
	for ws.Any() {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not expire")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ws.Get("p", "k") != nil {
		t.Error("expired watch still listed")
	}
}

// summaries counts the hook's calls of Summary.
type summaries struct{ n int }

func (s *summaries) Summary(dst []float64) learners.Summary {
	s.n++
	return learners.Summary{SwapsPer1000: 5, MovesPer1000: 7}
}

// TestRecord checks what the hook records of a message: each output, the
// sample's state, the learner's Summary at most every sumEvery.
func TestRecord(t *testing.T) {
	ws := &Watches{}
	kw, err := ws.Start("p", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	l := &summaries{}
	at := time.Now()
	outs := []codec.Output{{Seq: 9, Z: []float64{1, 2}, SPE: 0.5, TS: float64(at.UnixNano())/1e9 - 2, Y: codec.String("a"), Pred: codec.String("b")},
		{Seq: 9, Z: []float64{3, 4}, SPE: 0.25}}
	s := &Sample{At: at, Took: 4 * time.Millisecond, Learner: l, Eigenvalues: []float64{3, 1}, Stored: 5, In: 10, Out: 8, Dead: 1}
	kw.Record(s, outs)
	s.At = at.Add(sumEvery / 2)
	kw.Record(s, outs[1:])
	if l.n != 1 {
		t.Errorf("Summary read %d times within sumEvery, want 1", l.n)
	}
	v := kw.View()
	if v.Count != 3 || len(v.Samples.SPE) != 3 || v.Samples.SPE[0] != 0.5 || v.Samples.SPE[1] != 0.25 || len(v.Samples.Z) != 2 {
		t.Fatalf("samples %+v", v.Samples)
	}
	if age := v.Buckets.Age[0]; age < 1.9 || age > 2.1 {
		t.Errorf("age %v, want ≈ 2 s", age)
	}
	if v.Buckets.Stored[0] != 5 || len(v.Buckets.Eig) != 2 {
		t.Errorf("buckets %+v", v.Buckets)
	}
	if kw.o.Z != nil || kw.o.Eigenvalues != nil {
		t.Error("the record keeps the caller's buffers")
	}
}

func TestLabels(t *testing.T) {
	for _, c := range []struct {
		o           codec.Output
		label, pred string
	}{
		{codec.Output{}, "", ""},
		{codec.Output{Y: codec.Number(2)}, "2", ""},
		{codec.Output{Pred: codec.String("cat")}, "", "cat"},
		{codec.Output{Y: codec.String("dog"), Pred: codec.String("cat")}, "dog", "cat"},
	} {
		if l, p := labels(&c.o); l != c.label || p != c.pred {
			t.Errorf("labels of %+v = %q, %q; want %q, %q", c.o, l, p, c.label, c.pred)
		}
	}
}

// TestHandler checks the HTTP API over a fake backend: the pipelines, the
// keys (search, limit), a series (404 for a partition not run here, 429
// beyond MaxWatched), the parameter errors, /healthz and /readyz.
func TestHandler(t *testing.T) {
	f := &fakeBackend{runs: map[int]bool{0: true}, keys: []KeyInfo{{Key: "alpha"}, {Key: "beta"}, {Key: "Alps"}}}
	ws := &Watches{}
	defer ws.Stop()
	srv := httptest.NewServer(New(Config{Timeout: time.Second}, f, f, ws).Handler())
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
	var pls struct {
		Member    string         `json:"member"`
		Pipelines []PipelineView `json:"pipelines"`
	}
	if code := get("/api/v1/pipelines", &pls); code != 200 || pls.Member != "m1" || len(pls.Pipelines) != 1 ||
		pls.Pipelines[0].Keys != 2 || pls.Pipelines[0].Stats.In != 7 || pls.Pipelines[0].Name != "p" {
		t.Errorf("pipelines: %d %+v", code, pls)
	}
	var keys struct {
		Total, Matched int
		MaxKeys        int `json:"max_keys"`
		Keys           []KeyInfo
	}
	if code := get("/api/v1/keys?pipeline=p&q=AL&limit=1", &keys); code != 200 || keys.Total != 3 || keys.Matched != 2 ||
		keys.MaxKeys != 10 || len(keys.Keys) != 1 || keys.Keys[0].Key != "alpha" {
		t.Errorf("keys: %d %+v", code, keys)
	}
	var kv kpcaview.KeyView
	here, away := keyIn(t, 0), keyIn(t, 3)
	if code := get("/api/v1/series?pipeline=p&key="+here, &kv); code != 200 || kv.Key != here || kv.Member != "m1" ||
		kv.Budget != 8 || kv.WatchTTL != WatchTTL.Milliseconds() || !ws.Watched("p", here) {
		t.Errorf("series: %d %+v", code, kv)
	}
	var apiErr struct{ Error string }
	for _, c := range []struct {
		path string
		code int
	}{
		{"/api/v1/series?pipeline=p&key=" + away, http.StatusNotFound},
		{"/api/v1/series?pipeline=nope&key=a", http.StatusNotFound},
		{"/api/v1/keys?pipeline=nope", http.StatusNotFound},
		{"/api/v1/series?pipeline=p", http.StatusBadRequest},
		{"/api/v1/keys?pipeline=p&limit=0", http.StatusBadRequest},
		{"/api/v1/stream?pipeline=p&key=a&every=1ms", http.StatusBadRequest},
	} {
		apiErr.Error = ""
		if code := get(c.path, &apiErr); code != c.code || apiErr.Error == "" {
			t.Errorf("GET %s: %d %q, want %d with an error", c.path, code, apiErr.Error, c.code)
		}
	}
	if ws.Watched("p", away) {
		t.Error("a key of a partition not run here is watched")
	}
	ks := keysIn(t, 0, MaxWatched+1) // ks[0] is watched already
	for _, k := range ks[1:MaxWatched] {
		if code := get("/api/v1/series?pipeline=p&key="+k, nil); code != 200 {
			t.Fatalf("watch %s: %d", k, code)
		}
	}
	if code := get("/api/v1/series?pipeline=p&key="+ks[MaxWatched], &apiErr); code != http.StatusTooManyRequests {
		t.Errorf("watching more than %d keys: %d %q", MaxWatched, code, apiErr.Error)
	}
	if code := get("/readyz", nil); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz not ready: %d", code)
	}
	f.ready = true
	if code := get("/readyz", nil); code != 200 {
		t.Errorf("/readyz ready: %d", code)
	}
	if code := get("/healthz", nil); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
}

// TestRootRedirect: "/" leads to the page (issue 23, item 7), and only
// "/" itself: an unknown path stays 404.
func TestRootRedirect(t *testing.T) {
	mux := http.NewServeMux()
	(&Server{}).routes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		path, loc string
		code      int
	}{
		{"/", "/ui/", http.StatusFound},
		{"/ui", "/ui/", http.StatusMovedPermanently},
		{"/nope", "", http.StatusNotFound},
	} {
		resp, err := c.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.loc {
			t.Errorf("GET %s: %d to %q, want %d to %q", tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.code, tc.loc)
		}
	}
	// Following the redirect ends on the page.
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "<title>kpcastream</title>") {
		t.Errorf("GET / followed: %d %.200s", resp.StatusCode, b)
	}
}
