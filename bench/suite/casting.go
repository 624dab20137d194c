package suite

import (
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/saw"
	"github.com/walcast/walcast/bench/report"
	"github.com/walcast/walcast/internal/benchkit"
	"github.com/walcast/walcast/wire"
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

// castingRTT runs the floor and the datapath package's rows: the minimal
// raw loop (floor-loop, no code of ours), raw UDP over datapath/udp (the
// datapath's cost) and casting over udp and mmsg (the protocol's), every
// one of them compared with floor-loop of the same run.
func castingRTT(o Options, r *report.Report) []harness.Result {
	var out []harness.Result
	size := o.Harness.Payload + wire.HeaderSize
	floorRow, ferr := benchkit.RTTFloor(rttConfig(o))
	if ferr != nil {
		out = append(out, failed("rtt", "floor-loop", size, ferr))
	} else {
		out = append(out, fromRow(floorRow, size))
	}
	for _, x := range []struct {
		name string
		run  func(benchkit.RTTConfig) (benchkit.Row, error)
	}{
		{"raw-udp/datapath", benchkit.RTTRawUDP},
		{"casting-udp/datapath", benchkit.RTTCasting},
		{"casting-mmsg/datapath", benchkit.RTTCastingMmsg},
	} {
		row, err := x.run(rttConfig(o))
		if err != nil {
			out = append(out, failed("rtt", x.name, size, err))
			continue
		}
		row.Name = x.name
		if ferr == nil {
			row.CompareTo(floorRow)
		}
		out = append(out, fromRow(row, size))
	}
	return out
}

// castingThroughput runs the floors — raw GSO/GRO (floor-gso-gro), raw
// O_DIRECT writes (floor-odirect) and the WAL alone —, the bound
// floor+frame (the floor plus the wire format's per-record copy and
// CRC), and the datapath package's rows: raw sendmmsg and GSO/GRO over datapath/mmsg, and
// casting over mmsg with the WAL off and on. Rows without the WAL are
// compared with floor-gso-gro, rows with it with the slower of
// floor-gso-gro and floor-odirect.
func castingThroughput(o Options, r *report.Report, size int) []harness.Result {
	var out []harness.Result
	tc := func(gso bool) benchkit.ThroughputConfig {
		c := benchkit.DefaultThroughputConfig()
		c.Size, c.GSO, c.GRO = size, gso, gso
		c.Duration = min(o.Harness.Budget, 2*time.Second)
		c.CPUs = [2]int{o.Harness.ClientCPU, o.Harness.ServerCPU}
		c.Dir = o.Dir
		return c
	}
	var net, slow *benchkit.Row
	add := func(name string, row benchkit.Row, err error, vs *benchkit.Row) *benchkit.Row {
		if err != nil {
			out = append(out, failed("throughput", name, size, err))
			return nil
		}
		row.Name = name
		if vs != nil {
			row.CompareTo(*vs)
		}
		res := fromRow(row, size)
		res.Sent, res.Delivered, res.DeliveredPct = row.Records, row.Records, 100
		out = append(out, res)
		return &row
	}
	row, err := benchkit.ThroughputFloor(tc(true))
	net = add("floor-gso-gro", row, err, nil)
	// The bound right after its floor: the floor plus the wire format's
	// own copy and CRC per record.
	row, err = benchkit.ThroughputFloorFrame(tc(true))
	add("floor+frame", row, err, net)
	row, err = benchkit.DiskFloor(tc(true).Dir, size, tc(true).Duration)
	disk := add("floor-odirect", row, err, net)
	slow = net
	if disk != nil && (slow == nil || disk.RecPerS < slow.RecPerS) {
		slow = disk
	}
	row, err = benchkit.WALAlone(tc(true))
	add("wal-alone", row, err, disk)
	row, err = benchkit.ThroughputRaw(tc(false))
	add("raw-sendmmsg/datapath", row, err, net)
	row, err = benchkit.ThroughputRaw(tc(true))
	add("raw-gso-gro/datapath", row, err, net)
	// casting over mmsg (GSO/GRO as the path offers), WAL on and off: the
	// datapath package's runner, the same loop as its raw floors.
	row, err = benchkit.ThroughputCasting(tc(true), true, false)
	add("casting-mmsg+wal/datapath", row, err, slow)
	row, err = benchkit.ThroughputCasting(tc(true), false, false)
	add("casting-mmsg/datapath", row, err, net)
	return out
}

// CastingLossRate is the offered rate of the paced casting row of the
// loss-degradation workload, records/s.
const CastingLossRate = 20_000

func castingClassic(o Options, r *report.Report, drop float64) []harness.Result {
	c := o.cfg()
	c.Warmup, c.N = min(c.Warmup, 20), min(c.N, 500)
	return []harness.Result{castingPing(o, "classic-rtt", c, drop*100)}
}

func castingBandwidth(o Options, r *report.Report) []harness.Result {
	return []harness.Result{castingTput(o, "classic-bw", "casting-udp", "udp", 1427, true)}
}
