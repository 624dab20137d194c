package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/internal/benchkit"
)

// Goal is one claim the README makes, checked against this run.
type Goal struct {
	Text   string `json:"text"`
	Status string `json:"status"` // met, missed, not measured
	Detail string `json:"detail"`
}

// Unavailable is a workload that could not run, and why.
type Unavailable struct {
	Workload string `json:"workload"`
	Why      string `json:"why"`
}

// Report is a whole suite run.
type Report struct {
	Date        string           `json:"date"`
	Machine     string           `json:"machine"`
	Command     string           `json:"command"`
	Seconds     float64          `json:"seconds"`
	Load        string           `json:"load"` // /proc/loadavg (1/5/15 min) at the start and the end of the run
	Config      harness.Config   `json:"config"`
	Probes      []benchkit.Probe `json:"probes"`
	Results     []harness.Result `json:"results"`
	Unavailable []Unavailable    `json:"unavailable,omitempty"`
	Goals       []Goal           `json:"goals,omitempty"`
	Plots       []string         `json:"plots,omitempty"`
	Notes       []string         `json:"notes,omitempty"`
	Interrupted []string         `json:"interrupted,omitempty"` // workloads not run (Ctrl-C)
}

// Workload returns the results of one workload in run order.
func (r *Report) Workload(w string) []harness.Result {
	var out []harness.Result
	for _, x := range r.Results {
		if x.Workload == w {
			out = append(out, x)
		}
	}
	return out
}

// Find returns the first result of workload w named name with message
// size size (0: any) and drop drop.
func (r *Report) Find(w, name string, size int, drop float64) (harness.Result, bool) {
	for _, x := range r.Results {
		if x.Workload == w && x.Name == name && (size == 0 || x.Size == size) && x.Drop == drop && x.Skipped == "" {
			return x, true
		}
	}
	return harness.Result{}, false
}

func us(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(ns)/1e3)
}

func ratio(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v)
}

func rate(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func pct(v float64) string { return fmt.Sprintf("%.1f", v) }

func latencyRows(rs []harness.Result) [][]string {
	var rows [][]string
	for _, r := range rs {
		if r.Skipped != "" {
			rows = append(rows, []string{r.Name, r.Mode, dropStr(r.Drop), "-", "-", "-", "-", "-", "-", "-", "-", "", r.Note})
			continue
		}
		l := r.Latency
		rows = append(rows, []string{r.Name, r.Mode, dropStr(r.Drop), fmt.Sprint(l.N), us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max), fmt.Sprintf("%.1f", l.Mean/1e3),
			ratio(r.RatioP50), ratio(r.RatioP99), r.Note})
	}
	return rows
}

var latencyHead = []string{"protocol", "mode", "drop %", "n", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "mean µs", "p50 ×floor", "p99 ×floor", "note"}

func dropStr(d float64) string { return fmt.Sprintf("%g", d*100) }

func tputRows(rs []harness.Result) [][]string {
	var rows [][]string
	for _, r := range rs {
		if r.Skipped != "" {
			rows = append(rows, []string{r.Name, r.Mode, fmt.Sprint(r.Size), dropStr(r.Drop), "-", "-", "-", "-", "-", "-", r.Note})
			continue
		}
		rows = append(rows, []string{r.Name, r.Mode, fmt.Sprint(r.Size), dropStr(r.Drop), rate(r.RecPerS), fmt.Sprintf("%.3f", r.Gbps), ratio(r.RatioTput),
			pct(r.DeliveredPct), fmt.Sprintf("%.2f", r.RetransPerRec), fmt.Sprint(r.Sent), r.Note})
	}
	return rows
}

var tputHead = []string{"protocol", "mode", "bytes", "drop %", "rec/s", "Gbit/s", "×floor", "in order %", "retx/rec", "sent", "note"}

// lossRows are tputRows with two more columns before the note: the share
// delivered over UDP and the one-way (send → in-order delivery) p99.
func lossRows(rs []harness.Result) [][]string {
	rows := tputRows(rs)
	for i, r := range rs {
		udp, p99 := "-", "-"
		if r.Skipped == "" {
			udp, p99 = overUDP(r), us(r.Latency.P99)
		}
		n := len(rows[i])
		rows[i] = append(rows[i][:n-1:n-1], udp, p99, rows[i][n-1])
	}
	return rows
}

var lossHead = []string{"protocol", "mode", "bytes", "drop %", "rec/s", "Gbit/s", "×floor", "in order %", "retx/rec", "sent", "over UDP %", "one-way p99 µs", "note"}

