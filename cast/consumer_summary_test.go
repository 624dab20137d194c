package cast

import (
	"math"
	"slices"
)

// samples is a tiny percentile recorder for the benchmarks here
// (internal/benchkit imports cast, so it cannot be
// used from this package's tests).
type samples struct{ v []int64 }

func newSamples(n int) *samples { return &samples{v: make([]int64, 0, n)} }

func (s *samples) Record(ns int64) { s.v = append(s.v, ns) }

type summary struct {
	N                  int
	Min, P50, P99, Max int64
	StdDev             float64
}

// Summarize uses the nearest-rank method.
func (s *samples) Summarize() summary {
	if len(s.v) == 0 {
		return summary{}
	}
	v := slices.Clone(s.v)
	slices.Sort(v)
	rank := func(p float64) int64 { return v[max(0, int(math.Ceil(p/100*float64(len(v))))-1)] }
	var sum, sq float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		sq += (float64(x) - mean) * (float64(x) - mean)
	}
	return summary{N: len(v), Min: v[0], P50: rank(50), P99: rank(99), Max: v[len(v)-1], StdDev: math.Sqrt(sq / float64(len(v)))}
}
