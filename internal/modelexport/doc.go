// Package modelexport reads a model export (kpcastream.model/v1, README
// "The model export format") as any program outside the processor would:
// plain JSON, checked, and applied to a row by its kernel expansion — the
// projection, the preprocessing and the classifier section. kpcastream
// project and predict use it.
//
// Its one reason to change is the model export format.
package modelexport
