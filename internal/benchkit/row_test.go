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
