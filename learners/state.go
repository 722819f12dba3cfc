package learners

import (
	"fmt"
	"math"
	"slices"
)

// StateVersion is the version of the State layout written by this package.
// Restore rejects other versions.
const StateVersion = 1

// Matrix is a row-major matrix: element (i, j) is Data[i*Cols+j].
type Matrix struct {
	Rows, Cols int
	Data       []float64
}

// State is a deep copy of everything a learner needs to resume: its kind
// and configuration, its counters and its arrays, each by name. It is a
// plain value: codec serialises it and Restore checks it, because a stored
// snapshot is untrusted input. Each learner documents the names it uses.
type State struct {
	Version int
	Kind    string
	Config  Config
	// Seen is the number of observations learned.
	Seen int64
	// Ints holds integer counters (basis version, ring positions, …).
	Ints map[string]int64
	// Scalars holds real scalars (total weights, running sums, …).
	Scalars map[string]float64
	// Matrices holds the arrays, vectors as 1×n matrices.
	Matrices map[string]Matrix
}

// newState returns an empty State for a learner of the given kind.
func newState(kind string, cfg Config, seen int64) *State {
	return &State{
		Version:  StateVersion,
		Kind:     kind,
		Config:   cfg,
		Seen:     seen,
		Ints:     map[string]int64{},
		Scalars:  map[string]float64{},
		Matrices: map[string]Matrix{},
	}
}

// putMatrix stores a copy of the first rows×cols values of data under name.
func (s *State) putMatrix(name string, rows, cols int, data []float64) {
	s.Matrices[name] = Matrix{Rows: rows, Cols: cols, Data: slices.Clone(data[:rows*cols])}
}

// stateReader checks a State's fields as they are read and keeps the first
// problem, so a restore can read everything and then fail once, cleanly.
type stateReader struct {
	s   *State
	err error
}

func (r *stateReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrState, fmt.Sprintf(format, args...))
	}
}

// header checks the version, kind and config of the state against want.
func (r *stateReader) header(kind string, want Config) {
	s := r.s
	if s == nil {
		r.fail("nil state")
		return
	}
	if s.Version != StateVersion {
		r.fail("version %d, want %d", s.Version, StateVersion)
	}
	if s.Kind != kind {
		r.fail("kind %q, want %q", s.Kind, kind)
	}
	if s.Seen < 0 {
		r.fail("seen %d is negative", s.Seen)
	}
	got := s.Config.withDefaults()
	if got != want {
		r.fail("config %+v does not match the learner's %+v", got, want)
	}
}

// int returns the named counter, checking it lies in [lo, hi].
func (r *stateReader) int(name string, lo, hi int64) int64 {
	v, ok := r.s.Ints[name]
	if !ok {
		r.fail("missing counter %q", name)
		return lo
	}
	if v < lo || v > hi {
		r.fail("counter %q = %d outside [%d, %d]", name, v, lo, hi)
		return lo
	}
	return v
}

// scalar returns the named scalar, checking it is finite and in [lo, hi].
func (r *stateReader) scalar(name string, lo, hi float64) float64 {
	v, ok := r.s.Scalars[name]
	if !ok {
		r.fail("missing scalar %q", name)
		return lo
	}
	if math.IsNaN(v) || v < lo || v > hi {
		r.fail("scalar %q = %v outside [%v, %v]", name, v, lo, hi)
		return lo
	}
	return v
}

// optionalScalar is scalar for a value that older states may lack: a
// missing one reads as 0 (which must lie in [lo, hi]).
func (r *stateReader) optionalScalar(name string, lo, hi float64) float64 {
	if _, ok := r.s.Scalars[name]; !ok {
		return 0
	}
	return r.scalar(name, lo, hi)
}

// matrix returns the named matrix's data, checking its shape and finiteness.
// The returned slice is the state's own; copy it before keeping it.
func (r *stateReader) matrix(name string, rows, cols int) []float64 {
	m, ok := r.s.Matrices[name]
	if !ok {
		r.fail("missing matrix %q", name)
		return nil
	}
	if m.Rows != rows || m.Cols != cols || len(m.Data) != rows*cols {
		r.fail("matrix %q is %d×%d with %d values, want %d×%d", name, m.Rows, m.Cols, len(m.Data), rows, cols)
		return nil
	}
	for i, v := range m.Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			r.fail("matrix %q element %d is %v", name, i, v)
			return nil
		}
	}
	return m.Data
}
