// Package buildinfo reports what the running binary was built from: the
// main module's version, the VCS revision and the Go version, read from
// runtime/debug.ReadBuildInfo (stamped by "go build" in a git checkout),
// or from the file stamp.txt compiled into the binary where the build has
// no VCS information: the container image's build context holds no .git,
// so the Dockerfile writes its ARG VERSION and REVISION there before "go
// build" (whose command line stays the one .ci/run uses). The file holds
// "version=…" and "revision=…" lines; the committed one is empty.
//
// Its one reason to change is how the binary tells what it was built from.
package buildinfo