// overUDP is a row's share delivered over UDP, "n/a" when not measured.
func overUDP(r harness.Result) string {
	if r.OverUDPPct == nil {
		return "n/a"
	}
	return pct(*r.OverUDPPct)
}

// ms is ns in milliseconds, "-" for 0.
func ms(ns int64) string {
	switch {
	case ns == 0:
		return "-"
	case ns < 10_000_000:
		return fmt.Sprintf("%.2f", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.0f", float64(ns)/1e6)
}

// Sections writes every workload's table (Markdown or text).
func (r *Report) Sections(w io.Writer, md bool) {
	h := func(s string) {
		if md {
			fmt.Fprintf(w, "### %s\n\n", s)
		} else {
			fmt.Fprintf(w, "== %s\n", s)
		}
	}
	titles := map[string]string{
		"rtt":              "rtt — ping-pong round trip, 128 B (floor: raw-udp for the peers, floor-loop for the datapath rows; same run)",
		"oneway":           "oneway — send to delivery, clock shared in-process",
		"classic-rtt":      "classic sender — RTT with receiver-side drop",
		"throughput":       "throughput (floor: raw-udp for the peers; floor-gso-gro, and floor-odirect for WAL rows, for the datapath rows; same run)",
		"classic-bw":       "classic bandwidth — 1427-byte payloads",
		"loss-degradation": "loss-degradation — sustained loss both ways, no application window",
	}
	for _, wl := range []string{"rtt", "oneway", "classic-rtt"} {
		if rs := r.Workload(wl); len(rs) > 0 {
			h(titles[wl])
			benchkit.Table(w, md, latencyHead, latencyRows(rs))
		}
	}
	for _, wl := range []string{"throughput", "classic-bw"} {
		if rs := r.Workload(wl); len(rs) > 0 {
			h(titles[wl])
			benchkit.Table(w, md, tputHead, tputRows(rs))
		}
	}
	if rs := r.Workload("loss-degradation"); len(rs) > 0 {
		h(titles["loss-degradation"])
		benchkit.Table(w, md, lossHead, lossRows(rs))
	}
	known := map[string]bool{"rtt": true, "oneway": true, "classic-rtt": true, "throughput": true, "classic-bw": true, "loss-degradation": true}
	var other []string
	for _, x := range r.Results {
		if !known[x.Workload] && !contains(other, x.Workload) {
			other = append(other, x.Workload)
		}
	}
	for _, wl := range other {
		h(wl)
		var lat, tput []harness.Result
		for _, x := range r.Workload(wl) {
			if x.Latency.N > 0 {
				lat = append(lat, x)
			}
			if x.RecPerS > 0 || x.Skipped != "" {
				tput = append(tput, x)
			}
		}
		if len(lat) > 0 {
			benchkit.Table(w, md, latencyHead, latencyRows(lat))
		}
		if len(tput) > 0 {
			benchkit.Table(w, md, tputHead, tputRows(tput))
		}
	}
	if len(r.Unavailable) > 0 {
		h("not available")
		var rows [][]string
		for _, u := range r.Unavailable {
			rows = append(rows, []string{u.Workload, u.Why})
		}
		benchkit.Table(w, md, []string{"workload", "why"}, rows)
	}
	if len(r.Goals) > 0 {
		h("goals")
		var rows [][]string
		for _, g := range r.Goals {
			rows = append(rows, []string{g.Text, g.Status, g.Detail})
		}
		benchkit.Table(w, md, []string{"goal", "status", "evidence"}, rows)
	}
}

func containsF(s []float64, x float64) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// perfTable lists the per-operation counters of the rtt rows.
func (r *Report) perfTable(w io.Writer, md bool) {
	rs := r.Workload("rtt")
	if len(rs) == 0 {
		return
	}
	head := append([]string{"protocol"}, benchkit.PerfEvents...)
	var rows [][]string
	for _, x := range rs {
		if x.Skipped != "" || len(x.Perf) == 0 {
			continue
		}
		row := []string{x.Name}
		for _, c := range x.Perf {
			if !c.OK {
				row = append(row, "n/a")
			} else {
				row = append(row, fmt.Sprintf("%.3g", c.PerOp))
			}
		}
		rows = append(rows, row)
	}
	benchkit.Table(w, md, head, rows)
}

// Text writes the stdout form: probe matrix, then every table.
func (r *Report) Text(w io.Writer) {
	fmt.Fprintf(w, "walcast bench — %s — %s\n%s\n\n", r.Date, r.Machine, r.Command)
	var rows [][]string
	for _, p := range r.Probes {
		ok := "no"
		if p.OK {
			ok = "yes"
		}
		rows = append(rows, []string{p.Name, ok, p.Detail})
	}
	benchkit.Table(w, false, []string{"probe", "works", "detail"}, rows)
	r.Sections(w, false)
}

// Markdown is report.md.
func (r *Report) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# walcast bench report\n\n- date: %s\n- machine: %s\n- command: `%s`\n- wall time: %.0f s\n- load average (1/5/15 min) at start → end: %s\n- shape: %d B payload, %d warm-up + up to %d measured messages or %v per row, A pinned to core %d, B to core %d\n\n",
		r.Date, r.Machine, r.Command, r.Seconds, r.Load, r.Config.Payload, r.Config.Warmup, r.Config.N, r.Config.Budget, r.Config.ClientCPU, r.Config.ServerCPU)
	b.WriteString("## Probe matrix\n\n")
	b.WriteString(benchkit.ProbeTable(r.Probes))
	b.WriteString("\n## Results\n\n")
	r.Sections(&b, true)
	b.WriteString("### perf counters per round trip (rtt, client thread)\n\n")
	r.perfTable(&b, true)
	if len(r.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	if len(r.Plots) > 0 {
		b.WriteString("## Plots\n\n")
		for _, p := range r.Plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", p, p)
		}
	}
	return b.Bytes()
}

