package benchkit

import (
	"math"
	"testing"
)

func TestRowCompareTo(t *testing.T) {
	r := Row{Name: "x", Latency: Summary{N: 1, P50: 110, P99: 240}, RecPerS: 50}
	r.CompareTo(Row{Name: "raw", Latency: Summary{N: 1, P50: 100, P99: 200}, RecPerS: 100})
	if r.Floor != "raw" || math.Abs(r.RatioP50-1.1) > 1e-9 || r.RatioP99 != 1.2 || r.RatioTput != 0.5 {
		t.Fatalf("%+v", r)
	}
}

// TestPerSend: every row hands the kernel at most what one GSO send
// holds, the floor's unit (45 frames of 1443 bytes), and Batch when that
// is less or GSO is off.
func TestPerSend(t *testing.T) {
	for _, tc := range []struct {
		size, batch int
		gso         bool
		want, floor int
	}{
		{144, 64, true, 64, 64},
		{1443, 64, true, 45, 45},
		{1443, 90, true, 45, 45},
		{1443, 16, true, 16, 16},
		{1443, 64, false, 64, 45},
		{1472, 1, true, 1, 1},
	} {
		c := DefaultThroughputConfig()
		c.Size, c.Batch, c.GSO = tc.size, tc.batch, tc.gso
		if got := c.PerSend(); got != tc.want {
			t.Errorf("size %d batch %d gso %v: PerSend %d, want %d", tc.size, tc.batch, tc.gso, got, tc.want)
		}
		if got := c.gsoPerSend(); got != tc.floor {
			t.Errorf("size %d batch %d: the floor's %d, want %d", tc.size, tc.batch, got, tc.floor)
		}
	}
}
