package deploy_test

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"
)

// TestSyncPolicy checks that the cluster deployments choose their fsync
// policy deliberately: both the compose servers (deploy/nats/nats.conf, also
// loaded by the cluster test) and the Helm values acknowledge a write only
// once it is on disk. The server's default (fsync every two minutes) loses
// acknowledged writes to a coordinated power loss, and exactly-once rests on
// those acknowledgements (README "Durability: what an acknowledgement is worth").
func TestSyncPolicy(t *testing.T) {
	opts, err := server.ProcessConfigFile(filepath.Join(root, "deploy/nats/nats.conf"))
	if err != nil {
		t.Fatalf("load deploy/nats/nats.conf: %v", err)
	}
	if !opts.SyncAlways {
		t.Errorf("deploy/nats/nats.conf: jetstream sync_interval is not always (SyncAlways false, SyncInterval %v)", opts.SyncInterval)
	}

	var values struct {
		Config struct {
			JetStream struct {
				Merge map[string]any `yaml:"merge"`
			} `yaml:"jetstream"`
		} `yaml:"config"`
	}
	if err := yaml.Unmarshal(read(t, "deploy/k8s/nats-values.yaml"), &values); err != nil {
		t.Fatalf("deploy/k8s/nats-values.yaml: %v", err)
	}
	if got := values.Config.JetStream.Merge["sync_interval"]; got != "always" {
		t.Errorf("deploy/k8s/nats-values.yaml: config.jetstream.merge.sync_interval = %v, want always", got)
	}
}
