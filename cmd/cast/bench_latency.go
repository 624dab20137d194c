package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/internal/benchkit"
)

func init() {
	registerBench("latency", "one-way send→deliver of pinned in-loop sides: paced at 0 % and -loss %, lost tails, single gaps' repair cost vs the RTT floor", benchLatency)
}

func benchLatency(args []string) error {
	fs := newFlagSet("bench latency", "[flags]", `One-way send→deliver latency on loopback (the latency goals' set-up): the
sender and the receiver are each one casting loop on one pinned spinning
thread (-pin), the producer runs inside the sender's loop (OnPoll) and the
consumer inside the receiver's (OnRecord): no other threads, no rings. Both
stamp with this process's monotonic clock. Every run measures, in order:
  floor-loop         raw ping-pong RTT (cast bench rtt's floor, spin)
  loss 0%            -n records paced at -rate after -warmup, no loss
  loss P%            the same with -loss percent random receive loss
                     (datapath/drop at the receiver: data, retransmits and
                     heartbeats alike; seeded by -seed)
  lost-tail          -bursts bursts of -burst records, each sent once the
                     previous is delivered and -pause has passed; the
                     receiver loses the first transmission of every
                     burst's last record; its send→deliver is timed
  burst-lossless     the same bursts, nothing lost, timing each burst's
                     middle record (seq % -burst == -burst/2): a burst
                     goes out in one flush and that record waits for the
                     datagrams before it, loss or not
  single-gap         the same, losing the first transmission of that
                     middle record; the note gives its repair cost
×p50/×p99 of both burst rows: their p50/p99 over the floor RTT p50/p99 of the
run (raw, the burst's own transmission included). A single gap's repair cost
is what the loss adds: single-gap p50 − burst-lossless p50 and p99 − p99 of
the same run, over that run's floor p50 and p99 (row "gap repair" of the
spread). p99 − p99 is the difference of two rows' p99s, not the p99 of each
record's own difference (the rows time different sends).
Rows run interleaved -runs times; then the spread and the issue's targets per
run (lossless p99 < 100 µs; lossy p99 < 1 ms, ≤ lossless p99 + 1 ms, p99.9 ≤
lossless p99.9 + 5 ms; lost tail p99 ≤ 1 ms; a single gap's repair cost at
p50 and p99 ≤ 3× the floor RTT, judged on the repair cost, the raw ratio
shown alongside).
Exit 0 when every row was measured (1 when one failed); with -check, also 1
when a target was missed in some run.

With -nostatus it measures only the start towards a receiver that sends no
Status (the reference receiver's bytes): per run, cast send -rate -start-rate
and cast recv -nostatus as separate processes on loopback, through a relay in
this process that stamps each seq's first arrival; the figure is the largest
gap between consecutive seqs before the end of the first window (seq 2049) and
where it was, with the median and spread over -runs and the target (≤ 10 ms).
Run it under the bench lock: flock /tmp/walcast-bench.lock cast bench latency`)
	c := benchkit.DefaultOneWayConfig()
	fs.IntVar(&c.N, "n", c.N, "measured records per paced row")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "paced records sent before measuring")
	fs.IntVar(&c.Rate, "rate", c.Rate, "paced rows: records per second")
	fs.IntVar(&c.Size, "size", c.Size, "record payload bytes (its 8-byte seq included)")
	fs.StringVar(&c.Path, "path", c.Path, "datapath: mmsg (recvmmsg/sendmmsg, no GSO/GRO) or udp (one syscall per datagram)")
	fs.IntVar(&c.Batch, "batch", c.Batch, "datagrams per receive and flush of both loops")
	fs.IntVar(&c.Burst, "burst", c.Burst, "records per burst of the lost-tail, burst-lossless and single-gap rows")
	fs.IntVar(&c.Bursts, "bursts", c.Bursts, "bursts (measured records) of the lost-tail, burst-lossless and single-gap rows")
	fs.DurationVar(&c.Pause, "pause", c.Pause, "wait after a burst is delivered before the next")
	fs.DurationVar(&c.Stall, "stall", c.Stall, "a row fails after this long without a delivery")
	seed := fs.Uint64("seed", 1, "seed of the random loss")
	loss := fs.Float64("loss", 1, "percent random receive loss of the lossy paced row")
	floorN := fs.Int("floor-n", 20000, "round trips of the floor-loop row")
	runs := fs.Int("runs", 3, "interleaved runs of every row")
	pin := fs.String("pin", "0,1", "CPUs of the sender's and the receiver's loop, or none")
	check := fs.Bool("check", false, "exit 1 when a target is missed in some run")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of a table")
	noStatus := fs.Bool("nostatus", false, "measure only the start against a receiver that sends no Status (see above)")
	startRate := fs.Int("start-rate", 20000, "-nostatus: records per second of cast send")
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	for _, r := range []struct {
		name      string
		v, lo, hi int
	}{{"n", c.N, 1, 1 << 30}, {"warmup", c.Warmup, 0, 1 << 30}, {"rate", c.Rate, 1, 10_000_000}, {"size", c.Size, 16, 1400},
		{"batch", c.Batch, 1, 1024}, {"burst", c.Burst, 2, 1024}, {"bursts", c.Bursts, 1, 1 << 24}, {"floor-n", *floorN, 1, 1 << 30},
		{"runs", *runs, 1, 100}} {
		if err := checkRange(r.name, r.v, r.lo, r.hi); err != nil {
			return err
		}
	}
	if err := checkRange("loss", *loss, 0, 99); err != nil {
		return err
	}
	if err := checkRange("pause", c.Pause, 0, time.Minute); err != nil {
		return err
	}
	if err := checkRange("stall", c.Stall, time.Millisecond, time.Hour); err != nil {
		return err
	}
	if c.Path != "udp" && c.Path != "mmsg" {
		return usagef("-path %q: want udp or mmsg", c.Path)
	}
	if *noStatus {
		if err := checkRange("start-rate", *startRate, 100, 1_000_000); err != nil {
			return err
		}
		return benchStartNoStatus(os.Stdout, *runs, *startRate, *check)
	}
	var err error
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	c.Seed = *seed
	fc := benchkit.DefaultRTTConfig()
	fc.N, fc.Warmup, fc.Mode, fc.CPUs = *floorN, *floorN/10, affinity.Spin, c.CPUs

	ctx, cancel := signalContext()
	defer cancel()
	title := fmt.Sprintf("latency: one-way, %d B records over %s, paced %d rec/s × %d (+%d warm-up) at 0 %% and %g %% loss, %d bursts of %d, pins %s, %d runs, %s, load %s",
		c.Size, c.Path, c.Rate, c.N, c.Warmup, *loss, c.Bursts, c.Burst, *pin, *runs, time.Now().UTC().Format(time.RFC3339), benchkit.LoadAvg())
	rs := newRowStream("bench latency", title, *runs*6, true, *jsonOut)
	failed := 0
	rows, err := rs.run(ctx, func() error {
		for run := 1; run <= *runs; run++ {
			rs.next(fmt.Sprintf("run %d, floor-loop", run))
			floor, err := benchkit.RTTFloor(fc)
			if err != nil {
				return fmt.Errorf("floor-loop: %w", err)
			}
			floor.Run = run
			rs.add(floor)
			steps := []struct {
				what string
				fn   func() (benchkit.Row, error)
			}{
				{"loss 0%", func() (benchkit.Row, error) { return benchkit.OneWayPaced(c, 0) }},
				{fmt.Sprintf("loss %g%%", *loss), func() (benchkit.Row, error) { return benchkit.OneWayPaced(c, *loss) }},
				{"lost-tail", func() (benchkit.Row, error) { return benchkit.OneWayBursts(c, benchkit.LossTail) }},
				// burst-lossless right before single-gap: its baseline,
				// measured as close to it as the run allows.
				{"burst-lossless", func() (benchkit.Row, error) { return benchkit.OneWayBursts(c, benchkit.LossNone) }},
				{"single-gap", func() (benchkit.Row, error) { return benchkit.OneWayBursts(c, benchkit.LossGap) }},
			}
			var burst benchkit.Row
			for _, st := range steps {
				rs.next(fmt.Sprintf("run %d, %s", run, st.what))
				r, err := st.fn()
				if err != nil {
					// Kept as a row saying why (the others still run);
					// the command exits 1 at the end.
					failed++
					r = benchkit.Row{Workload: "oneway", Name: "casting-" + c.Path, Path: c.Path, Mode: st.what, Note: "FAILED: " + err.Error()}
				}
				r.Run = run
				if st.what == "burst-lossless" || st.what == "single-gap" {
					r.CompareTo(floor)
				}
				if st.what == "burst-lossless" {
					burst = r
				}
				if g, ok := gapRepair(r, burst, floor); ok && st.what == "single-gap" {
					r.Note = fmt.Sprintf("repair (− burst-lossless): p50 %+.1f µs = ×%.2f floor, p99 %+.1f µs = ×%.2f; %s",
						us(g.d50), g.x50, us(g.d99), g.x99, r.Note)
				}
				rs.add(r)
			}
		}
		return nil
	})
	missed := 0
	if !*jsonOut && len(rows) > 0 {
		var ok []benchkit.Row
		for _, r := range rows {
			if r.Latency.N > 0 {
				ok = append(ok, r)
			}
		}
		order, byRun := runsOf(rows)
		for _, run := range order {
			rr := byRun[run]
			if rr.gap == nil || rr.burst == nil || rr.floor == nil {
				continue
			}
			if g, measured := gapRepair(*rr.gap, *rr.burst, *rr.floor); measured {
				ok = append(ok, benchkit.Row{Name: rr.gap.Name, Mode: "gap repair", Run: run,
					Latency: benchkit.Summary{N: 1, P50: g.d50, P99: g.d99}, RatioP50: g.x50, RatioP99: g.x99})
			}
		}
		if len(ok) > 0 {
			printSpread(os.Stdout, ok)
		}
		missed = printLatencyTargets(os.Stdout, order, byRun)
		fmt.Fprintf(os.Stdout, "load at the end %s\n", benchkit.LoadAvg())
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return failf("%d of %d rows failed (FAILED in their note)", failed, len(rows))
	}
	if *check && missed > 0 {
		return failf("%d target(s) missed (see the targets above)", missed)
	}
	return nil
}

