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
	registerBench("latency", "one-way send→deliver of pinned in-loop sides: paced at 0 % and -loss %, lost tails, single gaps vs the RTT floor", benchLatency)
}

func benchLatency(args []string) error {
	fs := newFlagSet("bench latency", "[flags]", `One-way send→deliver latency on loopback (issue 11's acceptance set-up): the
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
  single-gap         the same, losing each burst's middle record instead;
                     ×p50/×p99 compare it with the floor RTT of the run
Rows run interleaved -runs times; then the spread and the issue's targets per
run (lossless p99 < 100 µs; lossy p99 < 1 ms, ≤ lossless p99 + 1 ms, p99.9 ≤
lossless p99.9 + 5 ms; lost tail p99 ≤ 1 ms; single gap ≤ 3× the floor).
Exit 0 when every row was measured (1 when one failed); with -check, also 1
when a target was missed in some run.
Run it under the bench lock: flock /tmp/walcast-bench.lock cast bench latency`)
	c := benchkit.DefaultOneWayConfig()
	fs.IntVar(&c.N, "n", c.N, "measured records per paced row")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "paced records sent before measuring")
	fs.IntVar(&c.Rate, "rate", c.Rate, "paced rows: records per second")
	fs.IntVar(&c.Size, "size", c.Size, "record payload bytes (its 8-byte seq included)")
	fs.StringVar(&c.Path, "path", c.Path, "datapath: mmsg (recvmmsg/sendmmsg, no GSO/GRO) or udp (one syscall per datagram)")
	fs.IntVar(&c.Batch, "batch", c.Batch, "datagrams per receive and flush of both loops")
	fs.IntVar(&c.Burst, "burst", c.Burst, "records per burst of the lost-tail and single-gap rows")
	fs.IntVar(&c.Bursts, "bursts", c.Bursts, "bursts (measured records) of the lost-tail and single-gap rows")
	fs.DurationVar(&c.Pause, "pause", c.Pause, "wait after a burst is delivered before the next")
	fs.DurationVar(&c.Stall, "stall", c.Stall, "a row fails after this long without a delivery")
	seed := fs.Uint64("seed", 1, "seed of the random loss")
	loss := fs.Float64("loss", 1, "percent random receive loss of the lossy paced row")
	floorN := fs.Int("floor-n", 20000, "round trips of the floor-loop row")
	runs := fs.Int("runs", 3, "interleaved runs of every row")
	pin := fs.String("pin", "0,1", "CPUs of the sender's and the receiver's loop, or none")
	check := fs.Bool("check", false, "exit 1 when a target is missed in some run")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of a table")
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
		c.Size, c.Path, c.Rate, c.N, c.Warmup, *loss, c.Bursts, c.Burst, *pin, *runs, time.Now().UTC().Format(time.RFC3339), loadAvg())
	rs := newRowStream("bench latency", title, *runs*5, true, *jsonOut)
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
				{"single-gap", func() (benchkit.Row, error) { return benchkit.OneWayBursts(c, benchkit.LossGap) }},
			}
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
				if st.what == "single-gap" && err == nil {
					r.CompareTo(floor)
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
		if len(ok) > 0 {
			printSpread(os.Stdout, ok)
		}
		missed = printLatencyTargets(os.Stdout, rows)
		fmt.Fprintf(os.Stdout, "load at the end %s\n", loadAvg())
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
	case "single-gap":
		return "single gap"
	case "spin":
		return "floor"
	}
	return "lossy"
}

// printLatencyTargets prints issue 11's latency targets against each
// run's rows and returns how many target × run pairs were missed.
func printLatencyTargets(w io.Writer, rows []benchkit.Row) int {
	type runRows struct{ floor, clean, lossy, tail, gap *benchkit.Row }
	byRun := map[int]*runRows{}
	var order []int
	for i := range rows {
		r := &rows[i]
		rr := byRun[r.Run]
		if rr == nil {
			rr = &runRows{}
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
		case r.Mode == "single-gap":
			rr.gap = r
		default:
			rr.lossy = r
		}
	}
	const ms = 1e6
	type target struct {
		name string
		ok   func(rr *runRows) (string, bool, bool) // figure, met, measured
	}
	targets := []target{
		{"lossless p99 < 100 µs", func(rr *runRows) (string, bool, bool) {
			if rr.clean == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f µs", us(rr.clean.Latency.P99)), rr.clean.Latency.P99 < 100_000, true
		}},
		{"lossy p99 < 1 ms", func(rr *runRows) (string, bool, bool) {
			if rr.lossy == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f µs", us(rr.lossy.Latency.P99)), rr.lossy.Latency.P99 < ms, true
		}},
		{"lossy p99 ≤ lossless p99 + 1 ms", func(rr *runRows) (string, bool, bool) {
			if rr.clean == nil || rr.lossy == nil {
				return "", false, false
			}
			d := rr.lossy.Latency.P99 - rr.clean.Latency.P99
			return fmt.Sprintf("%+.1f µs", us(d)), d <= ms, true
		}},
		{"lossy p99.9 ≤ lossless p99.9 + 5 ms", func(rr *runRows) (string, bool, bool) {
			if rr.clean == nil || rr.lossy == nil {
				return "", false, false
			}
			d := rr.lossy.Latency.P999 - rr.clean.Latency.P999
			return fmt.Sprintf("%+.1f µs", us(d)), d <= 5*ms, true
		}},
		{"lost tail p99 ≤ 1 ms", func(rr *runRows) (string, bool, bool) {
			if rr.tail == nil {
				return "", false, false
			}
			return fmt.Sprintf("%.1f µs", us(rr.tail.Latency.P99)), rr.tail.Latency.P99 <= ms, true
		}},
		{"single gap p50 and p99 ≤ 3× floor RTT", func(rr *runRows) (string, bool, bool) {
			if rr.gap == nil || rr.floor == nil {
				return "", false, false
			}
			return fmt.Sprintf("×%.2f/×%.2f", rr.gap.RatioP50, rr.gap.RatioP99), rr.gap.RatioP50 <= 3 && rr.gap.RatioP99 <= 3, true
		}},
	}
	fmt.Fprintln(w, "\ntargets (issue 11), per run:")
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
			for _, r := range []*benchkit.Row{rr.floor, rr.clean, rr.lossy, rr.tail, rr.gap} {
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
	return missed
}
