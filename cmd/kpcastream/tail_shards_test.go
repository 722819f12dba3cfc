package main

import (
	"testing"

	"github.com/kpcastream/kpcastream/processor"
)

// TestTailSubjectShards: kpcastream tail follows every shard of a
// {shard} template (a literal "{shard}" token would match nothing).
func TestTailSubjectShards(t *testing.T) {
	pc := processor.PipelineConfig{Name: "p", Output: processor.OutputConfig{Subject: "kpca.out.{pipeline}.{shard}.{key}"},
		DeadLetter: "kpca.dlq.{pipeline}.{shard}"}
	for _, c := range []struct {
		o    tailOptions
		want string
	}{
		{tailOptions{}, "kpca.out.p.*.*"},
		{tailOptions{key: "k1"}, "kpca.out.p.*.k1"},
		{tailOptions{dlq: true}, "kpca.dlq.p.*"},
		{tailOptions{dlq: true, key: "k1"}, "kpca.dlq.p.*"},
	} {
		if got := c.o.subjectOf(pc); got != c.want {
			t.Errorf("%+v: %s, want %s", c.o, got, c.want)
		}
	}
}
