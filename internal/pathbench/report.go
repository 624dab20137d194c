package pathbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
)

func (c Config) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format, a...)
	}
}

// progress is the one-line status of a finished row.
func (r Row) progress() string {
	head := fmt.Sprintf("%-10s run %d %-18s", r.Workload, r.Run, r.Spec)
	switch {
	case r.Refused != "":
		return head + " refused: " + r.Refused
	case r.Failed != "":
		return head + " failed: " + r.Failed
	case r.Workload == "throughput":
		return fmt.Sprintf("%s %4d B %9.0f rec/s", head, r.Size, r.RecPerS)
	}
	return fmt.Sprintf("%s p50 %7.1f µs p99 %8.1f µs p99.9 %9.1f µs", head, us(r.Latency.P50), us(r.Latency.P99), us(r.Latency.P999))
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// finish computes the summary rows, the checks and the end load.
func (r *Report) finish(c Config) {
	r.LoadEnd = benchkit.LoadAvg()
	if !r.began.IsZero() {
		r.Seconds = time.Since(r.began).Seconds()
	}
	type key struct {
		w, spec string
		size    int
	}
	var order []key
	groups := map[key][]Row{}
	for _, x := range r.Rows {
		k := key{x.Workload, x.Spec, x.Size}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], x)
	}
	r.Summary = nil
	for _, k := range order {
		r.Summary = append(r.Summary, summarize(groups[k]))
	}
	// Ratios against udp of the same workload and size.
	for i := range r.Summary {
		s := &r.Summary[i]
		if u, ok := r.find(r.Summary, s.Workload, "udp", s.Size); ok && s.Measured() {
			s.CompareTo(u.Row)
		}
	}
	for _, x := range r.Summary {
		if x.Refused != "" {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s: refused by the kernel: %s", x.Workload, x.Spec, x.Refused))
		} else if x.Failed != "" {
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s: failed: %s", x.Workload, x.Spec, x.Failed))
		}
		if strings.Contains(x.Note, "inert") && x.Workload == "rtt" {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: busy polling is set but inert (the device has no NAPI context for it)", x.Spec))
		}
	}
	r.Checks = checks(c, r.Rows)
}

func (r *Report) find(rows []Row, w, spec string, size int) (Row, bool) {
	for _, x := range rows {
		if x.Workload == w && x.Spec == spec && x.Size == size && x.Measured() {
			return x, true
		}
	}
	return Row{}, false
}

// summarize picks the median run (by p50 latency, or by rec/s for
// throughput) and notes the range over the runs.
func summarize(rs []Row) Row {
	var ok []Row
	for _, x := range rs {
		if x.Measured() {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		s := rs[0]
		s.Run = 0
		return s
	}
	tput := ok[0].Workload == "throughput"
	sort.Slice(ok, func(i, j int) bool {
		if tput {
			return ok[i].RecPerS < ok[j].RecPerS
		}
		return ok[i].Latency.P50 < ok[j].Latency.P50
	})
	m := ok[len(ok)/2]
	m.Run = 0
	rng := func(f func(Row) float64, format string) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range ok {
			lo, hi = math.Min(lo, f(x)), math.Max(hi, f(x))
		}
		return fmt.Sprintf(format, lo, hi)
	}
	n := fmt.Sprintf("%d of %d runs", len(ok), len(rs))
	switch m.Workload {
	case "throughput":
		m.Spread = rng(func(x Row) float64 { return x.RecPerS / 1e3 }, "%.0f–%.0f k rec/s") + ", " + n
	case "loss":
		m.Spread = rng(func(x Row) float64 { return float64(x.Latency.P99) / 1e6 }, "p99 %.2f–%.2f ms") + ", " +
			rng(func(x Row) float64 { return 100 * x.LossAB }, "loss A→B %.2f–%.2f %%") + ", " + n
	default:
		m.Spread = rng(func(x Row) float64 { return us(x.Latency.P50) }, "p50 %.1f–%.1f") + ", " +
			rng(func(x Row) float64 { return us(x.Latency.P99) }, "p99 %.1f–%.1f") + ", " +
			rng(func(x Row) float64 { return us(x.Latency.P999) }, "p99.9 %.0f–%.0f µs") + ", " + n
	}
	return m
}

