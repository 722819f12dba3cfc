package snapshot

import (
	"errors"
	"regexp"
	"time"

	"github.com/kpcastream/kpcastream/internal/fielderr"
)

// Defaults.
const (
	DefaultBucket       = "kpcastream-snapshots"
	DefaultObjectBucket = "kpcastream-state"
	// DefaultMaxInline caps MaxInline at 900 KiB.
	DefaultMaxInline = 900 << 10
	// payloadMargin is left free under the server's max payload for the
	// subject and headers of a KV put.
	payloadMargin = 4 << 10
)

// Config configures a Store. The zero value of every field means "use the
// default". The yaml tags name the fields in a configuration file
// (snapshots) and in Validate's errors.
type Config struct {
	// Bucket is the KV bucket holding one entry per learner key. Default
	// "kpcastream-snapshots".
	Bucket string `yaml:"bucket"`
	// ObjectBucket is the object store bucket holding large states. Default
	// "kpcastream-state".
	ObjectBucket string `yaml:"object_bucket"`
	// Replicas is the number of replicas of both buckets (1..5). Default 1.
	Replicas int `yaml:"replicas"`
	// MaxInline is the largest encoded snapshot, in bytes, stored inline in
	// the KV value; larger ones go to the object store. Default, and upper
	// bound: min(server max payload − 4 KiB, 900 KiB).
	MaxInline int `yaml:"max_inline"`
	// History is the number of revisions the KV bucket keeps per key
	// (1..64). Default 1.
	History int `yaml:"history"`
}

var bucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// withDefaults returns c with zero fields set to their defaults (MaxInline
// is finished by Open, which knows the server's max payload).
func (c Config) withDefaults() Config {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.ObjectBucket == "" {
		c.ObjectBucket = DefaultObjectBucket
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.History == 0 {
		c.History = 1
	}
	return c
}

// Validate reports every problem of c at once (errors.Join), each a
// *fielderr.Error naming the field by its YAML name ("replicas").
// Defaults are applied first, so zero fields are valid.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fielderr.New("snapshot", nil, field, format, args...))
	}
	if !bucketRe.MatchString(c.Bucket) {
		bad("bucket", "%q must match [a-zA-Z0-9_-]+", c.Bucket)
	}
	if !bucketRe.MatchString(c.ObjectBucket) {
		bad("object_bucket", "%q must match [a-zA-Z0-9_-]+", c.ObjectBucket)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("replicas", "%d outside [1, 5]", c.Replicas)
	}
	if c.MaxInline < 0 {
		bad("max_inline", "%d is negative", c.MaxInline)
	}
	if c.History < 1 || c.History > 64 {
		bad("history", "%d outside [1, 64]", c.History)
	}
	return errors.Join(errs...)
}

// cleanupTimeout bounds each best-effort deletion of an object.
const cleanupTimeout = 5 * time.Second
