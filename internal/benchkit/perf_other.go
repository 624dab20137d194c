//go:build !linux

package benchkit

import "fmt"

// Counters is the perf counter group; outside Linux every event is n/a.
type Counters struct{}

// OpenCounters reports that perf counters exist only on Linux.
func OpenCounters() (*Counters, error) {
	return &Counters{}, fmt.Errorf("benchkit: perf_event_open: %w", ErrUnsupported)
}

// OpenCountersFor reports that perf counters exist only on Linux.
func OpenCountersFor(int) (*Counters, error) { return OpenCounters() }

// Available lists no events.
func (c *Counters) Available() []string { return nil }

// Start does nothing.
func (c *Counters) Start() error { return nil }

// Stop returns every event as n/a.
func (c *Counters) Stop(ops int64) ([]PerfCount, error) {
	out := make([]PerfCount, len(PerfEvents))
	for i, n := range PerfEvents {
		out[i] = PerfCount{Name: n, Why: "not Linux"}
	}
	return out, nil
}

// Close does nothing.
func (c *Counters) Close() error { return nil }
