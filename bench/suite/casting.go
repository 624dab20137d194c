package suite

import (
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/saw"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wal"
)

// The casting rows come from the runners the datapath, wal and replay
// packages export in internal/benchkit; this file only calls them and
// converts their rows. A runner that is not on main yet is reported as
// not available, with the reason.

func classicPeers() []peers.Peer { return []peers.Peer{saw.Peer()} }

// fromRow wraps a benchkit row, synthesising the percentile curve from
// its summary (the runners keep exact samples, not a histogram).
func fromRow(row benchkit.Row, size int) harness.Result {
	res := harness.Result{Row: row, Size: size, Pinned: true}
	if l := row.Latency; l.N > 0 {
		res.Curve = []harness.Point{{Q: 0, NS: l.Min}, {Q: 50, NS: l.P50}, {Q: 90, NS: l.P90}, {Q: 99, NS: l.P99}, {Q: 99.9, NS: l.P999}, {Q: 100, NS: l.Max}}
	}
	return res
}

func failed(workload, name string, size int, err error) harness.Result {
	return harness.Result{Row: benchkit.Row{Workload: workload, Name: name, Note: "failed: " + err.Error()}, Size: size, Skipped: err.Error()}
}

func rttConfig(o Options) benchkit.RTTConfig {
	c := benchkit.DefaultRTTConfig()
	c.Size = o.Harness.Payload + 16 // one record frame: 16-byte header + payload
	c.N, c.Warmup = o.Harness.N, o.Harness.Warmup
	c.Mode = affinity.Spin
	c.CPUs = [2]int{o.Harness.ClientCPU, o.Harness.ServerCPU}
	return c
}

// castingRTT runs the datapath package's own raw-UDP floor (its loop,
// its threads) and, once it is on main, casting over udp in the same
// loop.
func castingRTT(o Options, r *report.Report) []harness.Result {
	var out []harness.Result
	row, err := benchkit.RTTRawUDP(rttConfig(o))
	if err != nil {
		out = append(out, failed("rtt", "raw-udp/datapath", o.Harness.Payload+16, err))
	} else {
		row.Name = "raw-udp/datapath"
		out = append(out, fromRow(row, o.Harness.Payload+16))
	}
	return out
}

func castingThroughput(o Options, r *report.Report, size int) []harness.Result {
	var out []harness.Result
	for _, gso := range []bool{false, true} {
		c := benchkit.DefaultThroughputConfig()
		c.Size, c.GSO, c.GRO = size, gso, gso
		c.Duration = min(o.Harness.Budget, 2*time.Second)
		c.CPUs = [2]int{o.Harness.ClientCPU, o.Harness.ServerCPU}
		row, err := benchkit.ThroughputRaw(c)
		name := map[bool]string{false: "raw-sendmmsg/datapath", true: "raw-gso-gro/datapath"}[gso]
		if err != nil {
			out = append(out, failed("throughput", name, size, err))
			continue
		}
		row.Name = name
		res := fromRow(row, size)
		res.Sent, res.Delivered, res.DeliveredPct = row.Records, row.Records, 100
		out = append(out, res)
	}
	// casting over mmsg with this suite's cast.Loop wiring (the datapath
	// package exports no casting throughput runner yet).
	out = append(out,
		castingTput(o, "throughput", "casting-mmsg", "mmsg", size-wal.HeaderSize, true),
		castingTput(o, "throughput", "casting-mmsg-nowal", "mmsg", size-wal.HeaderSize, false))
	return out
}

// CastingLossRate is the offered rate of the paced casting row of the
// loss-degradation workload, records/s.
const CastingLossRate = 20_000

func castingLoss(o Options, r *report.Report, drop float64) []harness.Result {
	return []harness.Result{
		castingLossRow(o, "casting", drop, CastingLossRate),
		castingLossRow(o, "casting-unpaced", drop, 0),
	}
}

func castingClassic(o Options, r *report.Report, drop float64) []harness.Result {
	c := o.cfg()
	c.Warmup, c.N = min(c.Warmup, 20), min(c.N, 500)
	return []harness.Result{castingPing(o, "classic-rtt", c, drop*100)}
}

func castingBandwidth(o Options, r *report.Report) []harness.Result {
	return []harness.Result{castingTput(o, "classic-bw", "casting-udp", "udp", 1427, true)}
}

func runLossRecovery(o Options, r *report.Report) {
	unavailable(r, "loss-recovery", "needs a casting runner that injects one gap and times detect→deliver (hot ring vs cold WAL); not on main yet")
}
