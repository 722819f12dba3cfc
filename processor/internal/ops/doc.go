// Package ops serves the operations of a processor: the micro service
// (kpcastream.stats, pipelines, model, snapshot, reset, accept, each also
// per member under <service>.i.<member>), forwarding a key's request to
// the member that owns its partition, the HTTP handler (/metrics,
// /healthz, /readyz, the live page /ui/ and its API /api/v1/), the
// watched keys whose outputs the page records, and the backfill of a
// newly watched key's recent outputs from the output stream.
//
// # Model
//
// ops does not import package processor. It declares what it needs of it
// — Views (read-only: stats, pipeline settings, keys, whether a partition
// runs here), Controls (requests that the workers answer: Run with a
// typed Op — model, snapshot, reset, accept — and SnapshotAll) and
// Members (the coordination bucket as this member sees it) — and
// processor implements them. Everything it gets is a copy: no pointer
// into a worker's state crosses the boundary. The view types
// (PipelineStats, PipelineInfo, KeyInfo, KeyRequest, PipelineView) are
// the JSON of the endpoints; processor re-exports them under the same
// names, so their fields and tags are a wire format.
//
// The workers call the watch hook on every output: Watches.Any (one
// atomic load while nothing is watched), Watches.Get (a lock-free scan
// of at most MaxWatched entries) and Watch.Record (under the record's
// lock). Everything else runs on the callers' goroutines — the NATS
// connection's for the micro handlers, the HTTP server's for the API —
// and a Server starts none of its own except one per other member while
// a stats request is answered, joined before the answer. Stop stops the
// micro service and waits for its handlers in flight, each bounded by
// Config.Timeout and by Start's context. A Server is safe for concurrent
// use.
//
// # Errors
//
// ErrNotFound, ErrBadRequest and ErrUnavailable (and snapshot.ErrConflict)
// are the request errors; StatusOf maps them to the service error codes
// 404, 400, 503 (409), anything else 500. The backend marks its own
// errors with Mark, which keeps their text. Error texts start with
// "processor:", as they did before the package was split: clients see
// them.
package ops
