package replay

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kpcastream/kpcastream/learners"
	"github.com/kpcastream/kpcastream/learners/monitor"
)

// projWriter writes one CSV line per fed row: row (0-based data row of the
// input file), pass, z1…zk, spe, t2, spe_limit, t2_limit, alarm. Rows fed
// before the learner is ready have empty projection and score fields; the
// limits are empty until they are in force (after the monitor's warm-up)
// and alarm is empty without one ("spe", "t2" or "both"). With monitoring
// settings (MonitorConfig.Set) a last column, contrib, names an alarm's
// variables, largest contribution first, as index:value;… (0-based
// feature index; empty without an alarm). With the monitor's linear
// residual (monitor.linear, on by default for 2 ≤ dim ≤ 128) four last
// columns follow: lspe, lspe_limit, lewma, lewma_limit, each empty while
// it does not judge (the linear model not ready, the limits not in force).
type projWriter struct {
	csvOut
	k       int
	contrib bool
	linear  bool
}

// csvOut is a buffered CSV output file with a line buffer reused per row.
type csvOut struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte
}

func createCSV(path string) (csvOut, error) {
	f, err := os.Create(path)
	if err != nil {
		return csvOut{}, err
	}
	return csvOut{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

// line writes b, a row without its newline, and keeps b's storage for the
// next row.
func (c *csvOut) line(b []byte) error {
	b = append(b, '\n')
	c.buf = b
	_, err := c.w.Write(b)
	return err
}

// Close flushes and closes the file; a second Close does nothing.
func (c *csvOut) Close() error {
	if c.f == nil {
		return nil
	}
	err := c.w.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	return err
}

func newProjWriter(path string, k int, contrib, linear bool) (*projWriter, error) {
	c, err := createCSV(path)
	if err != nil {
		return nil, err
	}
	p := &projWriter{csvOut: c, k: k, contrib: contrib, linear: linear}
	p.w.WriteString("row,pass")
	for i := 1; i <= k; i++ {
		fmt.Fprintf(p.w, ",z%d", i)
	}
	p.w.WriteString(",spe,t2,spe_limit,t2_limit,alarm")
	if contrib {
		p.w.WriteString(",contrib")
	}
	if linear {
		p.w.WriteString(",lspe,lspe_limit,lewma,lewma_limit")
	}
	p.w.WriteString("\n")
	return p, nil
}

// Row writes the row's line.
func (p *projWriter) Row(_ learners.Learner, r *Row) error {
	return p.write(r.Index, r.Pass, r.Z, r.Novelty, r.Err, r.Verdict, r.Monitor.Contrib)
}

func (p *projWriter) write(idx, pass int, z []float64, nov learners.Novelty, err error, v monitor.Verdict, contrib []monitor.Contribution) error {
	b := p.buf[:0]
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pass), 10)
	switch {
	case err == nil:
		for _, v := range z {
			b = append(b, ',')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, ',')
		b = strconv.AppendFloat(b, nov.SPE, 'g', -1, 64)
		b = append(b, ',')
		b = strconv.AppendFloat(b, nov.T2, 'g', -1, 64)
		b = append(b, ',')
		if v.InForce {
			b = strconv.AppendFloat(b, v.SPELimit, 'g', -1, 64)
			b = append(b, ',')
			b = strconv.AppendFloat(b, v.T2Limit, 'g', -1, 64)
		} else {
			b = append(b, ',')
		}
		b = append(b, ',')
		b = append(b, v.Alarm.String()...)
		if p.contrib {
			b = append(b, ',')
			for i, c := range contrib {
				if i > 0 {
					b = append(b, ';')
				}
				b = strconv.AppendInt(b, int64(c.Var), 10)
				b = append(b, ':')
				b = strconv.AppendFloat(b, c.Value, 'g', 6, 64)
			}
		}
		if p.linear {
			b = appendJudged(b, v.LSPE, v.LSPELimit)
			b = appendJudged(b, v.LEWMA, v.LEWMALimit)
		}
	case errors.Is(err, learners.ErrNotReady):
		for range p.k + 5 {
			b = append(b, ',')
		}
		if p.contrib {
			b = append(b, ',')
		}
		if p.linear {
			b = append(b, ",,,,"...)
		}
	default:
		return fmt.Errorf("row %d: %w", idx, err)
	}
	return p.line(b)
}

// appendJudged appends ",stat,limit", both empty while the statistic does
// not judge (its limit is 0: the linear model not ready or the limits not
// in force).
func appendJudged(b []byte, stat, limit float64) []byte {
	if limit <= 0 {
		return append(b, ',', ',')
	}
	b = append(b, ',')
	b = strconv.AppendFloat(b, stat, 'g', -1, 64)
	b = append(b, ',')
	return strconv.AppendFloat(b, limit, 'g', -1, 64)
}

// predWriter writes one CSV line per fed row: row, pass, label, pred,
// correct (1, 0, or empty for an unlabelled row), then one score per class
// (empty before the classifier can predict).
type predWriter struct{ csvOut }

func newPredWriter(path string, classes []string) (*predWriter, error) {
	c, err := createCSV(path)
	if err != nil {
		return nil, err
	}
	p := &predWriter{c}
	p.w.WriteString("row,pass,label,pred,correct")
	for _, c := range classes {
		p.w.WriteString(",score_" + csvField(c))
	}
	p.w.WriteString("\n")
	return p, nil
}

func (p *predWriter) Write(idx, pass int, label string, classes []string, pred, y int, scores []float64) error {
	b := p.buf[:0]
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pass), 10)
	b = append(b, ',')
	b = append(b, csvField(label)...)
	b = append(b, ',')
	if pred >= 0 {
		b = append(b, csvField(classes[pred])...)
	}
	b = append(b, ',')
	switch {
	case y < 0:
	case pred == y:
		b = append(b, '1')
	default:
		b = append(b, '0')
	}
	for _, v := range scores {
		b = append(b, ',')
		if pred >= 0 {
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return p.line(b)
}

// csvField quotes s for CSV when it needs quoting.
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\n\r") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