// Load reads a report Write saved (results.json).
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := new(Report)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Write saves results.json and report.md into dir and draws the plots.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plots, err := Plots(r, dir)
	r.Plots = plots
	if err != nil {
		r.Notes = append(r.Notes, "plots: "+err.Error())
	}
	sort.Strings(r.Plots)
	// results.json keeps the per-message series only where a plot needs
	// them again (`cast-bench -from`): the classic scatter plots.
	saved := *r
	saved.Results = append([]harness.Result(nil), r.Results...)
	for i := range saved.Results {
		if saved.Results[i].Workload != "classic-rtt" {
			saved.Results[i].Series = nil
		}
	}
	j, err := json.MarshalIndent(&saved, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), j, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), r.Markdown(), 0o644)
}

// README markers; only what lies between them is replaced.
const (
	BeginMarker = "<!-- bench:begin -->"
	EndMarker   = "<!-- bench:end -->"
)

// ErrNoMarkers is returned when the README lacks the markers.
var ErrNoMarkers = errors.New("report: README has no " + BeginMarker + " … " + EndMarker + " block")

// ReplaceBlock returns doc with the text between the markers replaced by
// block; everything outside them is kept byte for byte.
func ReplaceBlock(doc []byte, block string) ([]byte, error) {
	i := bytes.Index(doc, []byte(BeginMarker))
	if i < 0 {
		return nil, ErrNoMarkers
	}
	start := i + len(BeginMarker)
	j := bytes.Index(doc[start:], []byte(EndMarker))
	if j < 0 {
		return nil, ErrNoMarkers
	}
	var out bytes.Buffer
	out.Write(doc[:start])
	out.WriteString("\n")
	out.WriteString(strings.TrimSpace(block))
	out.WriteString("\n")
	out.Write(doc[start+j:])
	return out.Bytes(), nil
}

