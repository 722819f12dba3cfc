// Package deploy holds kpcastream's deployment files (Dockerfile at the
// repository root; docker-compose.yml, nats/, streams/, compose/, k8s/ and
// kustomization.yaml here; README.md explains them) and the tests that keep
// them honest: every config they embed is loaded and validated with the
// project's config loader, every worker runs the same config, its
// partitions match the input stream's subject transform (checked on an
// embedded nats-server too), every flag they pass exists on "kpcastream
// run", the grace periods cover a graceful leave, the Kubernetes memory
// limit covers the learners' memory formula for a worker owning every
// partition, and the Dockerfile builds exactly as .ci/run does. The package
// has no code.
//
// Its one reason to change is how kpcastream is deployed (images, compose,
// Kubernetes, alerts).
package deploy
