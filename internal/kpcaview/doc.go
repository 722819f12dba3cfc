// Package kpcaview holds what the live page (/ui of every worker) and the
// offline report of replay show of one key's learner: a bounded record of
// its latest observations (Samples) and of per-bucket aggregates (Buckets:
// one per second live, one per fixed number of rows in a replay), the
// control limits of its novelty scores, drift markers and basis changes,
// and the page's static files (Assets).
//
// Its one reason to change is what the live page and the replay report show
// of a key.
//
// Model. A Series is fed one Observation at a time by its owner and read
// with View, which returns a self-contained, JSON-ready copy (columnar
// arrays, non-finite numbers replaced by 0). Memory is fixed when the Series
// is built: at most Options.Samples samples of at most Options.ZDims
// components, Options.Buckets buckets and maxEvents basis changes. A live
// Series keeps the latest observations (ring buffers); a thinned one (the
// report) keeps the whole stream at a resolution that halves each time its
// store fills (every other sample is dropped, adjacent buckets are merged),
// so any stream length fits.
//
// Everything here is pure: no I/O, no clock (times are given by the caller
// as the X of each observation: Unix milliseconds live, row numbers in a
// replay), no goroutines. A Series is not safe for concurrent use: the
// caller serialises Add and View.
package kpcaview