// rowTarget is the word in the names of the targets a row's figures
// enter (a failed row misses them): by row mode, else the lossy row.
func rowTarget(mode string) string {
	switch mode {
	case "loss 0%":
		return "lossless"
	case "lost-tail":
		return "lost tail"
	case "single-gap", "burst-lossless":
		return "single gap"
	case "spin":
		return "floor"
	}
	return "lossy"
}

// latencyRun is one run's rows of cast bench latency, by role.
type latencyRun struct{ floor, clean, lossy, tail, burst, gap *benchkit.Row }

// runsOf sorts rows into their runs, in the order the runs appear.
func runsOf(rows []benchkit.Row) ([]int, map[int]*latencyRun) {
	byRun := map[int]*latencyRun{}
	var order []int
	for i := range rows {
		r := &rows[i]
		rr := byRun[r.Run]
		if rr == nil {
			rr = &latencyRun{}
			byRun[r.Run] = rr
			order = append(order, r.Run)
		}
		switch {
		case r.Workload == "rtt":
			rr.floor = r
		case r.Mode == "loss 0%":
			rr.clean = r
		case r.Mode == "lost-tail":
			rr.tail = r
		case r.Mode == "burst-lossless":
			rr.burst = r
		case r.Mode == "single-gap":
			rr.gap = r
		default:
			rr.lossy = r
		}
	}
	return order, byRun
}