// checks compares, in every run, each xdp rtt row with udp's (the issue's
// acceptance: p99 at or under udp's with p50 below), and each loss row's
// injected loss with the configured one (within 4 standard deviations of
// a binomial draw).
func checks(c Config, rows []Row) []Check {
	var out []Check
	byRun := map[int][]Row{}
	for _, x := range rows {
		byRun[x.Run] = append(byRun[x.Run], x)
	}
	for run := 1; run <= c.Runs; run++ {
		rs := byRun[run]
		var u *Row
		for i := range rs {
			if rs[i].Workload == "rtt" && rs[i].Spec == "udp" && rs[i].Measured() {
				u = &rs[i]
			}
		}
		for _, x := range rs {
			if x.Workload != "rtt" || x.Path != "xdp" || !x.Measured() || u == nil {
				continue
			}
			ok := x.Latency.P99 <= u.Latency.P99 && x.Latency.P50 < u.Latency.P50
			out = append(out, Check{
				Text: fmt.Sprintf("run %d: %s p99 ≤ udp p99 and p50 < udp p50 (same veth, same run)", run, x.Spec),
				Met:  ok,
				Detail: fmt.Sprintf("p50 %.1f vs %.1f µs, p99 %.1f vs %.1f µs", us(x.Latency.P50), us(u.Latency.P50),
					us(x.Latency.P99), us(u.Latency.P99)),
			})
		}
		for _, x := range rs {
			if x.Workload != "loss" || !x.Measured() {
				continue
			}
			ok := within(x.LossAB, c.Loss, x.MatchedAB) && within(x.LossBA, c.Loss, x.MatchedBA)
			out = append(out, Check{
				Text:   fmt.Sprintf("run %d: %s got the configured %.3g %% loss in both directions", run, x.Spec, 100*c.Loss),
				Met:    ok,
				Detail: fmt.Sprintf("A→B %.3f %% of %d, B→A %.3f %% of %d datagrams", 100*x.LossAB, x.MatchedAB, 100*x.LossBA, x.MatchedBA),
			})
		}
	}
	return out
}

