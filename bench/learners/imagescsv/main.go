package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/kpcastream/kpcastream/learners/learnertest"
)

func main() {
	n := flag.Int("n", 4000, "rows")
	d := flag.Int("d", 784, "pixels per row")
	classes := flag.Int("classes", 10, "classes")
	seed := flag.Uint64("seed", 1, "the model's seed (W and the class centres)")
	stream := flag.Uint64("stream", 1, "the rows' stream (another stream: a held-out sample)")
	flag.Parse()
	if *n < 1 || *d < 1 || *classes < 1 {
		fmt.Fprintln(os.Stderr, "imagescsv: -n, -d and -classes must be ≥ 1")
		os.Exit(2)
	}
	x, y := learnertest.Images(*n, *d, *classes, *seed, *stream)
	w := bufio.NewWriter(os.Stdout)
	for j := range *d {
		fmt.Fprintf(w, "p%d,", j)
	}
	fmt.Fprintln(w, "label")
	buf := make([]byte, 0, 32)
	for i := range *n {
		for _, v := range x[i**d : (i+1)**d] {
			buf = strconv.AppendFloat(buf[:0], v, 'g', 6, 64)
			w.Write(buf)
			w.WriteByte(',')
		}
		fmt.Fprintln(w, y[i])
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "imagescsv:", err)
		os.Exit(1)
	}
}