// Figures is the README block: when and where, the headline rows of each
// workload with ratios to the same-run floor, and the goals.
func (r *Report) Figures() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Measured %s, load average %s. This run's plots and full report (spreads, perf counters) are in docs/bench/ (run.txt names this run); `make bench` rewrites this block and them together.\n\n", r.Stamp(), r.Load)
	if rs := r.Workload("rtt"); len(rs) > 0 {
		b.WriteString("RTT, 128 B ping-pong, pinned, loopback:\n\n")
		var rows [][]string
		for _, x := range rs {
			if x.Skipped != "" {
				rows = append(rows, []string{x.Name, "skipped", "", "", "", ""})
				continue
			}
			rows = append(rows, []string{x.Name, us(x.Latency.P50), us(x.Latency.P99), us(x.Latency.P999), ratio(x.RatioP50), ratio(x.RatioP99), x.Floor})
		}
		benchkit.Table(&b, true, []string{"protocol", "p50 µs", "p99 µs", "p99.9 µs", "p50 ×floor", "p99 ×floor", "floor"}, rows)
	}
	if rs := r.Workload("throughput"); len(rs) > 0 {
		b.WriteString("Throughput, loopback, pinned:\n\n")
		var rows [][]string
		for _, x := range rs {
			if x.Skipped != "" {
				continue
			}
			rows = append(rows, []string{x.Name, fmt.Sprint(x.Size), rate(x.RecPerS), fmt.Sprintf("%.3f", x.Gbps), ratio(x.RatioTput), x.Floor, pct(x.DeliveredPct)})
		}
		benchkit.Table(&b, true, []string{"protocol", "bytes", "rec/s", "Gbit/s", "×floor", "floor", "delivered %"}, rows)
	}
	if rs := r.Workload("loss-degradation"); len(rs) > 0 {
		b.WriteString("Loss both ways (144 B, no application window): delivered in order % / records per s:\n\n")
		lossPivot(&b, rs, func(x harness.Result) string { return fmt.Sprintf("%.1f / %s", x.DeliveredPct, rate(x.RecPerS)) })
		b.WriteString("The same rows: % of the delivered records that arrived over UDP (the rest came by TCP catch-up; 100 by construction for a peer with no TCP path, 0 for a TCP peer) / one-way p99 ms, send → in-order delivery on one clock:\n\n")
		why := lossPivot(&b, rs, func(x harness.Result) string { return overUDP(x) + " / " + ms(x.Latency.P99) })
		for _, y := range why {
			fmt.Fprintf(&b, "- n/a: %s\n", y)
		}
		if len(why) > 0 {
			b.WriteString("\n")
		}
	}
	if rs := r.Workload("classic-rtt"); len(rs) > 0 {
		b.WriteString("Classic sender RTT under receiver-side drop, p50 / p99 µs (n):\n\n")
		var rows [][]string
		for _, x := range rs {
			if x.Skipped != "" {
				continue
			}
			rows = append(rows, []string{x.Name, dropStr(x.Drop), fmt.Sprintf("%s / %s (%d)", us(x.Latency.P50), us(x.Latency.P99), x.Latency.N)})
		}
		benchkit.Table(&b, true, []string{"protocol", "drop %", "p50 / p99 µs (n)"}, rows)
	}
	if len(r.Goals) > 0 {
		b.WriteString("Goals:\n\n")
		var rows [][]string
		for _, g := range r.Goals {
			rows = append(rows, []string{g.Text, g.Status, g.Detail})
		}
		benchkit.Table(&b, true, []string{"goal", "status", "evidence"}, rows)
	}
	for _, u := range r.Unavailable {
		fmt.Fprintf(&b, "- %s: not available: %s\n", u.Workload, u.Why)
	}
	return b.String()
}

// lossPivot writes the loss rows as one line per protocol and one column
// per drop, each cell cell(row); a skipped row's cell is n/a, and the
// skipped rows' reasons are returned ("name: why", once each).
func lossPivot(w io.Writer, rs []harness.Result, cell func(harness.Result) string) (why []string) {
	var drops []float64
	var names []string
	cells := map[string]map[float64]string{}
	for _, x := range rs {
		if !containsF(drops, x.Drop) {
			drops = append(drops, x.Drop)
		}
		if !contains(names, x.Name) {
			names = append(names, x.Name)
			cells[x.Name] = map[float64]string{}
		}
		if x.Skipped == "" {
			cells[x.Name][x.Drop] = cell(x)
		} else {
			cells[x.Name][x.Drop] = "n/a"
			if !contains(why, x.Name+": "+x.Skipped) {
				why = append(why, x.Name+": "+x.Skipped)
			}
		}
	}
	head := []string{"protocol"}
	for _, d := range drops {
		head = append(head, dropStr(d)+" %")
	}
	var rows [][]string
	for _, n := range names {
		row := []string{n}
		for _, d := range drops {
			row = append(row, cells[n][d])
		}
		rows = append(rows, row)
	}
	benchkit.Table(w, true, head, rows)
	return why
}

// Stamp names the run: when, where and the command, as the README block
// and every plot say it.
func (r *Report) Stamp() string {
	return fmt.Sprintf("%s on %s with `%s`", r.Date, r.Machine, r.Command)
}

// RunFile is the file Publish writes beside the plots: the stamp of the
// run they come from, and their names.
const RunFile = "run.txt"

// Publish writes this run's plots and report.md into dir (the README
// block points there) with RunFile, and removes the plots an earlier run
// left there that this run did not draw: the README block and the
// published figures always come from one run.
func (r *Report) Publish(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	plots, err := Plots(r, dir)
	if err != nil {
		r.Notes = append(r.Notes, "plots: "+err.Error())
	}
	sort.Strings(plots)
	r.Plots = plots
	if err := os.WriteFile(filepath.Join(dir, "report.md"), r.Markdown(), 0o644); err != nil {
		return err
	}
	run := fmt.Sprintf("stamp: %s\nplots: %s\n", r.Stamp(), strings.Join(plots, " "))
	return os.WriteFile(filepath.Join(dir, RunFile), []byte(run), 0o644)
}

// UpdateReadme rewrites the figures block of the README at path.
func (r *Report) UpdateReadme(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := ReplaceBlock(doc, r.Figures())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}
