package suite

import (
	"context"
	"fmt"
	"time"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/internal/pathbench"
)

// runPaths runs `cast bench paths` (internal/pathbench: udp, mmsg and
// AF_XDP over veth namespaces, same protocol core) and adds its median
// rows as workloads paths-rtt, paths-throughput and paths-loss. It needs
// Linux and root; otherwise the workload is reported as not available.
func runPaths(o Options, r *report.Report) {
	c := pathbench.DefaultConfig()
	c.Specs, _ = pathbench.ParseSpecs("")
	c.CPUs = [2]int{o.Harness.ClientCPU, o.Harness.ServerCPU}
	c.Runs = max(1, o.Repeat)
	c.Log = o.Log
	if o.Quick {
		c.Runs, c.N, c.Warmup, c.Blocks = 1, 500, 100, 2
		c.Sizes = []int{144}
		c.TputTime, c.LossTime = 200*time.Millisecond, 300*time.Millisecond
	}
	pr, err := pathbench.Run(context.Background(), c)
	if err != nil {
		unavailable(r, "paths", err.Error())
		return
	}
	for _, x := range pr.Summary {
		r.Results = append(r.Results, pathResult(x))
	}
	for _, ck := range pr.Checks {
		st := "met"
		if !ck.Met {
			st = "MISSED"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("paths: %s %s — %s", st, ck.Text, ck.Detail))
	}
	for _, n := range pr.Notes {
		r.Notes = append(r.Notes, "paths: "+n)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("paths: load %s → %s over %.0f s", pr.LoadStart, pr.LoadEnd, pr.Seconds))
}

// pathResult is a pathbench row in the suite's form: the loop threads'
// counters go into Perf (per operation, software events only), the
// latency summary into a coarse percentile curve for the plots.
func pathResult(x pathbench.Row) harness.Result {
	res := harness.Result{Row: x.Row, Size: x.Size, Drop: x.Drop, Sent: x.Sent, Delivered: x.Delivered,
		DeliveredPct: x.DeliveredPct, Pinned: true}
	res.Workload = "paths-" + x.Workload
	if x.Sent > 0 {
		res.RetransPerRec = float64(x.Retx) / float64(x.Sent)
	}
	switch {
	case x.Refused != "":
		res.Skipped = "refused by the kernel: " + x.Refused
	case x.Failed != "":
		res.Skipped = "failed: " + x.Failed
	}
	if res.Skipped != "" && res.Note == "" {
		res.Note = res.Skipped
	}
	if x.Spread != "" {
		res.Note = x.Spread + "; " + res.Note
	}
	if x.Workload == "loss" {
		res.Note = fmt.Sprintf("injected A→B %.2f %%, B→A %.2f %%; %s", 100*x.LossAB, 100*x.LossBA, res.Note)
	}
	l := x.Latency
	if l.N > 0 {
		res.Curve = []harness.Point{{Q: 50, NS: l.P50}, {Q: 90, NS: l.P90}, {Q: 99, NS: l.P99}, {Q: 99.9, NS: l.P999}}
	}
	for _, t := range []struct {
		who string
		th  pathbench.Thread
	}{{"A", x.A}, {"B", x.B}} {
		for _, c := range []struct {
			name string
			v    float64
		}{{"cpu-ns", t.th.CPUNs}, {"syscalls", t.th.Syscalls}, {"ctxsw", t.th.CtxSw}, {"preemptions", t.th.Involuntary}, {"runq-ns", t.th.RunqNs}} {
			pc := benchkit.PerfCount{Name: t.who + " " + c.name + " (software)", OK: c.v >= 0, PerOp: c.v}
			if !pc.OK {
				pc.Why = t.th.Why
			}
			res.Perf = append(res.Perf, pc)
		}
	}
	return res
}
