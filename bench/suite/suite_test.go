package suite

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walcast/walcast/bench/harness"
	"github.com/walcast/walcast/bench/report"
)

func quick(t *testing.T, workloads ...string) *report.Report {
	t.Helper()
	o := QuickOptions()
	o.Workloads = workloads
	o.Dir = t.TempDir()
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Probes) == 0 {
		t.Fatal("no probe matrix")
	}
	return r
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// sane checks what every measured row must satisfy, whatever the timing.
func sane(t *testing.T, x harness.Result) {
	t.Helper()
	if x.Skipped != "" {
		if x.Note == "" {
			t.Errorf("%s/%s skipped without saying why", x.Workload, x.Name)
		}
		return
	}
	l := x.Latency
	if l.N > 0 && !(l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Errorf("%s/%s percentiles out of order: %+v", x.Workload, x.Name, l)
	}
	for _, v := range []float64{x.RatioP50, x.RatioP99, x.RatioTput, x.RecPerS, x.Gbps, x.RetransPerRec, x.DeliveredPct, l.Mean} {
		if !finiteNonNeg(v) {
			t.Errorf("%s/%s: non-finite or negative figure in %+v", x.Workload, x.Name, x.Row)
		}
	}
	if x.Delivered > x.Sent {
		t.Errorf("%s/%s delivered %d of %d sent", x.Workload, x.Name, x.Delivered, x.Sent)
	}
}

func byName(r *report.Report, w string) map[string]harness.Result {
	m := map[string]harness.Result{}
	for _, x := range r.Workload(w) {
		m[x.Name] = x
	}
	return m
}

func TestRTT(t *testing.T) {
	r := quick(t, "rtt")
	rs := byName(r, "rtt")
	for _, p := range LatencyPeers() {
		x, ok := rs[p.Name]
		if !ok {
			t.Fatalf("no rtt row for %s", p.Name)
		}
		sane(t, x)
		if p.Skip != "" {
			if x.Skipped == "" {
				t.Errorf("%s should be skipped: %s", p.Name, p.Skip)
			}
			continue
		}
		if x.Latency.N == 0 || int64(x.Latency.N) != x.Records || x.Records+x.Lost != x.Sent {
			t.Errorf("%s: n %d records %d lost %d sent %d", p.Name, x.Latency.N, x.Records, x.Lost, x.Sent)
		}
		if p.Reliable && x.Lost != 0 {
			t.Errorf("%s lost %d round trips without loss", p.Name, x.Lost)
		}
		if x.Floor != "raw-udp" || x.RatioP50 <= 0 {
			t.Errorf("%s: ratio %v to %q", p.Name, x.RatioP50, x.Floor)
		}
		if len(x.Curve) != len(harness.Quantiles) {
			t.Errorf("%s: curve of %d points", p.Name, len(x.Curve))
		}
	}
	if rs["raw-udp"].RatioP50 != 1 {
		t.Errorf("floor ratio %v", rs["raw-udp"].RatioP50)
	}
}

func TestOneWay(t *testing.T) {
	r := quick(t, "oneway")
	for _, x := range r.Workload("oneway") {
		sane(t, x)
		if x.Skipped == "" && (x.Latency.N == 0 || x.Records != int64(x.Latency.N)) {
			t.Errorf("%s: %+v", x.Name, x.Row)
		}
	}
}

func TestThroughput(t *testing.T) {
	r := quick(t, "throughput")
	rs := r.Workload("throughput")
	if len(rs) < 2*len(ThroughputPeers()) {
		t.Fatalf("%d rows", len(rs))
	}
	for _, x := range rs {
		sane(t, x)
		if x.Skipped != "" {
			continue
		}
		if x.RecPerS <= 0 || x.Delivered == 0 {
			t.Errorf("%s %d B: nothing delivered: %+v", x.Name, x.Size, x.Row)
		}
	}
}

func TestLossDegradation(t *testing.T) {
	r := quick(t, "loss-degradation")
	rs := r.Workload("loss-degradation")
	if len(rs) == 0 {
		t.Fatal("no rows")
	}
	// As root every row crosses the veth link and its BPF injector drops
	// the row's fraction whoever the peer is; TCP, which it cannot drop,
	// is not run at loss and says so.
	onLink := os.Geteuid() == 0
	if onLink && !strings.Contains(strings.Join(r.Notes, " "), "veth pair") {
		t.Errorf("root, but the rows did not cross the veth link: %q", r.Notes)
	}
	tcpLoss := strings.Contains(strings.Join(r.Notes, " "), "drops the same fraction of TCP segments")
	for _, x := range rs {
		sane(t, x)
		if x.Name == "tcp-nodelay" && x.Drop > 0 && (x.Skipped == "") != tcpLoss {
			t.Errorf("tcp-nodelay at %v loss: skipped %q, though the link drops TCP: %v", x.Drop, x.Skipped, tcpLoss)
		}
		if x.Skipped != "" {
			continue
		}
		if onLink && !strings.Contains(x.Note, "BPF tc injector") {
			t.Errorf("%s at %v: no injector count in %q", x.Name, x.Drop, x.Note)
		}
		if x.Sent == 0 || x.Delivered == 0 {
			t.Errorf("%s at %v: sent %d delivered %d", x.Name, x.Drop, x.Sent, x.Delivered)
		}
		// Reliable peers deliver everything they were given time for.
		if x.Name == "kcp-turbo" || x.Name == "quic-stream" || x.Name == "stop-and-wait" || x.Name == "casting" || (x.Name == "tcp-nodelay" && x.Drop == 0) {
			if x.Delivered != x.Sent {
				t.Errorf("%s at %v: %d of %d in order", x.Name, x.Drop, x.Delivered, x.Sent)
			}
		}
		// Every delivered row says how much came over UDP and how long
		// send → delivery took at p99.
		if x.OverUDPPct == nil || *x.OverUDPPct < 0 || *x.OverUDPPct > 100 || x.Latency.N == 0 || x.Latency.P99 <= 0 {
			t.Errorf("%s at %v: over UDP %v, one-way %+v", x.Name, x.Drop, x.OverUDPPct, x.Latency)
		}
		if x.Drop > 0 && x.Name == "stop-and-wait" && x.RetransPerRec == 0 && x.Sent > 20 {
			t.Errorf("stop-and-wait at %v: no retransmission", x.Drop)
		}
	}
}

