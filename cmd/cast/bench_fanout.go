package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/internal/fanout"
)

func init() {
	registerBench("fanout", "1 sender → N receivers in namespaces, independent loss: multicast vs N unicast senders (root)", runBenchFanout)
}

// fanRow is one configuration of the fan-out bench.
type fanRow struct {
	name string
	cfg  fanout.Config
	res  []fanout.Result
	errs []error
}

func runBenchFanout(args []string) error {
	fs := newFlagSet("bench fanout", "[flags]", "One producer, N consumers, each in its own network namespace on one bridge,\nwith independent loss injected in the kernel on the way to each (tc-BPF on the\nbridge ports). Rows, interleaved -runs times: unicast-1 (one receiver: the\nlatency floor), multicast-N (one stream to a group, NAK suppression, repairs\nto the group) and unicast-N (N casting senders, every record sent N times:\nthe control multicast-N is judged against). Prints datagrams per record, NAK\nframes per lost-record event, repair datagrams per lost seq and one-way latency\nper receiver, with the spread over the runs and the load average; then the\nworst receiver's p50, p99 and p99.9 of multicast-N over unicast-1's and over\nunicast-N's in the same run, per run and as the median of the runs with their\nspread (target: p99 ≤ 1.2× unicast-N). Needs root. Run it under the bench lock.")
	n := fs.Int("n", 1_000_000, "records per run")
	recv := fs.Int("receivers", 8, "receivers N (1..15)")
	loss := fs.Float64("loss", 1, "percent of the datagrams forwarded to each receiver dropped, independently")
	rate := fs.Int("rate", 50_000, "records per second the producer offers (0: as fast as it may)")
	size := fs.Int("size", 64, "payload bytes per record (16..1400)")
	path := fs.String("path", "mmsg", "datapath: udp or mmsg")
	runs := fs.Int("runs", 3, "runs of every row, interleaved")
	unicastN := fs.Bool("unicast", true, "also run N unicast senders")
	walOn := fs.Bool("wal", true, "give every sender a WAL in a temporary directory (repairs that miss the hot ring come from it)")
	kill := fs.Bool("kill", true, "also run multicast-N with receiver 1 killed at a third of the records for 2 s (longer than the 1 s receiver timeout) and restarted over TCP (needs -wal)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on one run after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("receivers", *recv, 1, 15); err != nil {
		return err
	}
	if err := checkRange("runs", *runs, 1, 20); err != nil {
		return err
	}
	if err := checkPct("loss", *loss); err != nil {
		return err
	}
	base := fanout.DefaultConfig()
	base.Receivers, base.Records, base.Rate, base.Payload, base.Loss, base.Path, base.Timeout = *recv, *n, *rate, *size, *loss/100, *path, *timeout
	base.Group = netip.MustParseAddrPort("239.198.0.1:0")
	base.WAL = *walOn
	if err := base.Validate(); err != nil {
		return usagef("%v", err)
	}
	rows := []*fanRow{{name: "unicast-1", cfg: base}, {name: fmt.Sprintf("multicast-%d", *recv), cfg: base}}
	rows[0].cfg.Mode, rows[0].cfg.Receivers = fanout.Unicast, 1
	if *unicastN && *recv > 1 {
		u := base
		u.Mode = fanout.Unicast
		rows = append(rows, &fanRow{name: fmt.Sprintf("unicast-%d", *recv), cfg: u})
	}
	if *kill && *walOn && *recv > 1 {
		k := base
		// The protocol's 1 s receiver timeout, which the row measures (the
		// others use fanout's 10 s, which a loaded machine's stalls need).
		k.Kill, k.KillAt, k.Down, k.ReceiverTimeout = 1, *n/3, 2*time.Second, protocol.DefaultReceiverTimeout
		// A window of at most 0.2 s of records, so that min reaches the
		// killed receiver's edge well before its 1 s timeout.
		k.ReorderSlots = 4096
		rows = append(rows, &fanRow{name: fmt.Sprintf("multicast-%d-kill", *recv), cfg: k})
	}
	ctx, cancel := signalContext()
	defer cancel()
	fmt.Fprintf(os.Stderr, "bench fanout: %d records of %d B at %d rec/s, %.1f %% loss per receiver, %s, %d runs\n", *n, *size+16, *rate, *loss, *path, *runs)
	for k := range *runs {
		for _, r := range rows {
			if ctx.Err() != nil {
				return interruptedf("bench fanout stopped")
			}
			res, err := fanout.Run(ctx, r.cfg)
			r.res, r.errs = append(r.res, res), append(r.errs, err)
			fmt.Fprintf(os.Stderr, "run %d %-12s %s\n", k+1, r.name, fanLine(res, err))
		}
	}
	printFanout(os.Stdout, rows)
	return fanVerdict(rows)
}

