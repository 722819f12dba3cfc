package e2e

import (
	"math"
	"runtime/metrics"
	"time"

	"github.com/kpcastream/kpcastream/internal/procstat"
)

// schedWindow measures, between start and end, how long goroutines waited
// runnable for a P (the Go scheduler's latency, /sched/latencies:seconds)
// and the stop-the-world pauses of the GC (/sched/pauses/total/gc:seconds).
// Both are cumulative histograms of the runtime: the window's figures are
// the differences of their bucket counts.
type schedWindow struct {
	lat0, lat1     *metrics.Float64Histogram
	pause0, pause1 *metrics.Float64Histogram
	gc0, gc1       uint64
	gcCPU0, gcCPU1 float64       // /cpu/classes/gc/total:cpu-seconds
	busy0, busy1   time.Duration // machine CPU busy (procstat.MachineCPU), -1 if unknown
	all0, all1     time.Duration
}

var schedSamples = []string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds", "/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/total:cpu-seconds"}

func readSched() (lat, pause *metrics.Float64Histogram, gcs uint64, gcCPU float64) {
	s := make([]metrics.Sample, len(schedSamples))
	for i, n := range schedSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		lat = s[0].Value.Float64Histogram()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		pause = s[1].Value.Float64Histogram()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		gcs = s[2].Value.Uint64()
	}
	if s[3].Value.Kind() == metrics.KindFloat64 {
		gcCPU = s[3].Value.Float64()
	}
	return lat, pause, gcs, gcCPU
}

func machineNow() (busy, all time.Duration) {
	b, a, err := procstat.MachineCPU()
	if err != nil {
		return -1, -1
	}
	return b, a
}

func (w *schedWindow) start() {
	w.lat0, w.pause0, w.gc0, w.gcCPU0 = readSched()
	w.busy0, w.all0 = machineNow()
}

func (w *schedWindow) end() {
	w.lat1, w.pause1, w.gc1, w.gcCPU1 = readSched()
	w.busy1, w.all1 = machineNow()
}

// gcCPU returns the CPU time the GC used in the window (an estimate of the
// runtime: mark assists, dedicated and idle mark workers, pauses).
func (w *schedWindow) gcCPU() time.Duration {
	return time.Duration((w.gcCPU1 - w.gcCPU0) * 1e9)
}

// machine returns the busy and total CPU time of the whole machine in the
// window (all CPUs), or -1, -1.
func (w *schedWindow) machine() (busy, all time.Duration) {
	if w.busy0 < 0 || w.busy1 < 0 {
		return -1, -1
	}
	return w.busy1 - w.busy0, w.all1 - w.all0
}

// latency returns quantile q of the goroutine scheduling latency in the
// window (the upper edge of its bucket), 0 when unknown.
func (w *schedWindow) latency(q float64) time.Duration { return histQuantile(w.lat0, w.lat1, q) }

// gcPause returns the total of the GC pauses in the window (bucket
// midpoints) and the number of GC cycles.
func (w *schedWindow) gcPause() (time.Duration, uint64) {
	if w.pause0 == nil || w.pause1 == nil || len(w.pause0.Counts) != len(w.pause1.Counts) {
		return 0, 0
	}
	total := 0.0
	for i := range w.pause1.Counts {
		n := w.pause1.Counts[i] - w.pause0.Counts[i]
		if n == 0 {
			continue
		}
		lo, hi := w.pause1.Buckets[i], w.pause1.Buckets[i+1]
		if math.IsInf(lo, -1) {
			lo = 0
		}
		if math.IsInf(hi, 1) {
			hi = lo
		}
		total += float64(n) * (lo + hi) / 2
	}
	return time.Duration(total * 1e9), w.gc1 - w.gc0
}

// histQuantile returns quantile q of the difference h1 − h0 of two
// snapshots of one cumulative runtime histogram.
func histQuantile(h0, h1 *metrics.Float64Histogram, q float64) time.Duration {
	if h0 == nil || h1 == nil || len(h0.Counts) != len(h1.Counts) {
		return 0
	}
	var n uint64
	for i := range h1.Counts {
		n += h1.Counts[i] - h0.Counts[i]
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i := range h1.Counts {
		seen += h1.Counts[i] - h0.Counts[i]
		if seen >= rank {
			hi := h1.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h1.Buckets[i]
			}
			return time.Duration(hi * 1e9)
		}
	}
	return 0
}
