// Package monitorbench is the process-monitoring benchmark of issue 21: a
// simulated nonlinear process with slow normal drift and step, ramp and
// drift faults, and one evaluation that scores batch kernel PCA, linear
// PCA and kpcastream online (learn always and learn normal) with the same
// code. Run it with
//
//	go test ./bench/monitor -run TestProcessMonitoring -v
//
// which prints the table recorded in bench/RESULTS.md §10. Issue 31 added
// autocorrelated, wandering and short-history normal processes, a
// 20-sensor plant with single-sensor faults, the ranking of the faulty
// sensor by the alarms' contributions, and one table of every method
// against every fault class (Table):
//
//	go test ./bench/monitor -run TestMonitoringTable -v
//
// Its one reason to change is what the process-monitoring benchmark simulates
// and how it scores the methods.
package monitorbench
