package suite

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/benchkit"
)

// Workloads in the order `all` runs them.
var Workloads = []string{"rtt", "oneway", "throughput", "loss-recovery", "loss-degradation", "classic", "wal", "outage", "fan-out", "paths"}

// Drops of the loss-degradation workload (per direction).
var LossDrops = []float64{0, 0.01, 0.05, 0.10, 0.25, 0.30, 0.40, 0.50}

// ClassicDrops of the classic sender experiment (receiver side).
var ClassicDrops = []float64{0, 0.05, 0.10, 0.25, 0.50}

// Options is one suite invocation.
type Options struct {
	Workloads []string // names from Workloads; "all" expands
	Harness   harness.Config
	Repeat    int           // rtt runs per peer, interleaved; the median p50 run is reported (3)
	LossTime  time.Duration // sending time per loss-degradation row (1.5 s)
	Sizes     []int         // throughput message sizes (144, 1443)
	TputN     int           // throughput messages per row (cap; Budget caps the time too)
	Quick     bool          // smoke-test shape: tiny counts, few drops
	Dir       string        // where probes put scratch files
	Command   string        // how the run was invoked, for the report
	Log       io.Writer     // progress and section headers; nil = silent
	// Stop, once closed, ends the run after the workload that is running
	// (Ctrl-C in cast-bench); the report then holds what was measured and
	// Interrupted names what was not.
	Stop <-chan struct{}
}

// DefaultOptions is the shape `make bench` runs.
func DefaultOptions() Options {
	return Options{
		Workloads: []string{"all"}, Harness: harness.DefaultConfig(), Repeat: 3,
		LossTime: time.Second, Sizes: []int{144, 1443}, TputN: 2_000_000,
	}
}

// QuickOptions is a few-second shape for smoke tests.
func QuickOptions() Options {
	o := DefaultOptions()
	o.Quick = true
	o.Harness.Warmup, o.Harness.N, o.Harness.Budget = 20, 200, 300*time.Millisecond
	o.Repeat, o.LossTime, o.TputN = 1, 200*time.Millisecond, 5000
	return o
}

func (o Options) expand() ([]string, error) {
	var out []string
	for _, w := range o.Workloads {
		if w == "all" {
			out = append(out, Workloads...)
			continue
		}
		ok := false
		for _, k := range Workloads {
			ok = ok || k == w
		}
		if !ok {
			return nil, fmt.Errorf("suite: unknown workload %q (have %s, all)", w, strings.Join(Workloads, ", "))
		}
		out = append(out, w)
	}
	return out, nil
}

func (o Options) logf(format string, a ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format, a...)
	}
}

// Run executes the workloads and returns the report (not yet written).
func Run(o Options) (*report.Report, error) {
	wls, err := o.expand()
	if err != nil {
		return nil, err
	}
	if err := o.Harness.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	load0 := benchkit.LoadAvg()
	r := &report.Report{
		Date: start.UTC().Format("2006-01-02 15:04 UTC"), Machine: benchkit.Machine(), Command: o.Command,
		Config: o.Harness, Probes: benchkit.Probes(o.Dir),
	}
	for _, p := range r.Probes {
		o.logf("probe %-22s %-3v %s\n", p.Name, p.OK, p.Detail)
	}
	for i, w := range wls {
		select {
		case <-o.Stop:
			r.Interrupted = wls[i:]
			r.Notes = append(r.Notes, "interrupted: not run: "+strings.Join(wls[i:], ", "))
		default:
		}
		if r.Interrupted != nil {
			break
		}
		o.logf("== %s\n", w)
		switch w {
		case "rtt":
			runRTT(o, r)
		case "oneway":
			runOneWay(o, r)
		case "throughput":
			runThroughput(o, r)
		case "loss-degradation":
			runLoss(o, r)
		case "classic":
			runClassic(o, r)
		case "loss-recovery":
			runLossRecovery(o, r)
		case "wal":
			runWAL(o, r)
		case "outage":
			runOutage(o, r)
		case "paths":
			runPaths(o, r)
		case "fan-out":
			runFanout(o, r)
		}
	}
	r.Goals = Goals(r)
	r.Seconds = time.Since(start).Seconds()
	r.Load = load0 + " → " + benchkit.LoadAvg()
	return r, nil
}

func (o Options) cfg() harness.Config {
	c := o.Harness
	if o.Log != nil && c.Progress == nil {
		c.Progress = o.Log
	}
	return c
}

