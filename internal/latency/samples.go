package latency

import (
	"math"
	"slices"
)

// Samples records up to a fixed number of int64 values (ns) without
// allocating, and summarises them with exact percentiles.
type Samples struct {
	v       []int64
	dropped int64 // values recorded after the buffer was full
}

// NewSamples preallocates room for n values.
func NewSamples(n int) *Samples { return &Samples{v: make([]int64, 0, n)} }

// Record adds one value; once full, values are counted in Dropped and
// otherwise ignored.
func (s *Samples) Record(ns int64) {
	if len(s.v) == cap(s.v) {
		s.dropped++
		return
	}
	s.v = append(s.v, ns)
}

// Len is the number of values recorded.
func (s *Samples) Len() int { return len(s.v) }

// Values returns the recorded values in recording order (owned by s).
func (s *Samples) Values() []int64 { return s.v }

// Dropped is the number of values that did not fit.
func (s *Samples) Dropped() int64 { return s.dropped }

// Reset forgets every value, keeping the buffer.
func (s *Samples) Reset() { s.v = s.v[:0]; s.dropped = 0 }

// Summary is a latency distribution in ns.
type Summary struct {
	N      int     `json:"n"`
	Min    int64   `json:"min_ns"`
	P50    int64   `json:"p50_ns"`
	P90    int64   `json:"p90_ns"`
	P99    int64   `json:"p99_ns"`
	P999   int64   `json:"p999_ns"`
	Max    int64   `json:"max_ns"`
	Mean   float64 `json:"mean_ns"`
	StdDev float64 `json:"stddev_ns"`
}

// Summarize sorts a copy of the values and returns their distribution.
// Percentiles use the nearest-rank method. It allocates (call it after
// the measurement).
func (s *Samples) Summarize() Summary { return Summarize(s.v) }

// Summarize returns the distribution of vals (not modified).
func Summarize(vals []int64) Summary {
	if len(vals) == 0 {
		return Summary{}
	}
	v := slices.Clone(vals)
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(len(v))
	var sq float64
	for _, x := range v {
		d := float64(x) - mean
		sq += d * d
	}
	return Summary{
		N: len(v), Min: v[0], Max: v[len(v)-1],
		P50: rank(v, 50), P90: rank(v, 90), P99: rank(v, 99), P999: rank(v, 99.9),
		Mean: mean, StdDev: math.Sqrt(sq / float64(len(v))),
	}
}

// rank returns the nearest-rank q-th percentile of sorted v.
func rank(v []int64, q float64) int64 {
	i := int(math.Ceil(q*float64(len(v))/100-1e-9)) - 1 // tolerance: 99.9*1000/100 is 999.0000000000001
	return v[max(0, min(i, len(v)-1))]
}

// Ratio returns a/b, or NaN when b is zero (a ratio to a floor that was
// not measured is not a number, not infinity).
func Ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
