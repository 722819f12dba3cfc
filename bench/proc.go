package bench

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
		return 0, 0, fmt.Errorf("bench: getrusage: %w", err)
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
			return 0, 0, fmt.Errorf("bench: rss: %w", errors.Join(err, rerr))
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
			return 0, 0, fmt.Errorf("bench: /proc/self/status: malformed line %q", line)
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: /proc/self/status: %q: %w", line, err)
		}
		*dst = kb * 1024
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("bench: /proc/self/status: %w", err)
	}
	if rss == 0 {
		return 0, 0, errors.New("bench: /proc/self/status has no VmRSS")
	}
	return rss, peak, nil
}
