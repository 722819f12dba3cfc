// Package clustertest holds the three-node NATS cluster test of kpcastream:
// three embedded nats-servers on loopback, configured from
// deploy/nats/nats.conf (JetStream, cluster routes, the partition mapping),
// the R3 streams of deploy/streams, and the two workers of
// deploy/docker-compose.yml, run with processor.New and Run. One node (the
// input stream's leader, which both workers are connected to) is shut down
// in the middle of the stream and restarted; the test checks that every
// message was applied exactly once. It is the proof that scaling out rests
// on NATS itself. shards_test.go runs the same schedule with the
// partitions spread over three R3 shard streams (input.shards, the
// servers' subject mapping; testdata/kpcastream-shards.yaml), outputs per
// shard and ordered lanes, and also checks every output and final state
// against an undisturbed run. Final snapshots are read at the revision the
// bucket's stream leader holds (latest_test.go): a KV Get is a direct get,
// which a follower may answer from a replica behind (readafter_test.go
// measures how often); a key whose state still lags prints its partition's
// record and every worker's lines of it, down to debug. reload_test.go
// unloads and loads keys again within an epoch on a follower (issue 28).
// The package has no non-test code.
//
// Its one reason to change is what the cluster test proves about scaling out
// on NATS.
package clustertest