// gapCost is what the loss adds to a single gap in one run.
type gapCost struct {
	d50, d99 int64   // single-gap p50/p99 − burst-lossless p50/p99, ns
	x50, x99 float64 // d50/d99 over the floor RTT p50/p99
}

// gapRepair is a single gap's repair cost in one run: the single-gap
// row's p50 and p99 less the burst-lossless row's (the same record of
// the same bursts, nothing lost), over the run's floor RTT p50 and p99.
// p99 − p99 is the difference of two percentiles, not the p99 of a
// per-record difference. False unless all three rows were measured.
func gapRepair(gap, burst, floor benchkit.Row) (gapCost, bool) {
	if gap.Latency.N == 0 || burst.Latency.N == 0 || floor.Latency.N == 0 {
		return gapCost{}, false
	}
	g := gapCost{d50: gap.Latency.P50 - burst.Latency.P50, d99: gap.Latency.P99 - burst.Latency.P99}
	g.x50 = benchkit.Ratio(float64(g.d50), float64(floor.Latency.P50))
	g.x99 = benchkit.Ratio(float64(g.d99), float64(floor.Latency.P99))
	return g, true
}

// printLatencyTargets prints the latency targets against each
// run's rows and returns how many target × run pairs were missed.
func printLatencyTargets(w io.Writer, order []int, byRun map[int]*latencyRun) int {
	const ms = 1e6
	type target struct {
		name string
		ok   func(rr *latencyRun) (string, bool, bool) // figure, met, measured
	}
	targets := []target{
		{"lossless p99 < 100 µs", func(rr *latencyRun) (string, bool, bool) {
			if rr.clean == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f µs", us(rr.clean.Latency.P99)), rr.clean.Latency.P99 < 100_000, true
		}},
		{"lossy p99 < 1 ms", func(rr *latencyRun) (string, bool, bool) {
			if rr.lossy == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f µs", us(rr.lossy.Latency.P99)), rr.lossy.Latency.P99 < ms, true
		}},
		{"lossy p99 ≤ lossless p99 + 1 ms", func(rr *latencyRun) (string, bool, bool) {
			if rr.clean == nil || rr.lossy == nil {
				return "", false, false
			}
			d := rr.lossy.Latency.P99 - rr.clean.Latency.P99
			return fmt.Sprintf("%+.1f µs", us(d)), d <= ms, true
		}},
		{"lossy p99.9 ≤ lossless p99.9 + 5 ms", func(rr *latencyRun) (string, bool, bool) {
			if rr.clean == nil || rr.lossy == nil {
				return "", false, false
			}
			d := rr.lossy.Latency.P999 - rr.clean.Latency.P999
			return fmt.Sprintf("%+.1f µs", us(d)), d <= 5*ms, true
		}},
		{"lost tail p99 ≤ 1 ms", func(rr *latencyRun) (string, bool, bool) {
			if rr.tail == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f µs", us(rr.tail.Latency.P99)), rr.tail.Latency.P99 <= ms, true
		}},
		// Judged on the repair cost (what the loss adds); the raw ratio
		// also charges the burst's own transmission.
		{"single gap repair p50, p99 ≤ 3× floor", func(rr *latencyRun) (string, bool, bool) {
			if rr.gap == nil || rr.burst == nil || rr.floor == nil {
				return "", false, false
			}
			g, _ := gapRepair(*rr.gap, *rr.burst, *rr.floor) // a failed row: "failed" below
			return fmt.Sprintf("×%.2f/×%.2f (raw ×%.2f/×%.2f)", g.x50, g.x99, rr.gap.RatioP50, rr.gap.RatioP99),
				g.x50 <= 3 && g.x99 <= 3, true
		}},
	}
	fmt.Fprintln(w, "\ntargets, per run:")
	missed := 0
	for _, t := range targets {
		met, n := 0, 0
		figs := ""
		for _, run := range order {
			rr := byRun[run]
			fig, ok, measured := t.ok(rr)
			if !measured {
				continue
			}
			for _, r := range []*benchkit.Row{rr.floor, rr.clean, rr.lossy, rr.tail, rr.burst, rr.gap} {
				if r != nil && r.Latency.N == 0 && strings.Contains(t.name, rowTarget(r.Mode)) {
					fig, ok = "failed", false
				}
			}
			n++
			if ok {
				met++
			} else {
				missed++
			}
			if figs != "" {
				figs += " · "
			}
			figs += fig
		}
		if n == 0 {
			continue
		}
		verdict := "met"
		if met < n {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "%-38s %-7s in %d of %d runs: %s\n", t.name, verdict, met, n, figs)
	}
	for _, run := range order {
		if byRun[run].gap != nil {
			fmt.Fprintln(w, `single gap repair = (single-gap − burst-lossless of the same run) / that run's floor RTT, at p50 and at p99
  (p99 − p99: not the p99 of each record's difference); raw = single-gap / floor, the burst's own transmission included`)
			break
		}
	}
	return missed
}
