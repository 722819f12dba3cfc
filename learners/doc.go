// Package learners is kpcastream's pure maths core: bounded-memory online
// kernel PCA learners fed one observation at a time, a batch kernel PCA
// reference, and the portable model export.
//
// Its one reason to change is the online kernel PCA maths, its bounds and the
// model export.
//
// # Model
//
// A Learner behaves like a running hash: Learn folds one observation into
// the state, Transform projects a vector onto the current k components,
// State/Restore save and resume it. Learners never do I/O, never start
// goroutines and never read the clock; randomness comes from Config.Seed,
// so the same config and inputs give an identical State. A learner is not
// safe for concurrent use: one goroutine owns it.
//
// Memory is fixed at construction by the budget B, the dimension d and the
// number of components k (see each learner's MemoryBytes); it never grows
// with the stream. After warm-up, Learn and Transform do not allocate.
// Working memory that lives only during a call (an ikpca's kernel rows,
// Ritz blocks and eigensolver workspace) can come from a Scratch shared by
// the learners of one goroutine (ShareScratch), so that many learners kept
// in memory hold their state alone; StateInto writes a state into a reused
// State, for a caller that saves many learners in turn.
//
// ikpca and window refresh their published components every few
// observations (Config.Refresh), so the published basis may lag the data by
// that many observations; their Sync method catches up on demand (replay
// calls it, on a copy, before each model export). Transform, Score and
// Model always describe the same published model.
//
// # Kinds
//
//   - ikpca (default): incremental eigenspace kernel PCA (Kim 2003 with Hall
//     et al.'s mean update) in whitened Nyström coordinates of a budgeted
//     dictionary, with ALD or coherence admission, pluggable eviction
//     (default centroid: members move to the mean of the points they stand
//     for) and an optional forgetting factor. Its Summary reports how well
//     the budget fits the stream.
//   - kha: Kashima's kernelised online PCA rules on a fixed memorised set
//     of B points with KHA/et gains: the generalised Hebbian rule (default,
//     with the β of Kashima's eq. (12)), Oja's single-component rule, or
//     kernel APEX (Config.Rule).
//   - window: exact kernel PCA of the last W observations (sliding window).
//   - batch: Raykar-style batch kernel PCA (Lanczos on centred kernel
//     products: a stored Gram, exact matrix-free kernel rows, explicit poly
//     features, or the improved fast Gauss transform for rbf at a stated
//     precision; see SolverAuto); the reference for tests and a learner
//     for offline fits.
//
// Subpackage classify is an online classifier on ikpca's whitened
// dictionary coordinates (IKPCA.Coords), kept basis-aware through
// IKPCA.LearnTracked and the CoordTracker interface: every change of
// coordinates is reported so that weights defined on them follow it.
//
// Subpackage monitor is process monitoring around any learner: control
// limits for SPE and T² (sliding-window quantiles), the alarm verdict,
// gated learning (learn only what is within the limits, confirmed) and the
// running standardisation of the inputs; Model's Preprocess and Monitor
// sections carry its standardisation and limits in the export.
//
// # Errors
//
// Learn, Transform and Score return ErrDimension or ErrNonFinite for a bad
// vector and leave the state unchanged; Transform returns ErrNotReady until
// the learner can project; ErrNumerical means a factorization failed and the
// update was rolled back; ErrState means a State failed its checks. A dst of
// the wrong length is a programmer error and panics.
package learners