func fanLine(r fanout.Result, err error) string {
	if err != nil {
		return "failed: " + err.Error()
	}
	kill := ""
	if r.Config.Kill >= 0 {
		k := r.Receivers[r.Config.Kill]
		kill = fmt.Sprintf(", killed receiver: %d records over TCP, %d over UDP; sender held %.2f s (receiver lost after %.2f s), then %.0f rec/s",
			k.TCP, k.UDP, r.Stall.Seconds(), r.LostAfter.Seconds(), r.ResumeRate)
	}
	return fmt.Sprintf("%.3f dgram/rec, %.2f NAK/event, %.2f repairs/lost, worst p99 %.0f µs, %.0f rec/s, load %.1f→%.1f",
		r.DatagramsPerRecord(), r.NaksPerEvent(), r.RepairsPerLost(), float64(r.WorstP99())/1e3, r.Throughput, r.Load[0][0], r.Load[1][0]) + kill
}

// spread formats min–max of f over the successful runs.
func spread(rs []fanout.Result, errs []error, f func(fanout.Result) float64, format string) string {
	var v []float64
	for i, r := range rs {
		if errs[i] == nil {
			v = append(v, f(r))
		}
	}
	if len(v) == 0 {
		return "–"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if len(v) == 1 || fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format+"–"+format, lo, hi)
}

func allDelivered(r fanout.Result) bool {
	for _, rr := range r.Receivers {
		if rr.Delivered != uint64(r.Config.Records) || rr.OutOfOrder != 0 || rr.Missing != 0 {
			return false
		}
	}
	return len(r.Receivers) > 0
}

func printFanout(w io.Writer, rows []*fanRow) {
	fmt.Fprintf(w, "\n| row | runs ok | every record once, in order | datagrams / record | NAK frames / lost-record event | repair datagrams / lost seq | p50 µs (median receiver) | worst receiver p99 µs | rec/s | load |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		ok, all := 0, true
		for i, e := range r.errs {
			if e == nil {
				ok++
				all = all && allDelivered(r.res[i])
			}
		}
		fmt.Fprintf(w, "| %s | %d/%d | %v | %s | %s | %s | %s | %s | %s | %s |\n", r.name, ok, len(r.errs), ok > 0 && all,
			spread(r.res, r.errs, fanout.Result.DatagramsPerRecord, "%.3f"),
			spread(r.res, r.errs, fanout.Result.NaksPerEvent, "%.2f"),
			spread(r.res, r.errs, fanout.Result.RepairsPerLost, "%.2f"),
			spread(r.res, r.errs, medianP50, "%.0f"),
			spread(r.res, r.errs, func(x fanout.Result) float64 { return float64(x.WorstP99()) / 1e3 }, "%.0f"),
			spread(r.res, r.errs, func(x fanout.Result) float64 { return x.Throughput }, "%.0f"),
			spread(r.res, r.errs, func(x fanout.Result) float64 { return x.Load[1][0] }, "%.1f"))
	}
	if len(rows) >= 2 {
		m := rows[1]
		fmt.Fprintf(w, "\nworst receiver of %s ÷ unicast-1 (the latency floor), same run, p50/p99/p99.9: %s\n", m.name,
			fanout.Compare(m.res, rows[0].res, m.errs, rows[0].errs))
		// The fair control: the same N receivers, each fed by its own
		// unicast sender, under the same load.
		if len(rows) >= 3 && rows[2].cfg.Mode == fanout.Unicast {
			u := rows[2]
			v := fanout.Compare(m.res, u.res, m.errs, u.errs)
			fmt.Fprintf(w, "worst receiver of %s ÷ worst receiver of %s (the control: %d unicast senders to the same receivers), same run, p50/p99/p99.9: %s\n%s\n",
				m.name, u.name, u.cfg.Receivers, v, v.Target())
		}
	}
	for _, r := range rows {
		if r.cfg.Kill < 0 {
			continue
		}
		fmt.Fprintf(w, "%s: sender held %s s after the kill (receiver lost after %s s), then %s rec/s; killed receiver caught up %s records over TCP\n", r.name,
			spread(r.res, r.errs, func(x fanout.Result) float64 { return x.Stall.Seconds() }, "%.2f"),
			spread(r.res, r.errs, func(x fanout.Result) float64 { return x.LostAfter.Seconds() }, "%.2f"),
			spread(r.res, r.errs, func(x fanout.Result) float64 { return x.ResumeRate }, "%.0f"),
			spread(r.res, r.errs, func(x fanout.Result) float64 { return float64(x.Receivers[x.Config.Kill].TCP) }, "%.0f"))
	}
}

func medianP50(r fanout.Result) float64 {
	var v []float64
	for _, rr := range r.Receivers {
		v = append(v, float64(rr.Latency.P50)/1e3)
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// fanVerdict fails the command when a run failed or lost a record.
func fanVerdict(rows []*fanRow) error {
	for _, r := range rows {
		for i, e := range r.errs {
			if e != nil {
				return failf("%s run %d: %v", r.name, i+1, e)
			}
			if !allDelivered(r.res[i]) {
				return failf("%s run %d: a receiver missed records or got them out of order", r.name, i+1)
			}
		}
	}
	return nil
}
