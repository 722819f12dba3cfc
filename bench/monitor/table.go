package monitorbench

import (
	"fmt"
	"io"
	"strings"
)

// NormalCase is a normal process of the own-false-alarm columns of Table:
// Plant's normal runs after N training rows.
type NormalCase struct {
	Name  string
	Plant *Plant
	N     int
}

// NormalCases are the normal processes of issue 31: the Dong–McAvoy
// process with independent t, t behind an AR(1) of 0.5 and of 0.9, an
// operating point wandering by ±0.3 over 8,000 samples, AR(0.9) with only
// 200 normal rows before monitoring starts, and the 20-sensor plant with
// AR(0.9).
var NormalCases = []NormalCase{
	{"iid", DongMcAvoy(0, 0, 1), 400},
	{"AR(0.5)", DongMcAvoy(0.5, 0, 1), 400},
	{"AR(0.9)", DongMcAvoy(0.9, 0, 1), 400},
	{"wander", DongMcAvoy(0, 0.3, 8000), 400},
	{"AR(0.9), 200 rows", DongMcAvoy(0.9, 0, 1), 200},
	{"20 sensors AR(0.9)", WidePlant(0.9), 400},
}

// OwnFalseAlarms trains m on s.N rows of p and returns the share of the
// next run rows with an own alarm (either limit); −1 for a method without
// limits of its own.
func OwnFalseAlarms(m Method, p *Plant, seed uint64, n, run int) (float64, error) {
	train := draw(p.New(seed, 0), p.Dim, n, 0, nil)
	if err := m.Train(train, n); err != nil {
		return 0, fmt.Errorf("%s: train: %w", m.Name(), err)
	}
	_, _, own, err := scoreRun(m, draw(p.New(seed+1, n), p.Dim, run, run, nil), run)
	if err != nil {
		return 0, err
	}
	if own == nil {
		return -1, nil
	}
	return ownShare(own, 0, run), nil
}

// Table runs every method of methods over every normal case (own false
// alarms over run rows) and every fault of the Dong–McAvoy process and of
// the 20-sensor plant (s's sizes), and writes one markdown table: a row
// per method; per fault, the SPE detection with limits drawn from a normal
// run, then by the method's own alarms; for the single-variable faults of
// the 20-sensor plant, the shares of own alarms whose contributions rank
// the faulty sensor first and in the top three.
func Table(w io.Writer, s Setup, run int, methods func(Setup) []Method) error {
	type cells = map[string]string
	rows := map[string]cells{}
	var order, cols []string
	cell := func(method, col, v string) {
		if rows[method] == nil {
			rows[method] = cells{}
			order = append(order, method)
		}
		rows[method][col] = v
	}
	addCol := func(c string) {
		for _, x := range cols {
			if x == c {
				return
			}
		}
		cols = append(cols, c)
	}
	pct := func(v float64) string {
		if v < 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f", 100*v)
	}
	for _, nc := range NormalCases {
		c := "own FA " + nc.Name
		addCol(c)
		ns := s
		ns.Plant = nc.Plant
		for _, m := range methods(ns) {
			fa, err := OwnFalseAlarms(m, nc.Plant, s.Seed, nc.N, run)
			if err != nil {
				return err
			}
			cell(m.Name(), c, pct(fa))
		}
	}
	for _, p := range []*Plant{DongMcAvoy(0, 0, 1), WidePlant(0)} {
		ps := s
		ps.Plant = p
		rs, err := Evaluate(ps, methods(ps))
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Fault == "normal" {
				continue
			}
			c := r.Fault + " det. / own"
			addCol(c)
			cell(r.Method, c, pct(r.DetSPE)+" / "+pct(r.OwnDet))
			if p.Name == "wide" {
				c := r.Fault + " first / top 3"
				addCol(c)
				cell(r.Method, c, pct(r.First)+" / "+pct(r.Top3))
			}
		}
	}
	fmt.Fprintf(w, "| method | %s |\n", strings.Join(cols, " | "))
	fmt.Fprintf(w, "| --- |%s\n", strings.Repeat(" ---: |", len(cols)))
	for _, m := range order {
		line := "| " + m + " |"
		for _, c := range cols {
			v := rows[m][c]
			if v == "" {
				v = "—"
			}
			line += " " + v + " |"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
