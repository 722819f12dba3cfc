package main

import (
	"math"
	"testing"

	"github.com/kpcastream/kpcastream/learners"
)

// TestSnapshotBasisVersion: the basis version "snapshot ls|show" reports
// for a learner's State is the one its outputs carry (Summary's), for
// every built-in kind, including ikpca, which keeps the counter under
// "version" (issue 23, item 1: ls showed 0 for every ikpca key).
func TestSnapshotBasisVersion(t *testing.T) {
	for _, kind := range []string{learners.KindIKPCA, learners.KindKHA, learners.KindWindow, learners.KindBatch} {
		t.Run(kind, func(t *testing.T) {
			l, err := learners.New(learners.Config{Learner: kind, Dim: 3, Components: 2, Budget: 16,
				Kernel: learners.Kernel{Name: "rbf", Gamma: 0.5}})
			if err != nil {
				t.Fatal(err)
			}
			// Three regimes, so the basis turns at least once after it is first published.
			for i := range 600 {
				a, b := float64(i%7)/7, float64(i%5)/5
				x := []float64{a, b, math.Sin(float64(i))}
				switch {
				case i >= 400:
					x = []float64{b * 3, math.Cos(float64(i)), a}
				case i >= 200:
					x = []float64{math.Sin(float64(i)) * 2, a - b, b}
				}
				if err := l.Learn(x); err != nil {
					t.Fatal(err)
				}
				// The batch learner's version counts its fits.
				if f, ok := l.(interface{ Fit() error }); ok && i%100 == 99 {
					if err := f.Fit(); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := l.Summary(nil).BasisVersion
			if want == 0 {
				t.Fatalf("%s: basis version 0 after 600 observations: the test does not exercise the counter", kind)
			}
			got, err := basisVersion(l.State())
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: snapshot reports basis version %d, the learner's outputs carry %d", kind, got, want)
			}
		})
	}
	st := &learners.State{Version: learners.StateVersion, Kind: "nope", Config: learners.Config{Learner: "nope", Dim: 3}}
	if _, err := basisVersion(st); err == nil {
		t.Error("a state of an unknown learner kind gave a basis version")
	}
}
