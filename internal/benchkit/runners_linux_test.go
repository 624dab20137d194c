package benchkit

import (
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
)

// The runners are exercised at a tiny scale: they must complete, measure
// every ping and deliver frames. No timing is asserted.
func TestRTTRunners(t *testing.T) {
	for _, mode := range []affinity.Strategy{affinity.Spin, affinity.Park} {
		c := DefaultRTTConfig()
		c.N, c.Warmup, c.Mode, c.CPUs = 300, 20, mode, [2]int{-1, -1}
		r, err := RTTRawUDP(c)
		if err != nil {
			t.Fatal(mode, err)
		}
		if r.Latency.N != 300 || r.Latency.P50 <= 0 || r.Name != "raw-udp" || r.Mode != mode.String() {
			t.Fatalf("%v: %+v", mode, r)
		}
	}
	c := DefaultRTTConfig()
	c.N, c.Warmup = 200, 10
	r, err := RTTGoNet(c)
	if err != nil || r.Latency.N != 200 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestThroughputRaw(t *testing.T) {
	for _, gso := range []bool{false, true} {
		c := DefaultThroughputConfig()
		c.Duration, c.GSO, c.GRO, c.CPUs = 100*time.Millisecond, gso, gso, [2]int{-1, -1}
		r, err := ThroughputRaw(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records == 0 || r.Gbps <= 0 {
			t.Fatalf("%+v", r)
		}
		t.Logf("%s: %.0f rec/s %s", r.Name, r.RecPerS, r.Note)
	}
}

func TestCastingRunners(t *testing.T) {
	for _, mode := range []affinity.Strategy{affinity.Spin, affinity.Park} {
		c := DefaultRTTConfig()
		c.N, c.Warmup, c.Mode, c.CPUs = 300, 20, mode, [2]int{-1, -1}
		r, err := RTTCasting(c)
		if err != nil {
			t.Fatal(mode, err)
		}
		if r.Latency.N != 300 || r.Name != "casting-udp" {
			t.Fatalf("%+v", r)
		}
	}
	for _, walOn := range []bool{false, true} {
		c := DefaultThroughputConfig()
		c.Duration, c.CPUs = 100*time.Millisecond, [2]int{-1, -1}
		r, err := ThroughputCasting(c, walOn, walOn)
		if err != nil {
			t.Fatal(err)
		}
		if r.Records == 0 {
			t.Fatalf("%+v", r)
		}
		t.Logf("%s: %.0f rec/s %s", r.Name, r.RecPerS, r.Note)
	}
}
