package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"

	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/counters/metrics"
)

func init() {
	register(command{name: "stat", summary: "show the counters of the walcast processes on this host (live, stale; -watch, -json, -serve)", run: runStat})
}

// statOut is the writer cast stat prints to (tests replace it).
var statOut io.Writer = os.Stdout

func runStat(args []string) error {
	fs := newFlagSet("stat", "[-dir DIR] [-watch] [-json] [-loss] [-errors] [-all] [-clean] [-serve ADDR]",
		"List every walcast process whose counters file is in -dir (each producer and consumer\n"+
			"process writes one: <pid>.counters) with its counters: per stream and role, per loop\n"+
			"thread. A file whose pid is gone is marked stale (-clean removes those). -watch refreshes\n"+
			"every -interval with per-second rates; -json prints one JSON object per refresh; -loss\n"+
			"the loss report (recent episodes and their aggregates), -errors the distinct errors.\n"+
			"-serve ADDR serves the same counters at /metrics in the Prometheus text format.\n"+
			"Reading needs only read access to the files (mode 0644): any user can.")
	dir := fs.String("dir", counters.DefaultDir(), "counters directory (the processes' Counters.Dir)")
	watch := fs.Bool("watch", false, "refresh every -interval, with per-second rates")
	interval := fs.Duration("interval", time.Second, "refresh interval of -watch")
	count := fs.Int("n", 0, "with -watch, stop after n refreshes (0: until Ctrl-C)")
	asJSON := fs.Bool("json", false, "one JSON object per refresh")
	loss := fs.Bool("loss", false, "print the loss report")
	errs := fs.Bool("errors", false, "print the distinct errors")
	all := fs.Bool("all", false, "print counters that are zero too")
	clean := fs.Bool("clean", false, "remove the files of dead processes (stale)")
	serve := fs.String("serve", "", "serve /metrics on this address (host:port) until Ctrl-C")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval <= 0 {
		return usagef("-interval %v must be > 0", *interval)
	}
	if *serve != "" {
		return serveMetrics(*dir, *serve)
	}
	if *clean {
		return cleanStale(*dir)
	}
	var prev map[int]*counters.Snapshot
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	for i := 0; ; i++ {
		snaps, bad, err := counters.List(*dir)
		if err != nil {
			return failf("%v", err)
		}
		now := time.Now()
		var rates map[int]processRates
		if prev != nil {
			rates = rateOf(prev, snaps)
		}
		switch {
		case *asJSON:
			if err := writeStatJSON(statOut, *dir, now, snaps, rates); err != nil {
				return failf("%v", err)
			}
		default:
			if *watch && i > 0 {
				fmt.Fprint(statOut, "\x1b[H\x1b[2J")
			}
			writeStatTable(statOut, *dir, now, snaps, bad, rates, statView{all: *all, loss: *loss, errors: *errs, watch: *watch})
		}
		if !*watch || (*count > 0 && i+1 >= *count) {
			return nil
		}
		prev = map[int]*counters.Snapshot{}
		for _, s := range snaps {
			prev[s.PID] = s
		}
		select {
		case <-time.After(*interval):
		case <-sig:
			return nil
		}
	}
}

// processRates are one process's counters' per-second changes between
// two reads, over the time between the writer's two copies they saw.
type processRates struct {
	over  time.Duration
	value map[string]float64
}

// rateOf is the per-second change of every counter between two reads of
// the same process. The time is the writer's, between the two copies of
// its counters the reads found (the file's heartbeat, stamped with each
// copy), not the reader's: a copy comes every counters.SampleInterval, so
// the reader's own interval would be off by up to that much.
func rateOf(prev map[int]*counters.Snapshot, snaps []*counters.Snapshot) map[int]processRates {
	out := map[int]processRates{}
	for _, s := range snaps {
		p := prev[s.PID]
		d := time.Duration(s.Heartbeat - p0(p).Heartbeat)
		if p == nil || p.Start != s.Start || d <= 0 {
			continue
		}
		old := map[string]uint64{}
		for _, v := range p.Values {
			old[v.Label] = v.Value
		}
		r := map[string]float64{}
		for _, v := range s.Values {
			if o, ok := old[v.Label]; ok && v.Kind.IsCounter() && v.Value >= o {
				r[v.Label] = float64(v.Value-o) / d.Seconds()
			}
		}
		out[s.PID] = processRates{over: d, value: r}
	}
	return out
}

type statView struct{ all, loss, errors, watch bool }

// p0 is p, or an empty snapshot.
func p0(p *counters.Snapshot) *counters.Snapshot {
	if p == nil {
		return &counters.Snapshot{}
	}
	return p
}

