// Package ownership holds the pure rules of who runs which partition:
// the partition of a key, the balanced assignment of a pipeline's
// partitions to the live members that run it, what a member does about
// each partition record (take, release, abandon), the records' format,
// the liveness of members judged from the bucket's own timestamps, and
// the lease that keeps a stale owner from writing. The coordinator of
// package processor does the I/O (the coordination bucket's watch and
// compare-and-set writes) around them.
//
// Its one reason to change is the rules of who runs which partition.
package ownership
