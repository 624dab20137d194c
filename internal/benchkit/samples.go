package benchkit

import "github.com/walcast/walcast/internal/latency"

// Samples, Summary and their functions live in internal/latency (which
// imports nothing of ours, so cast and replay tests can use it too); these
// aliases keep benchkit's API whole for the bench module.
type (
	Samples = latency.Samples
	Summary = latency.Summary
)

// NewSamples preallocates room for n values (see [latency.NewSamples]).
func NewSamples(n int) *Samples { return latency.NewSamples(n) }

// Summarize returns the distribution of vals (see [latency.Summarize]).
func Summarize(vals []int64) Summary { return latency.Summarize(vals) }

// Ratio returns a/b, or NaN when b is zero (see [latency.Ratio]).
func Ratio(a, b float64) float64 { return latency.Ratio(a, b) }
