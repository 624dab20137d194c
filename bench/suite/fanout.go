package suite

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"time"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/peers/moldudp64"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/fanout"
)

// Fan-out workload shape: receivers, records, offered rate, loss.
var (
	FanoutReceivers = 8
	FanoutRecords   = 1_000_000
	FanoutRate      = 50_000
	FanoutLoss      = 0.01
)

type fanoutRow struct {
	name string
	run  func(context.Context, fanout.Config) (fanout.Result, error)
	cfg  fanout.Config
	res  []fanout.Result
	errs []error
}

// runFanout runs the fan-out workload: one producer and N
// consumers in network namespaces on one bridge, independent loss on the
// way to each. Rows, interleaved Repeat times: casting-unicast-1 (one
// receiver, the latency floor of the ratio), casting-multicast-N,
// casting-unicast-N (N senders: the control casting-multicast-N's note
// compares it with, run by run, against fanout.ControlTarget),
// moldudp64-multicast-N (repairs to the
// requester, as the MoldUDP64 specification describes) and
// moldudp64-multicast-group-N (its request server answering to the
// group). Each row keeps the run with the median worst-receiver p99 and
// notes the spread. Needs Linux and root.
func runFanout(o Options, r *report.Report) {
	if runtime.GOOS != "linux" {
		unavailable(r, "fan-out", "needs Linux (network namespaces, tc-BPF)")
		return
	}
	base := fanout.DefaultConfig()
	base.Receivers, base.Records, base.Rate, base.Loss = FanoutReceivers, FanoutRecords, FanoutRate, FanoutLoss
	base.Group, base.WAL, base.Timeout = netip.MustParseAddrPort("239.198.0.1:0"), true, 5*time.Minute
	if o.Quick {
		base.Receivers, base.Records, base.Rate = 3, 5000, 5000
	}
	n := base.Receivers
	uni1 := base
	uni1.Mode, uni1.Receivers = fanout.Unicast, 1
	uniN := base
	uniN.Mode = fanout.Unicast
	mold := func(group bool) func(context.Context, fanout.Config) (fanout.Result, error) {
		return func(ctx context.Context, c fanout.Config) (fanout.Result, error) {
			return moldudp64.RunFanout(ctx, c, moldudp64.FanoutOptions{RepairsToGroup: group})
		}
	}
	rows := []*fanoutRow{
		{name: "casting-unicast-1", run: fanout.Run, cfg: uni1},
		{name: fmt.Sprintf("casting-multicast-%d", n), run: fanout.Run, cfg: base},
		{name: fmt.Sprintf("casting-unicast-%d", n), run: fanout.Run, cfg: uniN},
		{name: fmt.Sprintf("moldudp64-multicast-%d", n), run: mold(false), cfg: base},
		{name: fmt.Sprintf("moldudp64-multicast-group-%d", n), run: mold(true), cfg: base},
	}
	for k := range max(1, o.Repeat) {
		for _, row := range rows {
			res, err := row.run(context.Background(), row.cfg)
			row.res, row.errs = append(row.res, res), append(row.errs, err)
			if err != nil {
				o.logf("fan-out %-28s run %d failed: %v\n", row.name, k+1, err)
				continue
			}
			o.logf("fan-out %-28s run %d %.3f dgram/rec %.2f NAK/event %.2f repairs/lost worst p99 %.0f µs load %.1f\n", row.name, k+1,
				res.DatagramsPerRecord(), res.NaksPerEvent(), res.RepairsPerLost(), float64(res.WorstP99())/1e3, res.Load[1][0])
		}
	}
	var floor *harness.Result
	for i, row := range rows {
		res := fanoutResult(row)
		if i == 1 && res.Skipped == "" {
			// The fair control: rows[2], the same receivers fed by one
			// unicast sender each, interleaved with this row.
			u := rows[2]
			v := fanout.Compare(row.res, u.res, row.errs, u.errs)
			res.Note += fmt.Sprintf("; worst receiver ÷ %s's, same run, p50/p99/p99.9: %s; %s", u.name, v, v.Target())
		}
		if row.name == "casting-unicast-1" && res.Skipped == "" {
			floor = &res
		}
		if floor != nil && res.Skipped == "" {
			res.CompareTo(floor.Row)
		}
		r.Results = append(r.Results, res)
	}
}

// fanoutResult is a row's median run (by worst-receiver p99) in the
// suite's form: Latency is the worst receiver's, the note carries the
// wire ratios and the spread over the runs.
func fanoutResult(row *fanoutRow) harness.Result {
	c := row.cfg
	res := harness.Result{Size: c.Payload + 16, Drop: c.Loss, Sent: int64(c.Records)}
	res.Workload, res.Name, res.Path, res.Mode = "fan-out", row.name, c.Path, "park"
	var ok []fanout.Result
	var failed []string
	for i, e := range row.errs {
		if e != nil {
			failed = append(failed, e.Error())
			continue
		}
		ok = append(ok, row.res[i])
	}
	if len(ok) == 0 {
		res.Skipped = "failed: " + failed[0]
		res.Note = res.Skipped
		return res
	}
	slices.SortFunc(ok, func(a, b fanout.Result) int { return int(a.WorstP99() - b.WorstP99()) })
	m := ok[len(ok)/2]
	worst := m.Receivers[0]
	minDelivered := uint64(c.Records)
	for _, rr := range m.Receivers {
		if rr.Latency.P99 > worst.Latency.P99 {
			worst = rr
		}
		minDelivered = min(minDelivered, rr.Delivered)
	}
	res.Latency = worst.Latency
	res.Records, res.Delivered = int64(c.Records), int64(minDelivered)
	res.DeliveredPct = 100 * float64(minDelivered) / float64(c.Records)
	res.Seconds, res.RecPerS = m.Elapsed.Seconds(), m.Throughput
	res.RetransPerRec = float64(m.Repairs) / float64(c.Records)
	lo, hi := ok[0], ok[len(ok)-1]
	res.Note = fmt.Sprintf("%d records offered at %d rec/s to %d receivers, %.1f %% loss each: %.3f datagrams/record, %.2f NAK frames/lost-record event, %.2f repairs/lost seq; worst-receiver p99 %.0f–%.0f µs over %d runs; load %.1f",
		c.Records, c.Rate, len(m.Receivers), 100*c.Loss, m.DatagramsPerRecord(), m.NaksPerEvent(), m.RepairsPerLost(),
		float64(lo.WorstP99())/1e3, float64(hi.WorstP99())/1e3, len(ok), m.Load[1][0])
	if len(failed) > 0 {
		res.Note += fmt.Sprintf("; %d runs failed (%s)", len(failed), failed[0])
	}
	return res
}