func compare(rs []harness.Result, floor string) {
	var f *harness.Result
	for i := range rs {
		if rs[i].Name == floor && rs[i].Skipped == "" {
			f = &rs[i]
			break
		}
	}
	if f == nil {
		return
	}
	for i := range rs {
		if rs[i].Skipped == "" {
			rs[i].CompareTo(f.Row)
			rs[i].RatioP50, rs[i].RatioP99 = finite(rs[i].RatioP50), finite(rs[i].RatioP99)
		}
	}
}

func finite(v float64) float64 {
	if v != v || v > 1e300 || v < -1e300 {
		return 0
	}
	return v
}

// runRTT runs every latency peer Repeat times, interleaved (A B C A B C)
// so slow drift of the machine hits every peer alike, and keeps the run
// with the median p50; the note gives the p50 range over the runs.
func runRTT(o Options, r *report.Report) {
	ps := LatencyPeers()
	runs := make([][]harness.Result, len(ps)+1)
	for k := 0; k < max(1, o.Repeat); k++ {
		for i := 0; i <= len(ps); i++ {
			var res harness.Result
			if i == len(ps) {
				res = castingPing(o, "rtt", o.cfg(), 0) // casting over udp, cast.Loop on both ends
			} else {
				res = harness.RTT(ps[i], o.cfg(), 0)
			}
			runs[i] = append(runs[i], res)
			if res.Skipped != "" {
				continue
			}
			o.logf("rtt %-16s run %d p50 %6.1f µs p99 %7.1f µs\n", res.Name, k+1, float64(res.Latency.P50)/1e3, float64(res.Latency.P99)/1e3)
		}
	}
	var rows []harness.Result
	for _, rs := range runs {
		rows = append(rows, median(rs))
	}
	compare(rows, "raw-udp")
	// The datapath rows carry their ratios to floor-loop of their own run.
	rows = append(rows, castingRTT(o, r)...)
	r.Results = append(r.Results, rows...)
}

// median returns the run with the median p50 and notes the spread.
func median(rs []harness.Result) harness.Result {
	var ok []harness.Result
	for _, x := range rs {
		if x.Skipped == "" && x.Latency.N > 0 {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return rs[0]
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].Latency.P50 < ok[j].Latency.P50 })
	m := ok[len(ok)/2]
	if len(ok) > 1 {
		lo, hi := ok[0].Latency, ok[len(ok)-1].Latency
		p99lo, p99hi := lo.P99, hi.P99
		for _, x := range ok {
			p99lo, p99hi = min(p99lo, x.Latency.P99), max(p99hi, x.Latency.P99)
		}
		m.Note = strings.TrimSpace(fmt.Sprintf("%s median of %d runs: p50 %.1f–%.1f µs, p99 %.1f–%.1f µs", m.Note, len(ok),
			float64(lo.P50)/1e3, float64(hi.P50)/1e3, float64(p99lo)/1e3, float64(p99hi)/1e3))
	}
	return m
}

func runOneWay(o Options, r *report.Report) {
	var rows []harness.Result
	for _, p := range LatencyPeers() {
		res := harness.OneWay(p, o.cfg())
		rows = append(rows, res)
		if res.Skipped == "" {
			o.logf("oneway %-16s p50 %6.1f µs p99 %7.1f µs\n", p.Name, float64(res.Latency.P50)/1e3, float64(res.Latency.P99)/1e3)
		}
	}
	compare(rows, "raw-udp")
	r.Results = append(r.Results, rows...)
}

func runThroughput(o Options, r *report.Report) {
	for _, size := range o.Sizes {
		var rows []harness.Result
		for _, p := range ThroughputPeers() {
			res := harness.Throughput(p, o.cfg(), size, o.TputN, 0)
			rows = append(rows, res)
			o.logf("throughput %-16s %4d B %10.0f rec/s %6.3f Gbit/s %5.1f %%\n", p.Name, size, res.RecPerS, res.Gbps, res.DeliveredPct)
		}
		compare(rows, "raw-udp")
		// The datapath rows carry their ratios to the floors of their run.
		rows = append(rows, castingThroughput(o, r, size)...)
		r.Results = append(r.Results, rows...)
	}
}

