package benchkit

import (
	"testing"

	"github.com/walcast/walcast/affinity"
)

// The RTT runners as Go benchmarks, for profiling one round trip:
//
//	go test -run '^$' -bench 'RTT/casting-udp/spin' -benchtime 50000x -cpuprofile /tmp/cpu.out ./internal/benchkit
//
// b.N is the number of measured round trips; p50 and p99 are reported as
// metrics (ns). Run under the bench lock.
func BenchmarkRTT(b *testing.B) {
	runners := []struct {
		name string
		run  func(RTTConfig) (Row, error)
	}{
		{"floor", RTTFloor}, {"raw-udp", RTTRawUDP}, {"casting-udp", RTTCasting}, {"casting-mmsg", RTTCastingMmsg},
	}
	for _, r := range runners {
		for _, mode := range []affinity.Strategy{affinity.Spin, affinity.Park} {
			b.Run(r.name+"/"+mode.String(), func(b *testing.B) {
				c := DefaultRTTConfig()
				c.N, c.Warmup, c.Mode = b.N, min(b.N/10, 10_000), mode
				b.ResetTimer()
				row, err := r.run(c)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(row.Latency.P50), "p50-ns")
				b.ReportMetric(float64(row.Latency.P99), "p99-ns")
			})
		}
	}
}
