package learners

import (
	"fmt"
	"math"
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
	copy(s.SetMatrix(name, rows, cols), data[:rows*cols])
}

// Reuse readies s to be written again — by a learner's StateInto (see the
// function StateInto) or a decoder — with the given header, keeping its
// maps and the arrays of its matrices for SetMatrix: counters and scalars
// are cleared, matrices are kept but marked unset (Rows −1) until SetMatrix
// sets them or Trim removes them. A nil s allocates a new State.
func (s *State) Reuse(kind string, cfg Config, seen int64) *State {
	if s == nil || s.Ints == nil || s.Scalars == nil || s.Matrices == nil {
		return newState(kind, cfg, seen)
	}
	s.Version, s.Kind, s.Config, s.Seen = StateVersion, kind, cfg, seen
	clear(s.Ints)
	clear(s.Scalars)
	for k, m := range s.Matrices {
		m.Rows = -1
		s.Matrices[k] = m
	}
	return s
}

// SetMatrix sets matrix name to rows×cols and returns its array for the
// caller to fill (its contents are undefined): s's own array for name
// when it is large enough (after Reuse), else a new one.
func (s *State) SetMatrix(name string, rows, cols int) []float64 {
	n := rows * cols
	buf := s.Matrices[name].Data
	if buf == nil || cap(buf) < n {
		buf = make([]float64, n)
	}
	buf = buf[:n:n]
	s.Matrices[name] = Matrix{Rows: rows, Cols: cols, Data: buf}
	return buf
}

// Trim removes the matrices that Reuse marked and SetMatrix did not set
// since.
func (s *State) Trim() {
	for k, m := range s.Matrices {
		if m.Rows < 0 {
			delete(s.Matrices, k)
		}
	}
}

// StateInto writes l's state into s, reusing s's maps and arrays (State.
// Reuse), and returns it: a learner that can do so (an IKPCA) allocates
// nothing once s has held a state of its shape; any other learner's State()
// is returned instead. Either way the result shares nothing with l, and
// equals l.State().
func StateInto(l Learner, s *State) *State {
	if r, ok := l.(interface{ StateInto(*State) *State }); ok {
		return r.StateInto(s)
	}
	return l.State()
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
