package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kpcastream/kpcastream/processor"
)

// benchWatch serves p's live page API on a free local port and polls it as
// the page does (pipelines, keys and the key's series every second) from
// the moment the key can be watched. stop ends it and prints how many
// observations the watched key recorded.
func benchWatch(ctx context.Context, p *processor.Processor, pipeline, key string, stderr io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String() + "/api/v1/"
	series := base + "series?pipeline=" + pipeline + "&key=" + key
	get := func(url string) (int, []byte) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wctx.Err() == nil { // until the key's partition runs here
			if code, _ := get(series); code == http.StatusOK {
				break
			}
			time.Sleep(time.Millisecond)
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			get(base + "pipelines")
			get(base + "keys?pipeline=" + pipeline)
			get(series)
		}
	}()
	return func() {
		_, b := get(series)
		var v struct {
			Count int64 `json:"count"`
		}
		_ = json.Unmarshal(b, &v)
		fmt.Fprintf(stderr, "watch: key %s recorded %d observations\n", key, v.Count)
		cancel()
		wg.Wait()
		_ = srv.Close()
	}, nil
}