func writeStatTable(w io.Writer, dir string, now time.Time, snaps []*counters.Snapshot, bad map[string]error, rates map[int]processRates, v statView) {
	fmt.Fprintf(w, "walcast counters in %s at %s: %d process(es)\n", dir, now.UTC().Format("2006-01-02 15:04:05 UTC"), len(snaps))
	for p, err := range bad {
		fmt.Fprintf(w, "  unreadable %s: %v\n", p, err)
	}
	for _, s := range snaps {
		up := now.Sub(time.Unix(0, s.Start)).Round(time.Second)
		fmt.Fprintf(w, "\npid %d  %s  up %v  %s\n", s.PID, s.State, up, s.Command)
		if s.State == counters.Stale {
			fmt.Fprintf(w, "  the process is gone; its file stays until `cast stat -clean`\n")
		}
		for _, l := range s.SilentLoops {
			_, lab, _ := counters.ParseLabel(l)
			fmt.Fprintf(w, "  loop %s (stream %s, %s) has not ticked for over %v\n", lab["loop"], lab["stream"], lab["role"], counters.SilentAfter)
		}
		switch {
		case v.loss:
			writeLoss(w, s)
			continue
		case v.errors:
			writeErrors(w, s)
			continue
		}
		var rows []counters.Value
		width := 44
		for _, c := range sortedValues(s) {
			if v.all || c.Value != 0 {
				rows = append(rows, c)
				width = max(width, len(c.Name+extraLabels(c.Labels)))
			}
		}
		if v.watch {
			fmt.Fprintf(w, "  %-6s %-9s %-*s %16s %12s\n", "STREAM", "ROLE", width, "COUNTER", "VALUE", "/s")
		} else {
			fmt.Fprintf(w, "  %-6s %-9s %-*s %16s\n", "STREAM", "ROLE", width, "COUNTER", "VALUE")
		}
		for _, c := range rows {
			name := c.Name + extraLabels(c.Labels)
			val := showValue(c)
			if v.watch {
				r := ""
				if pr, ok := rates[s.PID]; ok && c.Kind.IsCounter() {
					r = fmt.Sprintf("%.0f", pr.value[c.Label])
					if c.Kind == counters.KindCounterNs {
						r = fmt.Sprintf("%.0f%%", pr.value[c.Label]/1e7)
					}
				}
				fmt.Fprintf(w, "  %-6s %-9s %-*s %16s %12s\n", c.Labels["stream"], c.Labels["role"], width, name, val, r)
			} else {
				fmt.Fprintf(w, "  %-6s %-9s %-*s %16s\n", c.Labels["stream"], c.Labels["role"], width, name, val)
			}
		}
	}
}

func sortedValues(s *counters.Snapshot) []counters.Value {
	vs := append([]counters.Value(nil), s.Values...)
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i].Labels, vs[j].Labels
		if a["stream"] != b["stream"] {
			return a["stream"] < b["stream"]
		}
		if a["role"] != b["role"] {
			return a["role"] > b["role"]
		}
		return false
	})
	return vs
}

