package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wire"
)

// rttRunner is one row of `cast bench rtt`.
type rttRunner = func(benchkit.RTTConfig) (benchkit.Row, error)

// rttRunners are the rows of `cast bench rtt` after the floor, in the
// order the cost adds up: the datapath alone (raw-udp over datapath/udp),
// then the protocol on top (casting over udp, then over mmsg: the rows
// -counters applies to).
var rttRunners, rttCasting = []rttRunner{benchkit.RTTRawUDP}, []rttRunner{benchkit.RTTCasting, benchkit.RTTCastingMmsg}

// withoutCounters runs an RTT row with its loops' counters off.
func withoutCounters(fn rttRunner) rttRunner {
	return func(c benchkit.RTTConfig) (benchkit.Row, error) {
		c.NoCounters = true
		return fn(c)
	}
}

// countersFlag is -counters of `cast bench rtt` and `cast bench
// throughput`: the casting rows with their counters on (as a program
// runs them by default), off, or both, each row followed by its
// +nocounters twin in every run (the overhead of the counters,
// interleaved).
func countersFlag(fs *flag.FlagSet) *string {
	return fs.String("counters", "on", "the casting rows' counters: on, off (rows +nocounters) or both (each row then its +nocounters twin, interleaved: the counters' overhead)")
}

// withCounters applies -counters to rows: off gives each row's
// +nocounters variant, both each row and then its variant (off reports
// false for a row that runs no loop: it stays as it is).
func withCounters[R any](mode string, rows []R, off func(R) (R, bool)) ([]R, error) {
	switch mode {
	case "on":
		return rows, nil
	case "off", "both":
		var out []R
		for _, r := range rows {
			v, ok := off(r)
			if !ok || mode == "both" {
				out = append(out, r)
			}
			if ok {
				out = append(out, v)
			}
		}
		return out, nil
	}
	return nil, usagef("-counters %q: want on, off or both", mode)
}

// benchKeys authenticate the +auth rows: a fixed key (the rows measure
// the cost, not the secrecy).
var benchKeys = &cast.Keys{Send: wire.Key{ID: 1, Secret: [16]byte{0x77, 0x61, 0x6c, 0x63, 0x61, 0x73, 0x74}}}

// withKeys runs an RTT row with every datagram authenticated.
func withKeys(fn func(benchkit.RTTConfig) (benchkit.Row, error)) func(benchkit.RTTConfig) (benchkit.Row, error) {
	return func(c benchkit.RTTConfig) (benchkit.Row, error) {
		c.Keys = benchKeys
		return fn(c)
	}
}

func init() {
	registerBench("rtt", "ping-pong RTT: casting over udp and mmsg vs the minimal raw loop, spin and park modes", benchRTT)
	registerBench("throughput", "one-way records/s: casting over mmsg (WAL off/on) vs raw GSO/GRO, the WAL alone and raw O_DIRECT", benchThroughput)
}

func parsePins(s string) ([2]int, error) {
	if s == "" || s == "none" {
		return [2]int{-1, -1}, nil
	}
	a, b, ok := strings.Cut(s, ",")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return [2]int{}, usagef("-pin %q: want CPU,CPU (or none)", s)
	}
	return [2]int{x, y}, nil
}

func parseModes(s string) ([]affinity.Strategy, error) {
	if s == "both" {
		return []affinity.Strategy{affinity.Spin, affinity.Park}, nil
	}
	m, err := affinity.ParseStrategy(s)
	if err != nil {
		return nil, usagef("-mode: %v", err)
	}
	return []affinity.Strategy{m}, nil
}

