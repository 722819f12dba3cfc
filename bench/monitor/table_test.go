package monitorbench

import (
	"os"
	"strconv"
	"testing"
)

// TestMonitoringTable prints the table of issue 31 (README, Monitoring):
// every method against every fault class, own-limit false alarms on the
// normal processes (NormalCases, 4,000 rows each) included. Run it with
//
//	go test ./bench/monitor -run TestMonitoringTable -v
func TestMonitoringTable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 6 normal processes × 4,000 rows and 12 fault runs per method (about 10 s)")
	}
	seed := uint64(1)
	if v := os.Getenv("KPCASTREAM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("KPCASTREAM_SEED: %v", err)
		}
		seed = n
	}
	s := Setup{N: 400, Run: 800, Onset: 160, K: 5, Budget: 100, Level: 0.99, Seed: seed}
	if err := Table(os.Stdout, s, 4000, Methods); err != nil {
		t.Fatal(err)
	}
}
