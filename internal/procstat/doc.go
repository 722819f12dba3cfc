// Package procstat measures the running process for the benchmarks: its
// CPU time (getrusage), its resident memory and peak (/proc/self/status)
// and, where the kernel reports it, the delay its threads waited to run.
//
// Its one reason to change is how the process's CPU, memory and scheduling
// delay are read.
package procstat