func benchRTT(args []string) error {
	fs := newFlagSet("bench rtt", "[flags]", "Ping-pong round trips on loopback. The floor is a minimal raw loop (two pinned\nthreads, sendto/recvfrom through unix.Syscall6, busy loop on EAGAIN; blocking\nrecvfrom in park mode) that shares no code with the datapaths. Then raw-udp\n(the same ping-pong over datapath/udp: the datapath's cost), casting-udp and\ncasting-mmsg (the protocol's cost; loop batch -batch). Rows run interleaved\n-runs times; ratios are against the floor of the same mode and run, and the\nclosing table gives each row's median over the runs with the min–max.\nRun it under the bench lock: flock /tmp/walcast-bench.lock cast bench rtt")
	c := benchkit.DefaultRTTConfig()
	fs.IntVar(&c.N, "n", c.N, "measured round trips per row")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "round trips before measuring")
	fs.IntVar(&c.Size, "size", c.Size, "bytes per ping")
	fs.IntVar(&c.Batch, "batch", c.Batch, "datagrams per receive and flush in the casting loops")
	runs := fs.Int("runs", 3, "interleaved runs of every row")
	mode := fs.String("mode", "both", "idle mode: spin, park (netpoller) or both")
	pin := fs.String("pin", "0,1", "CPUs of the client and echo threads, or none")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of a table")
	auth := fs.Bool("auth", false, "also run casting-udp and casting-mmsg with every datagram authenticated (rows +auth; docs/auth.md)")
	ctrs := countersFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	casting := rttCasting
	if *auth {
		casting = append(casting[:len(casting):len(casting)], withKeys(benchkit.RTTCasting), withKeys(benchkit.RTTCastingMmsg))
	}
	casting, err := withCounters(*ctrs, casting, func(r rttRunner) (rttRunner, bool) { return withoutCounters(r), true })
	if err != nil {
		return err
	}
	runners := append(rttRunners[:len(rttRunners):len(rttRunners)], casting...)
	if err := checkRange("n", c.N, 1, 1<<30); err != nil {
		return err
	}
	if err := checkRange("warmup", c.Warmup, 0, 1<<30); err != nil {
		return err
	}
	if err := checkRange("size", c.Size, 16, 65507); err != nil {
		return err
	}
	if err := checkRange("batch", c.Batch, 1, 1024); err != nil {
		return err
	}
	if err := checkRange("runs", *runs, 1, 100); err != nil {
		return err
	}
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	modes, err := parseModes(*mode)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	title := fmt.Sprintf("rtt: %d round trips of %d B, batch %d, pins %s, %d runs, %s, load %s", c.N, c.Size, c.Batch, *pin, *runs, time.Now().UTC().Format(time.RFC3339), benchkit.LoadAvg())
	rs := newRowStream("bench rtt", title, *runs*len(modes)*(1+len(runners))+1, true, *jsonOut)
	var floorPark1 benchkit.Row
	rows, err := rs.run(ctx, func() error {
		for run := 1; run <= *runs; run++ {
			for _, m := range modes {
				c.Mode = m
				rs.next(fmt.Sprintf("run %d, %v, floor-loop", run, m))
				floor, err := benchkit.RTTFloor(c)
				if err != nil {
					return fmt.Errorf("floor-loop %v: %w", m, err)
				}
				floor.Run = run
				if run == 1 && m == affinity.Park {
					floorPark1 = floor
				}
				rs.add(floor)
				for i, fn := range runners {
					rs.next(fmt.Sprintf("run %d, %v, runner %d of %d", run, m, i+1, len(runners)))
					r, err := fn(c)
					if err != nil {
						return err
					}
					r.Run = run
					r.CompareTo(floor)
					rs.add(r)
				}
			}
		}
		c.Mode = affinity.Park
		rs.next("go-net reference")
		ref, err := benchkit.RTTGoNet(c)
		if err != nil {
			return err
		}
		if floorPark1.Name != "" {
			ref.CompareTo(floorPark1)
		}
		rs.add(ref)
		return nil
	})
	if !*jsonOut && len(rows) > 0 {
		printSpread(os.Stdout, rows)
		fmt.Fprintf(os.Stdout, "load at the end %s\n", benchkit.LoadAvg())
	}
	return err
}