// extraLabels shows the labels other than stream and role: [slot=0,loop=2].
func extraLabels(l map[string]string) string {
	var parts []string
	for k, v := range l {
		if k != "stream" && k != "role" {
			parts = append(parts, k+"="+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, ",") + "]"
}

// showValue prints a slot's value for a person: times of day for Unix
// ns, durations for ns.
func showValue(v counters.Value) string {
	switch {
	case strings.HasSuffix(v.Name, "_unix_ns"):
		return unixTime(int64(v.Value))
	case v.Kind == counters.KindCounterNs || v.Kind == counters.KindGaugeNs:
		return time.Duration(v.Value).String()
	}
	return metrics.Value(v.Value, v.Kind)
}

func unixTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000000")
}

func writeLoss(w io.Writer, s *counters.Snapshot) {
	fmt.Fprintf(w, "  loss episodes: %d ever, the last %d kept\n", s.LossTotal, len(s.Loss))
	fmt.Fprintf(w, "  %-6s %-9s %-10s %20s %8s %6s %-15s %-15s %12s\n", "STREAM", "ROLE", "REPAIR", "FIRST SEQ", "SEQS", "NAKS", "SEEN", "REPAIRED", "LATENCY")
	for _, e := range s.Loss {
		first := fmt.Sprint(e.First)
		if e.First == 0 { // not known: a file of an older writer, or a NAK from seq 0
			first = "-"
		}
		fmt.Fprintf(w, "  %-6d %-9s %-10s %20s %8d %6d %-15s %-15s %12v\n", e.Stream, e.Role, e.Repair, first, e.Count, e.Naks,
			unixTime(e.At), unixTime(e.Done), e.Latency())
	}
	fmt.Fprintf(w, "  aggregates (observations, seqs, total and max repair time, first and last seen):\n")
	for _, v := range sortedValues(s) {
		if strings.HasPrefix(v.Name, "loss_") && v.Value != 0 {
			val := showValue(v)
			fmt.Fprintf(w, "  %-6s %-9s %-44s %16s\n", v.Labels["stream"], v.Labels["role"], v.Name+extraLabels(v.Labels), val)
		}
	}
}

func writeErrors(w io.Writer, s *counters.Snapshot) {
	fmt.Fprintf(w, "  distinct errors: %d (%d more occurrences found no free entry)\n", len(s.Errors), s.ErrorsDropped)
	fmt.Fprintf(w, "  %8s %-15s %-15s %-6s %-9s %s\n", "COUNT", "FIRST", "LAST", "STREAM", "ROLE", "MESSAGE")
	for _, e := range s.Errors {
		fmt.Fprintf(w, "  %8d %-15s %-15s %-6d %-9s %s\n", e.Count, unixTime(e.First), unixTime(e.Last), e.Stream, e.Role, e.Message)
	}
}

// statJSON is what -json prints per refresh.
type statJSON struct {
	Time      int64         `json:"time_unix_ns"`
	Dir       string        `json:"dir"`
	Processes []processJSON `json:"processes"`
}

type processJSON struct {
	PID       int                `json:"pid"`
	State     counters.State     `json:"state"`
	Start     int64              `json:"start_unix_ns"`
	Heartbeat int64              `json:"heartbeat_unix_ns"`
	Command   string             `json:"command"`
	Path      string             `json:"path"`
	Counters  map[string]uint64  `json:"counters"`
	Rates     map[string]float64 `json:"rates_per_s,omitempty"`
	// RatesOver is the time the rates are over, seconds: between the two
	// copies of the writer's counters the refreshes found.
	RatesOver float64     `json:"rates_interval_s,omitempty"`
	Loss      []lossJSON  `json:"loss"`
	LossTotal uint64      `json:"loss_total"`
	Errors    []errorJSON `json:"errors"`
}

type lossJSON struct {
	Stream    uint32 `json:"stream"`
	Role      string `json:"role"`
	Repair    string `json:"repair"`
	First     uint64 `json:"first_seq"`
	Count     uint64 `json:"seqs"`
	Naks      uint64 `json:"naks"`
	At        int64  `json:"seen_unix_ns"`
	Done      int64  `json:"repaired_unix_ns"`
	LatencyNs int64  `json:"latency_ns"`
}

type errorJSON struct {
	Stream  uint32 `json:"stream"`
	Role    string `json:"role"`
	Message string `json:"message"`
	Count   uint64 `json:"count"`
	First   int64  `json:"first_unix_ns"`
	Last    int64  `json:"last_unix_ns"`
}

func writeStatJSON(w io.Writer, dir string, now time.Time, snaps []*counters.Snapshot, rates map[int]processRates) error {
	out := statJSON{Time: now.UnixNano(), Dir: dir, Processes: []processJSON{}}
	for _, s := range snaps {
		p := processJSON{PID: s.PID, State: s.State, Start: s.Start, Heartbeat: s.Heartbeat, Command: s.Command, Path: s.Path,
			Counters: map[string]uint64{}, Rates: rates[s.PID].value, RatesOver: rates[s.PID].over.Seconds(), LossTotal: s.LossTotal, Loss: []lossJSON{}, Errors: []errorJSON{}}
		for _, v := range s.Values {
			p.Counters[v.Label] = v.Value
		}
		for _, e := range s.Loss {
			p.Loss = append(p.Loss, lossJSON{e.Stream, e.Role.String(), e.Repair.String(), e.First, e.Count, e.Naks, e.At, e.Done, int64(e.Latency())})
		}
		for _, e := range s.Errors {
			p.Errors = append(p.Errors, errorJSON{e.Stream, e.Role.String(), e.Message, e.Count, e.First, e.Last})
		}
		out.Processes = append(out.Processes, p)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func cleanStale(dir string) error {
	snaps, _, err := counters.List(dir)
	if err != nil {
		return failf("%v", err)
	}
	n := 0
	for _, s := range snaps {
		if s.State != counters.Stale {
			continue
		}
		if err := os.Remove(s.Path); err != nil {
			return failf("%v", err) // *PathError: "remove PATH: why"
		}
		fmt.Fprintf(statOut, "removed %s (pid %d, gone)\n", s.Path, s.PID)
		n++
	}
	fmt.Fprintf(statOut, "%d stale file(s) removed\n", n)
	return nil
}

func serveMetrics(dir, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failf("-serve: %v", err)
	}
	fmt.Fprintf(statOut, "serving the counters of %s at http://%s/metrics\n", dir, ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(dir, 0))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() { <-sig; srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return failf("-serve: %v", err)
	}
	return nil
}
