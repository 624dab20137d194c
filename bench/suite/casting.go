package suite

import (
	"strings"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/saw"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wal"
)

// The casting rows of rtt and throughput come from the runners the
// datapath package exports in internal/benchkit (RTTRawUDP, RTTCasting,
// ThroughputRaw, ThroughputCasting); this file only calls them and
// converts their rows. The rows of loss-degradation, classic and the rtt
// row "casting-udp" are wired in castrun_linux.go from cast.Loop,
// cast.Consumer, datapath/drop and wal.Writer.

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

// castingRTT runs the datapath package's own pair — raw UDP and casting
// over datapath/udp in the same loop, threads and pins — next to the
// suite's rows.
func castingRTT(o Options, r *report.Report) []harness.Result {
	var out []harness.Result
	size := o.Harness.Payload + wal.HeaderSize
	row, err := benchkit.RTTRawUDP(rttConfig(o))
	if err != nil {
		out = append(out, failed("rtt", "raw-udp/datapath", size, err))
	} else {
		row.Name = "raw-udp/datapath"
		out = append(out, fromRow(row, size))
	}
	row, err = benchkit.RTTCasting(rttConfig(o))
	if err != nil {
		out = append(out, failed("rtt", "casting-udp/datapath", size, err))
	} else {
		row.Name = "casting-udp/datapath"
		row.Note = strings.TrimSpace(row.Note + " (the datapath package's runner; its floor is raw-udp/datapath)")
		out = append(out, fromRow(row, size))
	}
	return out
}

func castingThroughput(o Options, r *report.Report, size int) []harness.Result {
	var out []harness.Result
	tc := func(gso bool) benchkit.ThroughputConfig {
		c := benchkit.DefaultThroughputConfig()
		c.Size, c.GSO, c.GRO = size, gso, gso
		c.Duration = min(o.Harness.Budget, 2*time.Second)
		c.CPUs = [2]int{o.Harness.ClientCPU, o.Harness.ServerCPU}
		return c
	}
	add := func(name string, row benchkit.Row, err error) {
		if err != nil {
			out = append(out, failed("throughput", name, size, err))
			return
		}
		row.Name = name
		res := fromRow(row, size)
		res.Sent, res.Delivered, res.DeliveredPct = row.Records, row.Records, 100
		out = append(out, res)
	}
	row, err := benchkit.ThroughputRaw(tc(false))
	add("raw-sendmmsg/datapath", row, err)
	row, err = benchkit.ThroughputRaw(tc(true))
	add("raw-gso-gro/datapath", row, err)
	// casting over mmsg (GSO/GRO as the path offers), WAL on and off: the
	// datapath package's runner, the same loop as its raw floors.
	row, err = benchkit.ThroughputCasting(tc(true), true, false)
	add("casting-mmsg+wal/datapath", row, err)
	row, err = benchkit.ThroughputCasting(tc(true), false, false)
	add("casting-mmsg/datapath", row, err)
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
