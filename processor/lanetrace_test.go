package processor

import (
	"fmt"
	"os"
	"sync"
)

var laneLogMu sync.Mutex
var laneLog []string

func init() {
	if os.Getenv("LANE_TRACE") == "" {
		return
	}
	laneTrace = func(l *lane, format string, args ...any) {
		laneLogMu.Lock()
		laneLog = append(laneLog, fmt.Sprintf("%p ", l)+fmt.Sprintf(format, args...))
		laneLogMu.Unlock()
	}
}

func dumpLaneLog() {
	laneLogMu.Lock()
	defer laneLogMu.Unlock()
	f, _ := os.Create("/tmp/lanelog.txt")
	for _, s := range laneLog {
		fmt.Fprintln(f, s)
	}
	f.Close()
}