// within: measured fraction f of n draws is within 4σ of p (or n is too
// small to say: fewer than 100 draws).
func within(f, p float64, n uint64) bool {
	if n < 100 {
		return true
	}
	sd := math.Sqrt(p * (1 - p) / float64(n))
	return math.Abs(f-p) <= 4*sd+1e-12
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Text writes the summary tables, checks and notes; md selects Markdown
// tables (for README and docs).
func (r *Report) Text(w io.Writer, md bool) {
	fmt.Fprintf(w, "cast bench paths — %s, %s, load %s → %s, %.0f s\n", r.Date, r.Machine, r.LoadStart, r.LoadEnd, r.Seconds)
	if r.Command != "" {
		fmt.Fprintf(w, "command: %s\n", r.Command)
	}
	fmt.Fprintln(w)
	sections := []struct{ w, title string }{
		{"rtt", "rtt — casting ping-pong over a veth pair (median run by p50; spread = min–max over runs; per round trip: client A, echo B)"},
		{"throughput", "throughput — one-way records/s in order, window-limited, veth pair (median run by rate; per record: sender A, receiver B)"},
		{"loss", "loss — paced stream over a LAN with the tc injector on both switch ports (delivery latency; per record)"},
	}
	for _, s := range sections {
		var rs []Row
		for _, x := range r.Summary {
			if x.Workload == s.w {
				rs = append(rs, x)
			}
		}
		if len(rs) == 0 {
			continue
		}
		if md {
			fmt.Fprintf(w, "#### %s\n\n", s.title)
		} else {
			fmt.Fprintf(w, "== %s\n", s.title)
		}
		head, rows := tableOf(s.w, rs)
		benchkit.Table(w, md, head, rows)
	}
	if len(r.Checks) > 0 {
		fmt.Fprintln(w, "checks:")
		for _, c := range r.Checks {
			st := "met"
			if !c.Met {
				st = "MISSED"
			}
			fmt.Fprintf(w, "  %-6s %s — %s\n", st, c.Text, c.Detail)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w, "notes:")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	head, rows, why := r.hardware()
	if len(rows) > 0 {
		if md {
			fmt.Fprintf(w, "#### hardware counters (PMU) per operation, A / B\n\n")
		} else {
			fmt.Fprintln(w, "== hardware counters (PMU) per operation, A / B")
		}
		benchkit.Table(w, md, head, rows)
	}
	fmt.Fprintln(w, "counters: software events (perf task-clock and context-switches) for cpu ns and ctxsw,")
	fmt.Fprintln(w, "  system calls counted by a BPF program on raw_syscalls:sys_enter, preemptions and run-queue wait from /proc;")
	if len(rows) > 0 {
		fmt.Fprintln(w, "  hardware events (PMU) in their own table above.")
	} else {
		fmt.Fprintf(w, "  hardware events (PMU): n/a on this host (%s).\n", why)
	}
}

// hardware is the table of the hardware perf events that counted in any
// summary row (per operation, thread A / thread B), or, when none did,
// why not (the first reason the kernel gave).
func (r *Report) hardware() (head []string, rows [][]string, why string) {
	var names []string
	seen := map[string]bool{}
	for _, x := range r.Summary {
		for _, c := range append(append([]benchkit.PerfCount(nil), x.A.Perf...), x.B.Perf...) {
			switch {
			case !HardwareEvents[c.Name]:
			case c.OK && !seen[c.Name]:
				seen[c.Name] = true
				names = append(names, c.Name)
			case !c.OK && why == "":
				why = c.Name + ": " + c.Why
			}
		}
	}
	if why == "" {
		why = "no perf counters were read"
	}
	if len(names) == 0 {
		return nil, nil, why
	}
	head = append([]string{"workload", "path", "bytes"}, names...)
	get := func(t Thread, name string) string {
		for _, c := range t.Perf {
			if c.Name == name && c.OK {
				return fmt.Sprintf("%.0f", c.PerOp)
			}
		}
		return "n/a"
	}
	for _, x := range r.Summary {
		if !x.Measured() {
			continue
		}
		row := []string{x.Workload, x.Spec, fmt.Sprint(x.Size)}
		for _, n := range names {
			row = append(row, get(x.A, n)+" / "+get(x.B, n))
		}
		rows = append(rows, row)
	}
	return head, rows, why
}

func tableOf(w string, rs []Row) ([]string, [][]string) {
	f1 := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f", v)
	}
	f0 := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.0f", v)
	}
	sum := func(a, b float64) float64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a + b
	}
	status := func(x Row) (string, bool) {
		switch {
		case x.Refused != "":
			return "refused: " + x.Refused, false
		case x.Failed != "":
			return "failed: " + x.Failed, false
		}
		return "", true
	}
	var rows [][]string
	switch w {
	case "throughput":
		head := []string{"path", "bytes", "rec/s", "Gbit/s", "×udp", "spread", "syscalls/rec A B", "cpu ns/rec A B", "retx", "note"}
		for _, x := range rs {
			if s, ok := status(x); !ok {
				rows = append(rows, []string{x.Spec, fmt.Sprint(x.Size), "-", "-", "-", "-", "-", "-", "-", s})
				continue
			}
			rows = append(rows, []string{x.Spec, fmt.Sprint(x.Size), fmt.Sprintf("%.0f", x.RecPerS), fmt.Sprintf("%.3f", x.Gbps), ratio(x.RatioTput), x.Spread,
				f1(x.A.Syscalls) + " " + f1(x.B.Syscalls), f0(x.A.CPUNs) + " " + f0(x.B.CPUNs), fmt.Sprint(x.Retx), x.Note})
		}
		return head, rows
	case "loss":
		head := []string{"path", "loss A→B %", "loss B→A %", "delivered %", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "spread", "retx", "NAKs", "syscalls/rec A B", "note"}
		for _, x := range rs {
			if s, ok := status(x); !ok {
				rows = append(rows, []string{x.Spec, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", s})
				continue
			}
			ms := func(ns int64) string { return fmt.Sprintf("%.2f", float64(ns)/1e6) }
			rows = append(rows, []string{x.Spec, fmt.Sprintf("%.2f", 100*x.LossAB), fmt.Sprintf("%.2f", 100*x.LossBA), fmt.Sprintf("%.2f", x.DeliveredPct),
				ms(x.Latency.P50), ms(x.Latency.P99), ms(x.Latency.P999), ms(x.Latency.Max), x.Spread, fmt.Sprint(x.Retx), fmt.Sprint(x.Naks),
				f1(x.A.Syscalls) + " " + f1(x.B.Syscalls), x.Note})
		}
		return head, rows
	}
	head := []string{"path", "p50 µs", "p99 µs", "p99.9 µs", "×udp p50", "×udp p99", "spread", "cpu ns/rt A", "sys % A", "syscalls/rt A+B", "ctxsw/rt A+B", "preempt/rt A+B", "runq ns/rt A+B", "note"}
	for _, x := range rs {
		if s, ok := status(x); !ok {
			rows = append(rows, []string{x.Spec, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", s})
			continue
		}
		l := x.Latency
		rows = append(rows, []string{x.Spec, fmt.Sprintf("%.1f", us(l.P50)), fmt.Sprintf("%.1f", us(l.P99)), fmt.Sprintf("%.1f", us(l.P999)),
			ratio(x.RatioP50), ratio(x.RatioP99), x.Spread, f0(x.A.CPUNs), f0(x.A.SysPct), f1(sum(x.A.Syscalls, x.B.Syscalls)),
			fmt.Sprintf("%.3f", sum(x.A.CtxSw, x.B.CtxSw)), fmt.Sprintf("%.3f", sum(x.A.Involuntary, x.B.Involuntary)),
			f0(sum(x.A.RunqNs, x.B.RunqNs)), x.Note})
	}
	return head, rows
}

func ratio(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}
