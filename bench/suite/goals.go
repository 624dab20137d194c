package suite

import (
	"fmt"
	"strings"

	"github.com/walcast/walcast/bench/report"
)

// Goals checks the README's claims against this run. A goal whose rows
// were not measured says so; it is never reported as met.
func Goals(r *report.Report) []report.Goal {
	var gs []report.Goal
	notMeasured := func(text, why string) {
		gs = append(gs, report.Goal{Text: text, Status: "not measured", Detail: why})
	}
	status := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}

	g1 := "casting-udp RTT ≤ 1.05× the minimal raw loop at p50 and ≤ 1.2× at p99 (spin), and below every peer except raw UDP"
	c, cok := r.Find("rtt", "casting-udp/datapath", 0, 0)
	floor, fok := r.Find("rtt", "floor-loop", 0, 0)
	if cok && fok && floor.Latency.P50 > 0 && floor.Latency.P99 > 0 {
		r50 := float64(c.Latency.P50) / float64(floor.Latency.P50)
		r99 := float64(c.Latency.P99) / float64(floor.Latency.P99)
		beaten := ""
		for _, x := range r.Workload("rtt") {
			if x.Skipped != "" || strings.HasPrefix(x.Name, "casting") || strings.HasPrefix(x.Name, "raw-udp") || strings.HasPrefix(x.Name, "floor") {
				continue
			}
			if x.Latency.P50 <= c.Latency.P50 {
				beaten += " " + x.Name
			}
		}
		d := fmt.Sprintf("%s p50 %.1f µs = %.2f×, p99 %.1f µs = %.2f× floor-loop (%.1f / %.1f µs, same run)", c.Name,
			float64(c.Latency.P50)/1e3, r50, float64(c.Latency.P99)/1e3, r99, float64(floor.Latency.P50)/1e3, float64(floor.Latency.P99)/1e3)
		if beaten != "" {
			d += "; peers at or below casting:" + beaten
		}
		gs = append(gs, report.Goal{Text: g1, Status: status(r50 <= 1.05 && r99 <= 1.2 && beaten == ""), Detail: d})
	} else {
		notMeasured(g1, "no casting-udp/datapath and floor-loop rtt rows from the same run")
	}

	// The throughput goal: at 144 B against the slower of the network
	// and the WAL alone; at 1443 B against the slower of the network and
	// raw O_DIRECT writes of the same bytes.
	g2 := "casting-mmsg + WAL ≥ 0.75× min(floor-gso-gro, wal-alone) at 144 B and ≥ 0.75× min(floor-gso-gro, floor-odirect) at 1443 B"
	var parts []string
	met, measured := true, 0
	for _, x := range []struct {
		size int
		disk string
	}{{144, "wal-alone"}, {1443, "floor-odirect"}} {
		c, ok := r.Find("throughput", "casting-mmsg+wal/datapath", x.size, 0)
		n, nok := r.Find("throughput", "floor-gso-gro", x.size, 0)
		d, dok := r.Find("throughput", x.disk, x.size, 0)
		if !ok || !nok || !dok || n.RecPerS <= 0 || d.RecPerS <= 0 {
			continue
		}
		measured++
		bound, name := n.RecPerS, n.Name
		if d.RecPerS < bound {
			bound, name = d.RecPerS, d.Name
		}
		ratio := c.RecPerS / bound
		met = met && ratio >= 0.75
		parts = append(parts, fmt.Sprintf("%.2f× at %d B (%.0f vs %s %.0f rec/s)", ratio, x.size, c.RecPerS, name, bound))
	}
	if measured == 2 {
		gs = append(gs, report.Goal{Text: g2, Status: status(met), Detail: strings.Join(parts, ", ")})
	} else {
		notMeasured(g2, "casting-mmsg+wal/datapath and its floors not measured at both sizes")
	}

	g3 := "casting delivers in order through 50 % loss"
	if c, ok := r.Find("loss-degradation", "casting", 144, 0.5); ok {
		d := fmt.Sprintf("%.2f %% of %d records in order at 50 %% loss each way, offered %d rec/s", c.DeliveredPct, c.Sent, CastingLossRate)
		if i := strings.Index(c.Note, "delivered "); i >= 0 {
			d += " (" + strings.SplitN(c.Note[i:], ";", 2)[0] + ")"
		}
		gs = append(gs, report.Goal{Text: g3, Status: status(c.DeliveredPct >= 99.999), Detail: d})
	} else {
		notMeasured(g3, "casting loss-degradation rows not available")
	}

	g4 := "WAL cold read flat in WAL size (1 M within 1.5× of 10 K)"
	small, sok := r.Find("wal", "cold-read-10k", 0, 0)
	big, bok := r.Find("wal", "cold-read-1m", 0, 0)
	if sok && bok && small.Latency.P50 > 0 {
		ratio := float64(big.Latency.P50) / float64(small.Latency.P50)
		gs = append(gs, report.Goal{Text: g4, Status: status(ratio <= 1.5), Detail: fmt.Sprintf("p50 1 M / 10 K = %.2f×", ratio)})
	} else {
		notMeasured(g4, "wal cold-read rows not available")
	}

	g5 := "outage: a 52 501-record gap caught up over TLS in ≤ 0.25 s, flat in WAL size"
	a, aok := r.Find("outage", "catch-up-52501-of-62501", 0, 0)
	b, bok := r.Find("outage", "catch-up-52501-of-552501", 0, 0)
	if aok && bok {
		ok := a.Seconds <= 0.25 && b.Seconds <= 0.25 && b.Seconds <= 1.5*a.Seconds
		gs = append(gs, report.Goal{Text: g5, Status: status(ok), Detail: fmt.Sprintf("%.3f s in a 62 501-record WAL, %.3f s in a 552 501-record WAL (catch-up only; the UDP escalation is not measured)", a.Seconds, b.Seconds)})
	} else {
		notMeasured(g5, "outage catch-up rows not available")
	}
	return gs
}