func runLoss(o Options, r *report.Report) {
	drops := LossDrops
	if o.Quick {
		drops = []float64{0, 0.1}
	}
	c := o.cfg()
	c.Budget, c.Drain = o.LossTime, lossDrain(o)
	// Every row runs across one veth link whose BPF injector drops the
	// same fraction of every peer's datagrams; without it (not root, no
	// tc BPF), each peer drops at its own receiving sockets.
	ln, err := newLossNet()
	if err != nil {
		r.Notes = append(r.Notes, "loss-degradation: loss injected in user space at each receiving socket, not by the kernel: no veth link with the BPF injector here: "+err.Error())
		ln = nil
	} else {
		defer ln.close()
		c.Net = ln.peersNet()
		tcp := "a second one, loaded for TCP, drops the same fraction of TCP segments (TSO/GSO off on the link: one segment per drop)"
		if !ln.tcpLoss() {
			tcp = "TCP crosses unharmed (no TCP injector here), so TCP runs at 0 % only"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("loss-degradation: every row crosses one veth pair between two network namespaces; a BPF tc program (%v) on the egress of each end drops the row's fraction of every IPv4/UDP datagram, whichever peer sent it; %s", ln.mode, tcp))
	}
	for _, d := range drops {
		if ln != nil {
			if err := ln.set(d); err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("loss-degradation: %g %% not run: injector: %v", d*100, err))
				continue
			}
		}
		var rows []harness.Result
		for _, p := range LossPeers() {
			note := lossCount(ln)
			res := harness.Throughput(p, c, 144, -1, d)
			res.Workload = "loss-degradation"
			if res.Skipped == "" {
				res.Note = strings.TrimSpace(res.Note + " " + note())
			}
			rows = append(rows, res)
			o.logf("loss %4.0f%% %-16s %5.1f %% in order %9.0f rec/s %.2f retx/rec p99 %.2f ms\n", d*100, p.Name, res.DeliveredPct, res.RecPerS, res.RetransPerRec, float64(res.Latency.P99)/1e6)
		}
		for _, row := range []struct {
			name string
			rate float64
		}{{"casting", CastingLossRate}, {"casting-unpaced", 0}} {
			note := lossCount(ln)
			res := castingLossRow(o, ln, row.name, d, row.rate)
			if res.Skipped == "" {
				res.Note = strings.TrimSpace(res.Note + "; " + note())
			}
			rows = append(rows, res)
			o.logf("loss %4.0f%% %-16s %5.1f %% in order %9.0f rec/s %.2f retx/rec p99 %.2f ms\n", d*100, row.name, res.DeliveredPct, res.RecPerS, res.RetransPerRec, float64(res.Latency.P99)/1e6)
		}
		r.Results = append(r.Results, rows...)
	}
}

// lossCount starts counting a row's injected loss; the function it
// returns says what the link's injectors dropped since ("" without one).
func lossCount(ln *lossNet) func() string {
	if ln == nil {
		return func() string { return "" }
	}
	ab, ba := ln.counters()
	return func() string { return ln.injected(ab, ba) }
}

// runClassic reruns the classic tools' experiments: `sender` RTT with
// the receiver dropping DATA at each rate, and `bandwidth` with
// 1427-byte payloads, for stop-and-wait and casting side by side.
func runClassic(o Options, r *report.Report) {
	drops := ClassicDrops
	if o.Quick {
		drops = []float64{0, 0.25}
	}
	c := o.cfg()
	c.Warmup = min(c.Warmup, 20)
	c.N = min(c.N, 500)
	for _, d := range drops {
		for _, p := range classicPeers() {
			res := harness.Classic(p, c, d)
			r.Results = append(r.Results, res)
			o.logf("classic sender %-16s drop %2.0f%% n %4d p50 %8.1f µs p99 %9.1f µs retx/rec %.2f\n", p.Name, d*100, res.Latency.N, float64(res.Latency.P50)/1e3, float64(res.Latency.P99)/1e3, res.RetransPerRec)
		}
		r.Results = append(r.Results, castingClassic(o, r, d)...)
	}
	var bw []harness.Result
	for _, p := range []peers.Peer{LatencyPeers()[0], classicPeers()[0]} {
		res := harness.Throughput(p, o.cfg(), 1427, o.TputN, 0)
		res.Workload = "classic-bw"
		res.Note = strings.TrimSpace(res.Note + fmt.Sprintf(" %.0f Mbit/s", res.Gbps*1000))
		bw = append(bw, res)
		o.logf("classic bandwidth %-16s %.0f Mbit/s\n", p.Name, res.Gbps*1000)
	}
	bw = append(bw, castingBandwidth(o, r)...)
	compare(bw, "raw-udp")
	r.Results = append(r.Results, bw...)
}

// lossDrain is how long every reliable row of loss-degradation may take
// after its last send to finish repairing (it ends early when done).
func lossDrain(o Options) time.Duration { return max(o.LossTime, 1500*time.Millisecond) }

func unavailable(r *report.Report, w, why string) {
	r.Unavailable = append(r.Unavailable, report.Unavailable{Workload: w, Why: why})
}
