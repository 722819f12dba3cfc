// Package natsembed starts an embedded nats-server with JetStream, so that
// "kpcastream run" and "kpcastream demo" give a working system with no
// external server.
//
// Its one reason to change is how the embedded nats-server is started.
package natsembed