// printSpread prints, per row name and mode, the median and the range
// over the runs of the figures and of the same-run ratios (the issue
// targets are medians of interleaved runs).
func printSpread(w io.Writer, rows []benchkit.Row) {
	type key struct{ name, mode string }
	var order []key
	groups := map[key][]benchkit.Row{}
	for _, r := range rows {
		k := key{r.Name, r.Mode}
		if r.Bytes > 0 {
			k.mode = strconv.Itoa(r.Bytes)
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	lat := len(rows) > 0 && rows[0].Latency.N > 0
	fmt.Fprintln(w, "\nover the runs, median (min–max):")
	if lat {
		fmt.Fprintf(w, "%-16s %-14s %4s %19s %19s %19s %19s\n", "name", "mode", "runs", "p50 µs", "p99 µs", "×p50", "×p99")
		for _, k := range order {
			rs := groups[k]
			fmt.Fprintf(w, "%-16s %-14s %4d %19s %19s %19s %19s\n", k.name, k.mode, len(rs),
				spanMedian(rs, func(r benchkit.Row) float64 { return us(r.Latency.P50) }, "%.1f"),
				spanMedian(rs, func(r benchkit.Row) float64 { return us(r.Latency.P99) }, "%.1f"),
				spanMedian(rs, func(r benchkit.Row) float64 { return r.RatioP50 }, "%.2f"),
				spanMedian(rs, func(r benchkit.Row) float64 { return r.RatioP99 }, "%.2f"))
		}
		return
	}
	fmt.Fprintf(w, "%-26s %5s %4s %31s %19s\n", "name", "bytes", "runs", "records/s", "×floor")
	for _, k := range order {
		rs := groups[k]
		fmt.Fprintf(w, "%-26s %5s %4d %31s %19s\n", k.name, k.mode, len(rs),
			spanMedian(rs, func(r benchkit.Row) float64 { return r.RecPerS }, "%.0f"),
			spanMedian(rs, func(r benchkit.Row) float64 { return r.RatioTput }, "%.2f"))
	}
}

// spanMedian formats f over the runs as "median (min–max)", the median
// alone for one run or one value, and "-" when there is no figure (NaN,
// or 0 in every run). NaN runs are left out.
func spanMedian(rs []benchkit.Row, f func(benchkit.Row) float64, format string) string {
	var xs []float64
	for _, r := range rs {
		if x := f(r); x == x {
			xs = append(xs, x)
		}
	}
	sort.Float64s(xs)
	if len(xs) == 0 || xs[0] == 0 && xs[len(xs)-1] == 0 {
		return "-"
	}
	m := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		m = (xs[len(xs)/2-1] + m) / 2
	}
	lo, hi := xs[0], xs[len(xs)-1]
	if lo == hi {
		return fmt.Sprintf(format, m)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", m, lo, hi)
}

// printHeader prints the column names of a latency or throughput table.
func printHeader(w io.Writer, lat bool) {
	if lat {
		fmt.Fprintf(w, "%3s %-14s %-6s %-14s %9s %9s %9s %9s %9s %7s %7s  %s\n", "run", "name", "path", "mode", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "stddev", "×p50", "×p99", "note")
		return
	}
	fmt.Fprintf(w, "%3s %-26s %-6s %12s %8s %8s  %s\n", "run", "name", "path", "records/s", "Gbit/s", "×floor", "note")
}

// printRow prints one row of a table printHeader began.
func printRow(w io.Writer, r benchkit.Row, lat bool) {
	if lat {
		l := r.Latency
		fmt.Fprintf(w, "%3d %-14s %-6s %-14s %9.1f %9.1f %9.1f %9.1f %9.1f %7s %7s  %s\n", r.Run, r.Name, r.Path, r.Mode,
			us(l.P50), us(l.P99), us(l.P999), us(l.Max), l.StdDev/1e3, ratio(r.RatioP50), ratio(r.RatioP99), r.Note)
		return
	}
	fmt.Fprintf(w, "%3d %-26s %-6s %12.0f %8.2f %8s  %s\n", r.Run, r.Name, r.Path, r.RecPerS, r.Gbps, ratio(r.RatioTput), r.Note)
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

func ratio(x float64) string {
	if x == 0 || x != x {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}
