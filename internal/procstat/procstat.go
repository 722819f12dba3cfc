package procstat

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCPU returns the user and system CPU time consumed so far by this
// process (all threads), from getrusage(RUSAGE_SELF).
func ProcessCPU() (user, sys time.Duration, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("procstat: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), nil
}

// ProcessRSS returns the current resident set size (VmRSS) and its peak
// (VmHWM) in bytes, read from /proc/self/status. On systems without
// /proc it returns the peak from getrusage as both values.
func ProcessRSS() (rss, peak int64, err error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		var ru syscall.Rusage
		if rerr := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); rerr != nil {
			return 0, 0, fmt.Errorf("procstat: rss: %w", errors.Join(err, rerr))
		}
		return ru.Maxrss * 1024, ru.Maxrss * 1024, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var dst *int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &rss
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &peak
		default:
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return 0, 0, fmt.Errorf("procstat: /proc/self/status: malformed line %q", line)
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("procstat: /proc/self/status: %q: %w", line, err)
		}
		*dst = kb * 1024
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("procstat: /proc/self/status: %w", err)
	}
	if rss == 0 {
		return 0, 0, errors.New("procstat: /proc/self/status has no VmRSS")
	}
	return rss, peak, nil
}

// ProcessRunDelay returns the total time the threads of this process have
// spent runnable but waiting for a CPU (the kernel's run-queue delay, the
// second field of /proc/self/task/*/schedstat), summed over its live
// threads. It measures CPU contention: time a thread wanted a core that
// another thread (of this or any other process) held. Threads that have
// exited no longer count. It returns an error where /proc or schedstats
// are not available.
func ProcessRunDelay() (time.Duration, error) {
	dir, err := os.Open("/proc/self/task")
	if err != nil {
		return 0, fmt.Errorf("procstat: run delay: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("procstat: run delay: %w", err)
	}
	var total time.Duration
	n := 0
	for _, name := range names {
		b, err := os.ReadFile("/proc/self/task/" + name + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, fmt.Errorf("procstat: /proc/self/task/%s/schedstat: malformed %q", name, b)
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procstat: /proc/self/task/%s/schedstat: %w", name, err)
		}
		total += time.Duration(ns)
		n++
	}
	if n == 0 {
		return 0, errors.New("procstat: run delay: no thread has a schedstat")
	}
	return total, nil
}

// MachineCPU returns the CPU time all processors of the machine have spent
// busy (user, nice, system, irq, softirq, steal) and the total elapsed
// CPU time (busy + idle + iowait), summed over CPUs, from /proc/stat. The
// difference of two readings, minus this process's ProcessCPU, is what
// other processes used meanwhile.
func MachineCPU() (busy, total time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("procstat: machine cpu: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("procstat: /proc/stat: malformed first line %q", line)
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user.
	var ticks [8]int64
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("procstat: /proc/stat: %w", err)
		}
	}
	const tick = 10 * time.Millisecond // USER_HZ = 100 on Linux
	idle := ticks[3] + ticks[4]
	all := int64(0)
	for _, t := range ticks {
		all += t
	}
	return time.Duration(all-idle) * tick, time.Duration(all) * tick, nil
}
