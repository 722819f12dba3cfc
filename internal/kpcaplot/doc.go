// Package kpcaplot draws a kpcaview.KeyView (the data of the live page
// and of the replay report) as PNG charts with gonum/plot: the files of
// replay --plot. Its one reason to change is how those charts look.
//
// Every plot has a title and both axis titles, tick labels written as
// people write numbers (2,500, not 2500.00), and its legend beside the
// data, never over it: the legend column is measured and the plot area
// shrinks to make room (a size too small for it is an error naming
// --plot-size, not a cut legend). Write is deterministic: the same view
// and size give the same pixels. Not safe for concurrent use of one
// directory.
package kpcaplot
