// Package natstest runs a real nats-server with JetStream inside a test
// process, on loopback with a temporary store directory.
//
// Its one reason to change is how tests run a real nats-server.
package natstest
