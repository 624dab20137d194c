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

	g1 := "casting-udp p50 RTT ≤ 1.05× raw UDP and below every peer except raw UDP"
	c, cok := r.Find("rtt", "casting-udp/datapath", 0, 0)
	floor, fok := r.Find("rtt", "raw-udp/datapath", 0, 0)
	if !cok || !fok {
		c, cok = r.Find("rtt", "casting-udp", 0, 0)
		floor, fok = r.Find("rtt", "raw-udp", 0, 0)
	}
	if cok && fok && floor.Latency.P50 > 0 {
		ratio := float64(c.Latency.P50) / float64(floor.Latency.P50)
		beaten := ""
		for _, x := range r.Workload("rtt") {
			if x.Skipped != "" || strings.HasPrefix(x.Name, "casting") || strings.HasPrefix(x.Name, "raw-udp") {
				continue
			}
			if x.Latency.P50 <= c.Latency.P50 {
				beaten += " " + x.Name
			}
		}
		d := fmt.Sprintf("%s p50 %.1f µs = %.2f× %s (%.1f µs, same loop)", c.Name, float64(c.Latency.P50)/1e3, ratio, floor.Name, float64(floor.Latency.P50)/1e3)
		if s, ok := r.Find("rtt", "casting-udp", 0, 0); ok && c.Name != "casting-udp" {
			if f, ok := r.Find("rtt", "raw-udp", 0, 0); ok && f.Latency.P50 > 0 {
				d += fmt.Sprintf("; the suite's casting-udp row: %.2f× its raw-udp", float64(s.Latency.P50)/float64(f.Latency.P50))
			}
		}
		if beaten != "" {
			d += "; peers at or below casting:" + beaten
		}
		gs = append(gs, report.Goal{Text: g1, Status: status(ratio <= 1.05 && beaten == ""), Detail: d})
	} else {
		notMeasured(g1, "no casting-udp and raw-udp rtt rows from the same loop")
	}

	g2 := "casting-mmsg throughput ≥ 0.75× raw GSO/GRO (WAL on)"
	if c, ok := r.Find("throughput", "casting-mmsg+wal/datapath", 144, 0); ok {
		if f, fok := r.Find("throughput", "raw-gso-gro/datapath", 144, 0); fok && f.RecPerS > 0 {
			ratio := c.RecPerS / f.RecPerS
			d := fmt.Sprintf("%.2f× at 144 B (%.0f vs %.0f rec/s)", ratio, c.RecPerS, f.RecPerS)
			ok := ratio >= 0.75
			if c2, ok2 := r.Find("throughput", "casting-mmsg+wal/datapath", 1443, 0); ok2 {
				if f2, fok2 := r.Find("throughput", "raw-gso-gro/datapath", 1443, 0); fok2 && f2.RecPerS > 0 {
					r2 := c2.RecPerS / f2.RecPerS
					d += fmt.Sprintf(", %.2f× at 1443 B", r2)
					ok = ok && r2 >= 0.75
				}
			}
			gs = append(gs, report.Goal{Text: g2, Status: status(ok), Detail: d})
		} else {
			notMeasured(g2, "no raw GSO/GRO floor row")
		}
	} else {
		notMeasured(g2, "casting-mmsg throughput row not available")
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
