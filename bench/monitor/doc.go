// Package monitorbench is the process-monitoring benchmark of issue 21: a
// simulated nonlinear process with slow normal drift and step, ramp and
// drift faults, and one evaluation that scores batch kernel PCA, linear
// PCA and kpcastream online (learn always and learn normal) with the same
// code. Run it with
//
//	go test ./bench/monitor -run TestProcessMonitoring -v
//
// which prints the table recorded in bench/RESULTS.md §10.
//
// Its one reason to change is what the process-monitoring benchmark simulates
// and how it scores the methods.
package monitorbench
