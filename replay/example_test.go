package replay_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
	"github.com/kpcastream/kpcastream/replay"
)

// A labelled replay, as "kpcastream replay --in wine.csv --label label
// --standardize --budget 50 --components 3 --model-out model.json" runs
// it, with a hook counting the rows the classifier predicted right.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "replay-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	c := &replay.Config{Learner: learners.KindIKPCA, Kernel: learners.KernelRBF, Components: 3, Budget: 50, Forget: 1, Passes: 1,
		Solver: "auto", Precision: learners.DefaultPrecision, ModelOut: filepath.Join(dir, "model.json"),
		Monitor: replay.MonitorConfig{Learn: monitor.LearnAlways, Level: monitor.DefaultLevel, Trend: monitor.DefaultTrend},
		Label:   replay.LabelConfig{Column: "label", Standardize: true, On: "coords"}}
	in, err := os.Open(filepath.Join("..", "testdata", "data", "wine.csv"))
	if err != nil {
		panic(err)
	}
	defer in.Close()
	right := 0
	count := replay.HookFunc(func(_ learners.Learner, r *replay.Row) error {
		if r.Y >= 0 && r.Pred == r.Y {
			right++
		}
		return nil
	})
	if err := replay.Run(context.Background(), c, in, "wine.csv", os.Stdout, io.Discard, count); err != nil {
		panic(err)
	}
	fmt.Println("right:", right)
	// Output:
	// replay: prequential accuracy 0.9494 over 178 labelled rows; last half of the stream 0.9326 over 89 (classifier on coords, 3 classes, 178 rows × 1 pass)
	// replay: correct/labelled per class: 0 59/59, 1 68/71, 2 42/48
	// right: 169
}
