package kpcaview

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

//go:embed static
var static embed.FS

// Assets are the page's static files: index.html, app.js, charts.js
// (hand-written canvas charts, no third-party code) and style.css.
func Assets() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return sub
}

// KeyView is what the page shows of one key: the series API's response
// (GET /api/v1/series) and the data of a replay report.
type KeyView struct {
	Pipeline string `json:"pipeline"`
	Key      string `json:"key"`
	// Member is the worker's member id (live only).
	Member string `json:"member,omitempty"`
	// Time is when the view was taken, Unix milliseconds.
	Time       int64  `json:"time"`
	Learner    string `json:"learner"`
	Dim        int    `json:"dim"`
	Components int    `json:"components"`
	Budget     int    `json:"budget"`
	// WatchTTL is how long the key stays watched after this request, in
	// milliseconds (live only).
	WatchTTL int64 `json:"watch_ttl_ms,omitempty"`
	*View
	// Similarity is the report's similarity to batch KPCA over time.
	Similarity *Similarity `json:"similarity,omitempty"`
}

// Similarity is the similarity (mean cos² of the principal angles) of the
// learner's components after row X[i] to those of batch KPCA of the Window
// rows before it.
type Similarity struct {
	Window int       `json:"window"`
	X      []int64   `json:"x"`
	Sim    []float64 `json:"sim"`
}

// Report is the data of a self-contained report page.
type Report struct {
	Title     string `json:"title"`
	Generated string `json:"generated"`
	// Rows is the number of rows fed to the learner (View.Count counts
	// those it scored: not the first ones, before it was ready).
	Rows int64    `json:"rows"`
	View *KeyView `json:"view"`
	// Detection, when set, is the detection of a labelled fault column by
	// the monitor's alarms (replay --fault-column), shown under the header.
	Detection string `json:"detection,omitempty"`
	// Monitor, when set, is the monitor's summary (replay with monitoring
	// flags): rows learned and alarmed, where the warm-up — rows taken as
	// normal — ended and how many it learned, the limits in force; shown
	// under the header.
	Monitor string `json:"monitor,omitempty"`
}

// WriteReport writes the page with r embedded and every script and style
// inlined: one HTML file that opens without a server or network.
func WriteReport(w io.Writer, r *Report) error {
	page, err := fs.ReadFile(static, "static/index.html")
	if err != nil {
		return err
	}
	read := func(name string) string {
		b, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	data, err := json.Marshal(r) // escapes <, > and &: safe inside <script>
	if err != nil {
		return fmt.Errorf("kpcaview: report data: %w", err)
	}
	s := string(page)
	for _, rep := range [][2]string{
		{`<link rel="stylesheet" href="style.css">`, "<style>\n" + read("style.css") + "</style>"},
		{`<!--REPORT-DATA-->`, "<script>window.KPCA_REPORT = " + string(data) + ";</script>"},
		{`<script src="charts.js"></script>`, "<script>\n" + read("charts.js") + "</script>"},
		{`<script src="app.js"></script>`, "<script>\n" + read("app.js") + "</script>"},
	} {
		if !strings.Contains(s, rep[0]) {
			return fmt.Errorf("kpcaview: page has no %s", rep[0])
		}
		s = strings.Replace(s, rep[0], rep[1], 1)
	}
	_, err = io.Copy(w, bytes.NewBufferString(s))
	return err
}
