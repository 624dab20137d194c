package suite

import (
	"testing"
	"time"

	"github.com/walcast/walcast/bench/harness"
)

func TestQuickAll(t *testing.T) {
	cfg := harness.DefaultConfig()
	cfg.Warmup, cfg.N, cfg.Budget = 50, 300, time.Second
	for _, p := range LatencyPeers() {
		r := harness.RTT(p, cfg, 0)
		t.Logf("rtt %-14s n=%d p50=%d p99=%d lost=%d %s", p.Name, r.Latency.N, r.Latency.P50, r.Latency.P99, r.Lost, r.Note)
		o := harness.OneWay(p, cfg)
		t.Logf("ow  %-14s n=%d p50=%d p99=%d lost=%d %s", p.Name, o.Latency.N, o.Latency.P50, o.Latency.P99, o.Lost, o.Note)
	}
	for _, p := range ThroughputPeers() {
		r := harness.Throughput(p, cfg, 144, 20000, 0)
		t.Logf("tp  %-14s sent=%d got=%d rec/s=%.0f %.2f Gbps %s", p.Name, r.Sent, r.Delivered, r.RecPerS, r.Gbps, r.Note)
	}
	for _, p := range LossPeers() {
		r := harness.Throughput(p, cfg, 144, -1, 0.1)
		t.Logf("loss %-14s sent=%d got=%d %.1f%% rec/s=%.0f rt/rec=%.2f %s", p.Name, r.Sent, r.Delivered, r.DeliveredPct, r.RecPerS, r.RetransPerRec, r.Note)
	}
}
