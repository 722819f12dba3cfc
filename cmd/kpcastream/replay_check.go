package main

import (
	"fmt"
	"slices"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// problems checks the flags of replay against each other; args are the
// arguments left after them.
func (o *replayOptions) problems(args []string) []string {
	var p []string
	if o.in == "" {
		p = append(p, "--in is required")
	}
	if o.ModelOut == "" {
		p = append(p, "--model-out is required")
	}
	if o.Passes < 1 {
		p = append(p, fmt.Sprintf("--passes must be ≥ 1, got %d", o.Passes))
	}
	if len(args) > 0 {
		p = append(p, fmt.Sprintf("unexpected arguments %q", args))
	}
	p = append(p, o.labelProblems()...)
	p = append(p, o.monitorProblems()...)
	return append(p, o.solverProblems()...)
}

// labelProblems checks the --label flags against the others.
func (o *replayOptions) labelProblems() []string {
	var p []string
	lab := &o.Label
	if lab.Column == "" {
		if lab.Classes != nil || lab.Ridge != 0 || lab.Forget != 0 || lab.Loss != "" || lab.On != "coords" {
			p = append(p, "--classes, --ridge, --classifier-forget, --classifier-loss and --classify-on need --label")
		}
		return p
	}
	if o.Learner != learners.KindIKPCA && o.Learner != learners.KindKHA {
		p = append(p, fmt.Sprintf("--label needs --learner ikpca or kha (their dictionary coordinates), got %q", o.Learner))
	}
	if len(o.ModelAt) > 0 {
		p = append(p, "--model-at is not available with --label")
	}
	if lab.On != "coords" && lab.On != "z" {
		p = append(p, fmt.Sprintf("--classify-on must be coords or z, got %q", lab.On))
	}
	if slices.Contains(o.Drop, lab.Column) {
		p = append(p, fmt.Sprintf("--label column %q is also in --drop", lab.Column))
	}
	return p
}

// monitorProblems checks the monitoring flags against the others.
func (o *replayOptions) monitorProblems() []string {
	var p []string
	m := &o.Monitor
	if m.Learn != monitor.LearnAlways && m.Learn != monitor.LearnNormal {
		p = append(p, fmt.Sprintf("--learn must be always or normal, got %q", m.Learn))
	}
	if !(m.Level > 0 && m.Level < 1) {
		p = append(p, fmt.Sprintf("--level must be in (0,1), got %v", m.Level))
	}
	if m.Warmup < 0 || m.AcceptAfter < 0 || m.Confirm < 0 || m.Window < 0 {
		p = append(p, "--warmup, --accept-after, --confirm and --limit-window must be ≥ 0")
	}
	if (m.AcceptAfter > 0 || m.Confirm > 0) && m.Learn != monitor.LearnNormal {
		p = append(p, "--accept-after and --confirm need --learn normal")
	}
	if m.Trend != monitor.TrendEWMA && m.Trend != monitor.TrendOff {
		p = append(p, fmt.Sprintf("--trend must be ewma or off, got %q", m.Trend))
	}
	if !(m.TrendLambda >= 0 && m.TrendLambda <= 1) {
		p = append(p, fmt.Sprintf("--trend-lambda must be in (0,1], got %v", m.TrendLambda))
	}
	if m.TrendLambda > 0 && (m.Learn != monitor.LearnNormal || m.Trend == monitor.TrendOff) {
		p = append(p, "--trend-lambda needs --learn normal and --trend ewma")
	}
	if m.FreezeSet && !o.Label.Standardize {
		p = append(p, "--freeze needs --standardize")
	}
	if o.Label.Column != "" && m.Learn != monitor.LearnAlways {
		p = append(p, "--learn normal is not available with --label")
	}
	if m.FaultColumn != "" && (o.Label.Column != "" || o.Learner == learners.KindBatch || o.Passes > 1 || o.Shuffle) {
		p = append(p, "--fault-column needs one in-order pass (no --passes, --shuffle-seed) of an online learner, without --label")
	}
	if m.FaultColumn != "" && slices.Contains(o.Drop, m.FaultColumn) {
		p = append(p, fmt.Sprintf("--fault-column %q is also in --drop", m.FaultColumn))
	}
	if o.Learner == learners.KindBatch && o.Label.Column == "" && o.Label.Standardize {
		p = append(p, "--standardize needs an online learner (ikpca, kha or window) or --label")
	}
	if o.Learner == learners.KindBatch && m.Learn != monitor.LearnAlways {
		p = append(p, "--learn normal needs an online learner (ikpca, kha or window)")
	}
	return p
}

// solverProblems checks --solver and --precision.
func (o *replayOptions) solverProblems() []string {
	var p []string
	switch o.Solver {
	case "auto", learners.SolverDense, learners.SolverLanczos, learners.SolverFast:
	default:
		p = append(p, fmt.Sprintf("--solver must be auto, dense, lanczos or fast, got %q", o.Solver))
	}
	if !(o.Precision > 0 && o.Precision <= 0.1) {
		p = append(p, fmt.Sprintf("--precision must be in (0, 0.1], got %v", o.Precision))
	}
	if o.Learner != learners.KindBatch && (o.Solver != "auto" || o.precisionSet) {
		p = append(p, "--solver and --precision apply to --learner batch only")
	}
	return p
}
