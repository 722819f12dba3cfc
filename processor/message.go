package processor

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names.
const (
	HeaderError       = "Kpcastream-Error"
	HeaderErrorDetail = "Kpcastream-Error-Detail"
	HeaderSubject     = "Kpcastream-Subject"
	HeaderStreamSeq   = "Kpcastream-Stream-Seq"
	// HeaderPipeline and HeaderKey name the pipeline and key of a dead
	// letter; HeaderInputSubject is the subject the message was published
	// to (HeaderSubject without the partition token a partitioned input
	// stream appends), where "kpcastream dlq republish" sends it back.
	HeaderPipeline     = "Kpcastream-Pipeline"
	HeaderKey          = "Kpcastream-Key"
	HeaderInputSubject = "Kpcastream-Input-Subject"
	HeaderContentType  = "Content-Type"
)

// inMsg is an input message, from JetStream (js set) or core NATS.
type inMsg struct {
	pipe    *pipeline
	key     string
	subject string
	data    []byte
	header  nats.Header
	seq     uint64        // stream sequence (core: a process-local counter)
	js      jetstream.Msg // nil for core NATS
	// tm is the message's time, ns since the epoch: its stream timestamp
	// (the same on every redelivery and replay), or for core NATS the time
	// it was received. It stamps the outputs of observations without ts.
	tm int64
}

// item is what a worker receives: a message (msg.pipe set) or a control
// request.
type item struct {
	msg inMsg
	ctl *control
}