func TestClassic(t *testing.T) {
	r := quick(t, "classic")
	if len(r.Workload("classic-rtt")) == 0 || len(r.Workload("classic-bw")) == 0 {
		t.Fatal("missing classic rows")
	}
	for _, x := range append(r.Workload("classic-rtt"), r.Workload("classic-bw")...) {
		sane(t, x)
		if x.Skipped == "" && x.Workload == "classic-rtt" && len(x.Series) != x.Latency.N {
			t.Errorf("series %d for n %d", len(x.Series), x.Latency.N)
		}
	}
}

func TestLossRecovery(t *testing.T) {
	r := quick(t, "loss-recovery")
	rs := byName(r, "loss-recovery")
	for _, n := range []string{"casting-udp-hot", "casting-udp-cold"} {
		x, ok := rs[n]
		if !ok {
			// A loaded machine can stall the cold path past the reorder
			// window (Reconnect); the workload then says so instead.
			t.Logf("no %s row: %+v", n, r.Unavailable)
			continue
		}
		sane(t, x)
		if x.Latency.N == 0 || x.Delivered > x.Sent {
			t.Errorf("%s: %+v", n, x.Row)
		}
	}
	if len(rs)+len(r.Unavailable) < 2 {
		t.Fatalf("rows %v, unavailable %v", rs, r.Unavailable)
	}
	for _, u := range r.Unavailable {
		if u.Why == "" {
			t.Errorf("%s unavailable without a reason", u.Workload)
		}
	}
	for _, g := range r.Goals {
		if g.Status == "" || g.Detail == "" {
			t.Errorf("goal %+v", g)
		}
	}
}

func TestReportFiles(t *testing.T) {
	r := quick(t, "rtt", "classic")
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	var back report.Report
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || len(back.Probes) == 0 {
		t.Fatalf("results.json: %d results, %d probes", len(back.Results), len(back.Probes))
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, s := range []string{"Probe matrix", "raw-udp", "stop-and-wait", "goals"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report.md lacks %q", s)
		}
	}
	if len(r.Plots) < 3 {
		t.Fatalf("plots %v (%v)", r.Plots, r.Notes)
	}
	for _, p := range r.Plots {
		st, err := os.Stat(filepath.Join(dir, p))
		if err != nil || st.Size() < 1000 {
			t.Errorf("plot %s: %v", p, err)
		}
	}
	var txt strings.Builder
	r.Text(&txt)
	if !strings.Contains(txt.String(), "GSO") {
		t.Error("stdout table lacks the probe matrix")
	}
}

func TestWAL(t *testing.T) {
	r := quick(t, "wal")
	rs := byName(r, "wal")
	for _, n := range []string{"append", "flush-1000", "cold-read-2k", "raw-pread-2k", "cold-read-20k", "replay"} {
		x, ok := rs[n]
		if !ok {
			t.Fatalf("no %s row (unavailable: %+v)", n, r.Unavailable)
		}
		sane(t, x)
		if x.Records == 0 {
			t.Errorf("%s: no records", n)
		}
	}
	if rs["cold-read-2k"].Floor != "raw-pread-2k" || rs["cold-read-2k"].RatioP50 <= 0 {
		t.Errorf("cold read not compared with raw pread: %+v", rs["cold-read-2k"].Row)
	}
	if rs["replay"].Records != 20000 { // the log holds exactly what was appended
		t.Errorf("replay read %d records", rs["replay"].Records)
	}
}

func TestOutage(t *testing.T) {
	r := quick(t, "outage")
	rs := r.Workload("outage")
	if len(rs) != 2 {
		t.Fatalf("%d outage rows (unavailable: %+v)", len(rs), r.Unavailable)
	}
	for _, x := range rs {
		sane(t, x)
		if x.Delivered != 2000 || x.Seconds <= 0 || x.RecPerS <= 0 {
			t.Errorf("%s: %+v", x.Name, x.Row)
		}
	}
}

func TestFanoutWorkload(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("fan-out needs root for network namespaces (CI runs as root)")
	}
	r := quick(t, "fan-out")
	names := map[string]bool{}
	for _, x := range r.Results {
		if x.Workload != "fan-out" {
			continue
		}
		sane(t, x)
		names[x.Name] = true
		if x.Skipped == "" && (x.DeliveredPct != 100 || !strings.Contains(x.Note, "datagrams/record")) {
			t.Errorf("%s: delivered %.1f %%, note %q", x.Name, x.DeliveredPct, x.Note)
		}
	}
	for _, want := range []string{"casting-unicast-1", "casting-multicast-3", "casting-unicast-3", "moldudp64-multicast-3", "moldudp64-multicast-group-3"} {
		if !names[want] {
			t.Errorf("no %s row (have %v)", want, names)
		}
	}
}
